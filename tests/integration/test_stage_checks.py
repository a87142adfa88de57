"""checks: native row rules; the first failing rule names the class, every failing rule is listed."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.stages import build_stage as from_spec
from tests.helpers import kafka_df

ORDER_DDL = "order_id STRING, amount DOUBLE, currency STRING, quantity INT, sku STRING, email STRING"


def _check(spark: Any, rows: list[tuple[Any, ...]], rules: list[dict[str, Any]]) -> list[Any]:
    src = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], f"offset BIGINT, {ORDER_DDL}")
    fields = [c for c in src.columns if c != "offset"]
    df = kafka_df(spark, [b"x"] * len(rows)).join(src.select("offset", F.struct(*fields).alias("order")), "offset")
    stage = from_spec(StageSpec("check_order", "checks", "order", {"rules": rules}, 3))
    return [r.check_order for r in apply_stages(df, [stage]).orderBy("offset").collect()]


GOOD = ("A1", 10.0, "EUR", 2, "ABC-123", "ada@example.com")


def _with(**changes: Any) -> tuple[Any, ...]:
    names = [n.split()[0] for n in ORDER_DDL.split(", ")]
    row = dict(zip(names, GOOD, strict=True))
    row.update(changes)
    return tuple(row[n] for n in names)


def test_a_passing_row_is_returned_unchanged(spark: Any) -> None:
    rules = [
        {"column": "amount", "check": "range", "min": 0, "max": 10000},
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
        {"column": "order_id", "check": "not_null"},
    ]
    (row,) = _check(spark, [GOOD], rules)
    assert row.error is None
    assert tuple(row.result) == GOOD


def test_range_failure_message_and_class(spark: Any) -> None:
    (row,) = _check(spark, [_with(amount=15000.5)], [{"column": "amount", "check": "range", "min": 0, "max": 10000}])
    assert row.result is None
    e = row.error
    assert (e.stage, e.kind, e.error_class) == ("check_order", "validate", "range")
    assert e.message == "field 'amount': expected between 0 and 10000, found 15000.5"


def test_exclusive_bounds_and_one_sided_ranges(spark: Any) -> None:
    rules = [
        {"column": "amount", "check": "range", "min": 0, "min_inclusive": False},
        {"column": "quantity", "check": "range", "max": 10, "max_inclusive": False},
    ]
    ok, at_bounds = _check(spark, [_with(amount=0.01, quantity=9), _with(amount=0.0, quantity=10)], rules)
    assert ok.error is None
    assert at_bounds.error.message == (
        "field 'amount': expected > 0, found 0.0; field 'quantity': expected < 10, found 10"
    )


def test_first_failing_rule_names_the_class_and_all_failures_are_listed(spark: Any) -> None:
    rules = [
        {"column": "order_id", "check": "not_null"},
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
        {"column": "amount", "check": "range", "min": 0, "max": 10000},
        {"column": "sku", "check": "regex", "pattern": r"[A-Z]{3}-\d+"},
    ]
    (row,) = _check(spark, [_with(currency="JPY", amount=-1.0, sku="abc-1")], rules)
    assert row.error.error_class == "in_set"
    assert row.error.message == (
        'field \'currency\': expected one of "EUR", "USD", found "JPY"; '
        "field 'amount': expected between 0 and 10000, found -1.0; "
        "field 'sku': expected to match /[A-Z]{3}-\\d+/, found \"abc-1\""
    )


def test_not_null_fails_and_other_checks_pass_on_null(spark: Any) -> None:
    rules = [
        {"column": "amount", "check": "range", "min": 0, "max": 1},
        {"column": "currency", "check": "in_set", "values": ["EUR"]},
        {"column": "sku", "check": "regex", "pattern": "x"},
        {"column": "email", "check": "length", "min": 3},
        {"column": "order_id", "check": "not_null"},
    ]
    (row,) = _check(spark, [(None, None, None, None, None, None)], rules)
    assert (row.error.error_class, row.error.message) == (
        "not_null",
        "field 'order_id': expected a value, found NULL",
    )


def test_regex_full_match_versus_search(spark: Any) -> None:
    full = [{"column": "sku", "check": "regex", "pattern": r"\d+"}]
    search = [{"column": "sku", "check": "regex", "pattern": r"\d+", "match": "search"}]
    rows = [_with(sku="123"), _with(sku="ABC-123"), _with(sku="123\n")]
    assert [r.error is None for r in _check(spark, rows, full)] == [True, False, False]
    assert [r.error is None for r in _check(spark, rows, search)] == [True, True, True]
    (msg,) = [r.error.message for r in _check(spark, [_with(sku="none")], search)]
    assert msg == "field 'sku': expected to contain a match of /\\d+/, found \"none\""


def test_not_in_set_length_and_unicode(spark: Any) -> None:
    rules = [
        {"column": "currency", "check": "not_in_set", "values": ["XXX", "Ø"]},
        {"column": "order_id", "check": "length", "min": 2, "max": 4},
    ]
    ok, bad = _check(spark, [_with(order_id="東京"), _with(currency="Ø", order_id="東京東京東")], rules)
    assert ok.error is None
    assert bad.error.error_class == "not_in_set"
    assert bad.error.message == (
        'field \'currency\': expected none of "XXX", "Ø", found "Ø"; '
        "field 'order_id': expected length between 2 and 4, found \"東京東京東\" (length 5)"
    )


def test_expr_rule_sees_the_staged_dataframe(spark: Any) -> None:
    rules = [{"check": "expr", "expr": "order.amount * order.quantity <= 100"}]
    ok, bad = _check(spark, [_with(amount=10.0, quantity=10), _with(amount=10.0, quantity=11)], rules)
    assert ok.error is None
    assert (bad.error.error_class, bad.error.message) == (
        "expr",
        "row: expected order.amount * order.quantity <= 100, found order.amount = 10.0, order.quantity = 11",
    )


def test_plain_column_input(spark: Any) -> None:
    df = kafka_df(spark, [b"12", b"1234567"]).withColumn("text", F.col("value").cast("string"))
    stage = from_spec(StageSpec("check_text", "checks", "text", {"rules": [{"check": "length", "max": 3}]}, 0))
    ok, bad = [r.check_text for r in apply_stages(df, [stage]).orderBy("offset").collect()]
    assert ok.result == "12"
    assert bad.error.message == 'input: expected length <= 3, found "1234567" (length 7)'


def test_invalid_expr_is_a_config_error_when_spark_is_up(spark: Any) -> None:
    with pytest.raises(ConfigError) as info:
        from_spec(StageSpec("c", "checks", None, {"rules": [{"check": "expr", "expr": "amount >"}]}, 4))
    assert info.value.key == "stages[4].options.rules[0].expr"


def test_exactly_one_of_result_and_error(spark: Any) -> None:
    rules = [{"column": "amount", "check": "range", "min": 0, "max": 100}]
    rows = _check(spark, [GOOD, _with(amount=1000.0), _with(amount=None)], rules)
    assert [(r.result is None) != (r.error is None) for r in rows] == [True, True, True]
