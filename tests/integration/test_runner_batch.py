"""The batch runner end to end on real Delta tables: split, reconcile, idempotence, raw bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from quarantine.config import parse_config
from quarantine.errors import ConfigError, SourceError
from quarantine.pipeline import Pipeline
from quarantine.schema import KAFKA_SOURCE_SCHEMA, QUARANTINE_SCHEMA
from quarantine.tables import table_exists
from tests.helpers import kafka_df, orders_config

SCHEMA = "order_id STRING, amount DOUBLE"


def _config(d: Path, **errors: Any) -> dict[str, Any]:
    return orders_config(d, **errors)


def _pipeline(spark: Any, d: Path, **errors: Any) -> Pipeline:
    return Pipeline.from_config(parse_config(_config(d, **errors)), spark, listeners=[])


GOOD = [b'{"order_id":"a","amount":1.5}', b'{"order_id":"b","amount":2}', "{\"order_id\":\"ü€\",\"amount\":3}".encode()]
POISON = [b"\xff\xfe\xfa", b'{"order_id":"c"', b'{"order_id":"d","amount":"x"}', b'{"amount":4}', b"", None]


def _write_source(spark: Any, d: Path, values: list[bytes | None], **kw: Any) -> None:
    kafka_df(spark, values, **kw).write.format("delta").mode("append").save(str(d / "source"))


def test_every_record_lands_in_exactly_one_table(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, GOOD + POISON)
    summary = _pipeline(spark, table_dir).run()

    target = spark.read.format("delta").load(str(table_dir / "target"))
    quarantine = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert (summary.records_in, summary.records_ok, summary.records_quarantined) == (9, 3, 6)
    assert target.count() + quarantine.count() == 9
    offsets_t = {r[0] for r in target.select("_source_offset").collect()}
    offsets_q = {r[0] for r in quarantine.select("offset").collect()}
    assert offsets_t.isdisjoint(offsets_q)
    assert offsets_t | offsets_q == set(range(9))
    assert summary.quarantined_by_stage() == {"decode": 2, "parse": 4}


def test_target_rows_are_the_parsed_payload_with_source_coordinates(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, GOOD)
    _pipeline(spark, table_dir).run()
    got = spark.read.format("delta").load(str(table_dir / "target")).select("order_id", "amount", "_source_offset")
    expected = spark.createDataFrame(
        [("a", 1.5, 0), ("b", 2.0, 1), ("ü€", 3.0, 2)], "order_id string, amount double, _source_offset bigint"
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_quarantine_rows_follow_the_contract(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, POISON)
    _pipeline(spark, table_dir).run()
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert [f.name for f in q.schema.fields] == [f.name for f in QUARANTINE_SCHEMA.fields]
    rows = {r["offset"]: r for r in q.collect()}
    assert rows[0]["stage"] == "decode" and rows[0]["error_class"] == "InvalidUtf8"
    assert rows[1]["error_class"] == "MalformedJson"
    assert rows[2]["error_class"] == "SchemaMismatch" and "amount" in rows[2]["message"]
    assert rows[3]["error_class"] == "MissingRequiredField" and "order_id" in rows[3]["message"]
    assert rows[5]["error_class"] == "NullInput"
    for r in rows.values():
        assert r["pipeline"] == "orders_test"
        assert r["status"] == "open"
        assert r["kind"] == "deserialize"
        assert r["attempts"] == 1
        assert r["stacktrace"] is None
        assert len(r["error_history"]) == 1
        assert r["first_seen_at"] == r["last_seen_at"]
        assert r["batch_id"] == 0
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table_dir / 'quarantine'}`").first()
    assert detail is not None
    assert detail["properties"].get("delta.enableChangeDataFeed") == "true"
    assert detail["clusteringColumns"] == ["pipeline", "topic", "first_seen_date"]


def test_raw_key_value_and_headers_are_kept_byte_for_byte(spark: Any, table_dir: Path) -> None:
    big = b'{"order_id":"big","amount":' + b"9" * (5 * 1024 * 1024) + b"x}"  # 5 MB, not valid JSON
    values: list[bytes | None] = [b"\x00\x80\xff", b"", None, big, b"\xc3\x28"]
    keys: list[bytes | None] = [b"\x00\x01\xfe", None, b"", b"k" * 300, "ключ".encode()]
    headers: list[list[tuple[str, bytes | None]] | None] = [
        [("trace", b"\x00\xff\x10"), ("empty", b""), ("null", None)],
        None,
        [],
        [("dup", b"1"), ("dup", b"2")],
        [("utf8", "é".encode())],
    ]
    source = kafka_df(spark, values, keys=keys, headers=headers)
    source.write.format("delta").save(str(table_dir / "source"))
    _pipeline(spark, table_dir).run()

    columns = [f.name for f in KAFKA_SOURCE_SCHEMA.fields]
    q = spark.read.format("delta").load(str(table_dir / "quarantine")).select(*columns)
    assert_df_equality(
        q.orderBy("offset"),
        spark.read.format("delta").load(str(table_dir / "source")).orderBy("offset"),
        ignore_nullable=True,
    )


def test_rerunning_the_same_input_changes_nothing_but_history(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, GOOD + POISON)
    _pipeline(spark, table_dir).run()
    again = _pipeline(spark, table_dir).run()  # nothing new: no batch, no write
    assert again.batches == () and "nothing new" in again.render()
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert {r[0] for r in q.select(F.size("error_history")).collect()} == {1}
    _pipeline(spark, table_dir).run(full=True)  # the whole source: its open records run again

    target = spark.read.format("delta").load(str(table_dir / "target"))
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert target.count() == 3
    assert q.count() == 6
    # each failed the same way again: one entry still (a change, not a repetition), counted twice
    assert {(r[0], r[1]) for r in q.select(F.size("error_history"), "error_count").collect()} == {(1, 2)}
    assert q.where("last_seen_at > first_seen_at OR run_id IS NOT NULL").count() == 6


def test_new_records_appended_to_the_source_are_added_once(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, GOOD)
    _pipeline(spark, table_dir).run()
    _write_source(spark, table_dir, [b'{"order_id":"z","amount":9}', b"{"], start_offset=3)
    summary = _pipeline(spark, table_dir).run()
    assert summary.records_in == 2  # the three already in the target are not run again
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 4
    assert spark.read.format("delta").load(str(table_dir / "quarantine")).count() == 1


def test_tolerance_none_quarantines_then_fails_without_writing_target(spark: Any, table_dir: Path) -> None:
    from quarantine.errors import ToleranceExceededError

    _write_source(spark, table_dir, [*GOOD, b"{"])
    with pytest.raises(ToleranceExceededError, match=r"errors\.tolerance"):
        _pipeline(spark, table_dir, tolerance="none").run()
    assert spark.read.format("delta").load(str(table_dir / "quarantine")).count() == 1
    assert not table_exists(spark, str(table_dir / "target"))


def test_a_bad_stage_option_fails_before_anything_is_written(spark: Any, table_dir: Path) -> None:
    _write_source(spark, table_dir, GOOD)
    cfg = _config(table_dir)
    cfg["stages"][1]["options"]["schema"] = "order_id STRNG,"
    with pytest.raises(ConfigError, match=r"stages\[1\]\.options\.schema"):
        Pipeline.from_config(parse_config(cfg), spark, listeners=[])
    assert not table_exists(spark, str(table_dir / "target"))
    assert not table_exists(spark, str(table_dir / "quarantine"))


def test_a_source_that_is_not_kafka_shaped_is_refused_by_name(spark: Any, table_dir: Path) -> None:
    spark.range(3).write.format("delta").save(str(table_dir / "source"))
    with pytest.raises(SourceError, match="missing column value binary"):
        _pipeline(spark, table_dir).run()


def test_the_quarantine_table_cannot_be_the_source(table_dir: Path) -> None:
    cfg = _config(table_dir)
    cfg["errors"]["deadletterqueue.table.name"] = cfg["source"]["path"]
    with pytest.raises(ConfigError, match="must never be the source"):
        parse_config(cfg)


def test_the_quickstart_inspects_the_staged_source_without_writing(spark: Any, table_dir: Path) -> None:
    """README quickstart: `pipe.transform(read_source(pipe.spark, pipe.config.source))`."""
    from quarantine.runners import read_source

    _write_source(spark, table_dir, [GOOD[0], POISON[1]])
    pipe = _pipeline(spark, table_dir)
    staged = pipe.transform(read_source(pipe.spark, pipe.config.source))
    bad = staged.select("offset", "parse.error.message").where("parse.error IS NOT NULL").collect()
    assert [r["offset"] for r in bad] == [1] and bad[0]["message"]
    assert not table_exists(spark, str(table_dir / "target"))
    assert not table_exists(spark, str(table_dir / "quarantine"))


def test_a_quarantine_table_of_an_older_version_gets_the_missing_columns(spark: Any, table_dir: Path) -> None:
    """A table written before ``error_count`` existed: the MERGE path adds the column (NULL in
    old rows) and goes on; the old row's key still matches (counted again, not duplicated)."""
    old_schema = StructType([f for f in QUARANTINE_SCHEMA.fields if f.name != "error_count"])
    _write_source(spark, table_dir, [b"\xff"])
    _pipeline(spark, table_dir).run()
    q = str(table_dir / "quarantine")
    # a table of that version had no statistics property either (issue 63 set it, naming error_count)
    spark.sql(f"ALTER TABLE delta.`{q}` UNSET TBLPROPERTIES ('delta.dataSkippingStatsColumns')")
    spark.read.format("delta").load(q).select(*old_schema.fieldNames()).write.format("delta").mode(
        "overwrite").option("overwriteSchema", "true").save(q)
    assert "error_count" not in spark.read.format("delta").load(q).columns
    _pipeline(spark, table_dir).run(full=True)  # the open record runs again: its row is MERGEd
    after = spark.read.format("delta").load(q)
    assert "error_count" in after.columns and after.count() == 1


def test_a_rerun_says_its_records_in_are_the_open_ones_run_again_and_the_new_ones(
    spark: Any, table_dir: Path
) -> None:
    """Issue 54, point 5: a re-run after a fix printed "records in 350, ok 0" as if the source held
    350 records; its records in are those no earlier run settled, and the summary says so."""
    _write_source(spark, table_dir, GOOD + POISON)
    _pipeline(spark, table_dir).run()
    _write_source(spark, table_dir, [b'{"order_id":"z","amount":9}'], start_offset=len(GOOD + POISON))

    summary = _pipeline(spark, table_dir).run(full=True)  # after a fix: the whole source, open records again

    assert (summary.records_in, summary.records_ok, summary.reopened) == (len(POISON) + 1, 1, len(POISON))
    shown = summary.render()
    assert f"\n    new                {1:>12,}\n" in shown, shown
    assert f"\n    open, run again    {len(POISON):>12,}   (open in quarantine since an earlier run; " in shown, shown
    assert "settled by earlier runs (in the target, replayed or discarded) are not read again" in shown, shown
