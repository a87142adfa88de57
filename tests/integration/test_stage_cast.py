"""cast: try_cast each listed field; a non-null value that will not convert fails the record."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.stages import build_stage as from_spec
from tests.helpers import kafka_df

ROW_DDL = "order_id STRING, amount STRING, quantity STRING, created_at STRING, day STRING"


def _cast(spark: Any, rows: list[tuple[Any, ...]], options: dict[str, Any]) -> list[Any]:
    df = kafka_df(spark, [b"x"] * len(rows))
    src = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], f"offset BIGINT, {ROW_DDL}")
    fields = [c for c in src.columns if c != "offset"]
    df = df.join(src.select("offset", F.struct(*fields).alias("order")), "offset")
    stage = from_spec(StageSpec("convert", "cast", "order", options, 2))
    out = apply_stages(df, [stage])
    return [r.convert for r in out.orderBy("offset").collect()]


OPTIONS = {
    "columns": {"amount": "DECIMAL(10,2)", "quantity": "INT", "created_at": "TIMESTAMP", "day": "DATE"},
    "formats": {"created_at": "yyyy-MM-dd HH:mm:ss", "day": "dd/MM/yyyy"},
}


def test_good_values_convert_and_other_fields_keep_their_place(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", "12.50", "3", "2026-01-02 03:04:05", "31/12/2025")], OPTIONS)
    assert row.error is None
    r = row.result
    assert list(r.asDict()) == ["order_id", "amount", "quantity", "created_at", "day"]
    assert r.order_id == "A1"
    assert r.amount == decimal.Decimal("12.50")
    assert r.quantity == 3
    assert r.created_at == dt.datetime(2026, 1, 2, 3, 4, 5)
    assert r.day == dt.date(2025, 12, 31)


def test_null_fields_stay_null_and_pass(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", None, None, None, None)], OPTIONS)
    assert row.error is None
    assert (row.result.amount, row.result.quantity, row.result.created_at) == (None, None, None)


def test_bad_timestamp_names_field_type_format_and_value(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", "1", "1", "2026-13-45 00:00:00", None)], OPTIONS)
    assert row.result is None
    e = row.error
    assert (e.stage, e.kind, e.error_class) == ("convert", "transform", "CastFailed")
    assert e.message == (
        "field 'created_at': cannot convert \"2026-13-45 00:00:00\" to TIMESTAMP (format 'yyyy-MM-dd HH:mm:ss')"
    )


def test_every_failing_field_is_listed(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", "12,50", "three", "2026-01-02 03:04:05", "2025-12-31")], OPTIONS)
    assert row.error.message == (
        "field 'amount': cannot convert \"12,50\" to DECIMAL(10,2); "
        "field 'quantity': cannot convert \"three\" to INT; "
        "field 'day': cannot convert \"2025-12-31\" to DATE (format 'dd/MM/yyyy')"
    )


def test_overflow_is_a_failure_not_a_silent_null(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", "123456789012.5", "99999999999", None, None)], OPTIONS)
    assert row.error.message == (
        "field 'amount': cannot convert \"123456789012.5\" to DECIMAL(10,2); "
        "field 'quantity': cannot convert \"99999999999\" to INT"
    )


def test_timestamp_without_format_uses_spark_defaults(spark: Any) -> None:
    rows = _cast(
        spark,
        [("A1", None, None, "2026-01-02T03:04:05", None), ("A2", None, None, "yesterday", None)],
        {"columns": {"created_at": "TIMESTAMP"}},
    )
    assert rows[0].result.created_at == dt.datetime(2026, 1, 2, 3, 4, 5)
    assert rows[1].error.message == "field 'created_at': cannot convert \"yesterday\" to TIMESTAMP"


def test_unicode_value_is_quoted_in_the_message(spark: Any) -> None:
    (row,) = _cast(spark, [("A1", "١٢", None, None, None)], {"columns": {"amount": "DOUBLE"}})
    assert row.error.message == "field 'amount': cannot convert \"١٢\" to DOUBLE"


def test_numeric_to_numeric_from_json_stage(spark: Any) -> None:
    from quarantine.stages.decode import DecodeUtf8
    json_spec = from_spec

    raw = [b'{"id": "1", "amount": 2.5}', b'{"id": "x", "amount": 1e300}']
    stages = [
        DecodeUtf8("decode"),
        json_spec(StageSpec("parse", "json", None, {"schema": "id STRING, amount DOUBLE"}, 1)),
        from_spec(StageSpec("convert", "cast", None, {"columns": {"id": "BIGINT", "amount": "DECIMAL(3,1)"}}, 2)),
    ]
    rows = apply_stages(kafka_df(spark, raw), stages).orderBy("offset").collect()
    assert rows[0].convert.result.asDict() == {"id": 1, "amount": decimal.Decimal("2.5")}
    assert rows[1].convert.error.message == (
        "field 'id': cannot convert \"x\" to BIGINT; field 'amount': cannot convert 1.0E300 to DECIMAL(3,1)"
    )


def test_exactly_one_of_result_and_error(spark: Any) -> None:
    rows = _cast(
        spark,
        [("A", "1", "1", None, None), ("B", "x", "1", None, None), ("C", None, None, None, None)],
        OPTIONS,
    )
    assert [(r.result is None) != (r.error is None) for r in rows] == [True, True, True]
    assert [r.error.error_class if r.error else None for r in rows] == [None, "CastFailed", None]
