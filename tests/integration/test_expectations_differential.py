"""Differential check: our row predicates against GX's own Spark validation.

For generated batches (nulls, NaN, ranges, unicode, mixed lengths, duplicates)
and every translated expectation type, the number of rows our predicate marks
unexpected equals GX's ``unexpected_count`` (for ``_to_be_of_type``, which GX
validates as one schema-level verdict: all rows or none, matching GX's success).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.expectations import TRANSLATED_TYPES, parse_suite, translate, validate_batch
from quarantine.expectations.suite import Suite

_WORDS = [
    "abc", "ABC", "abc123", "x", "", " ", "é", "Ünïcödé", "日本語", "日本", "😀", "a😀b",
    "ord-000123", "ord-12345", "ord-0001234", "user@example.com", "bad@", "@bad.com",
    "tab\tsep", "line\nbreak", "a" * 40, "ß", "İ", "999", "-1",
]


def _frame(spark: SparkSession, seed: int, n: int = 300) -> DataFrame:
    rnd = random.Random(seed)
    rows: list[tuple[Any, ...]] = []
    for _ in range(n):
        i = None if rnd.random() < 0.1 else rnd.randint(-20, 120)
        x: float | None
        r = rnd.random()
        if r < 0.1:
            x = None
        elif r < 0.13:
            x = float("nan")
        else:
            x = rnd.uniform(-50.0, 150.0)
        s = None if rnd.random() < 0.12 else rnd.choice(_WORDS)
        d = None if rnd.random() < 0.05 else rnd.randint(0, n)  # some duplicates
        c = None if rnd.random() < 0.1 else rnd.choice(["EUR", "USD", "GBP", "eur", "€", "JPY"])
        rows.append((i, x, s, d, c))
    return spark.createDataFrame(rows, "i INT, x DOUBLE, s STRING, d INT, c STRING")


_EXPECTATIONS: list[dict[str, Any]] = [
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "s"}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x"}},
    {"type": "expect_column_values_to_be_null", "kwargs": {"column": "i"}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "i", "min_value": 0, "max_value": 100}},
    {"type": "expect_column_values_to_be_between",
     "kwargs": {"column": "i", "min_value": 0, "max_value": 100, "strict_min": True, "strict_max": True}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "i", "min_value": 10, "strict_min": True}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "i", "max_value": 50, "strict_max": True}},
    {"type": "expect_column_values_to_be_between",
     "kwargs": {"column": "x", "min_value": -10.5, "max_value": 99.9, "mostly": 0.5}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "c", "value_set": ["EUR", "USD", "GBP"]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "s", "value_set": ["é", "日本語", "😀", "abc"]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "i", "value_set": [1, 2, 3, 50, 99]}},
    {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": "c", "value_set": ["€", "JPY"]}},
    {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": "s", "value_set": ["", " ", "ß"]}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "^[a-z]+$"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "b"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "日"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "(?i)^abc"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "^ord-[0-9]{6}$"}},
    {"type": "expect_column_values_to_match_regex",
     "kwargs": {"column": "s", "regex": "^[^@\\s]+@[^@\\s]+\\.[A-Za-z]{2,}$"}},
    {"type": "expect_column_values_to_not_match_regex", "kwargs": {"column": "s", "regex": "\\d"}},
    {"type": "expect_column_values_to_not_match_regex", "kwargs": {"column": "s", "regex": "\\s"}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "min_value": 1, "max_value": 3}},
    {"type": "expect_column_value_lengths_to_be_between",
     "kwargs": {"column": "s", "min_value": 1, "max_value": 3, "strict_min": True, "strict_max": True}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "min_value": 2}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "max_value": 10}},
    # GX's own case negative_test_with_max_lt_min: min > max fails every non-null value
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "min_value": 3, "max_value": 1}},
    # GX's model holds length bounds as int: 1.9 -> 1, 3.5 -> 3, "2" -> 2
    {"type": "expect_column_value_lengths_to_be_between",
     "kwargs": {"column": "s", "min_value": 1.9, "max_value": 3.5}},
    {"type": "expect_column_value_lengths_to_be_between",
     "kwargs": {"column": "s", "min_value": -0.5, "max_value": 2.99, "strict_max": True}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "min_value": "2"}},
    {"type": "expect_column_value_lengths_to_equal", "kwargs": {"column": "s", "value": 3}},
    {"type": "expect_column_value_lengths_to_equal", "kwargs": {"column": "s", "value": 3.0}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "i", "min_value": 2, "max_value": 2}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "d"}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "s"}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "c", "mostly": 0.1}},
    {"type": "expect_column_values_to_be_of_type", "kwargs": {"column": "s", "type_": "StringType"}},
    {"type": "expect_column_values_to_be_of_type", "kwargs": {"column": "i", "type_": "StringType"}},
    {"type": "expect_column_values_to_be_of_type", "kwargs": {"column": "i", "type_": "IntegerType"}},
    {"type": "expect_column_values_to_be_of_type", "kwargs": {"column": "x", "type_": "NumericType"}},
    {"type": "expect_column_values_to_be_of_type", "kwargs": {"column": "x", "type_": "LongType"}},
]

_SUITE: Suite = parse_suite({"name": "differential", "expectations": _EXPECTATIONS})


def _ours(df: DataFrame, suite: Suite) -> dict[str, int]:
    record = F.struct(*[F.col(c) for c in df.columns])
    flags = []
    for spec in suite.expectations:
        check = translate(spec, record, df.schema)
        assert check is not None, f"{spec.name} should be translated"
        flags.append(check.unexpected.alias(spec.name))
    # window predicates (unique) must be projected before they are aggregated
    marked = df.select(*flags)
    row = marked.select(*[F.count(F.when(F.col(f"`{c}`"), 1)).alias(c) for c in marked.columns]).collect()[0]
    return {spec.name: int(row[spec.name]) for spec in suite.expectations}


def test_every_translated_type_is_covered() -> None:
    assert {e["type"] for e in _EXPECTATIONS} == set(TRANSLATED_TYPES)


@pytest.mark.parametrize("seed", [7, 2026])
def test_unexpected_counts_equal_gx(spark: SparkSession, seed: int) -> None:
    df = _frame(spark, seed).cache()
    total = df.count()
    ours = _ours(df, _SUITE)
    outcome = validate_batch(df, _SUITE)
    results = {r["expectation_config"]["meta"]["quarantine_name"]: r for r in outcome.result_json["results"]}
    mismatches = []
    for spec in _SUITE.expectations:
        r = results[spec.name]
        assert not r["exception_info"].get("raised_exception"), (spec.name, r["exception_info"])
        if spec.type == "expect_column_values_to_be_of_type":
            gx_count = 0 if r["success"] else total
        else:
            gx_count = r["result"]["unexpected_count"]
            assert outcome.unexpected_counts[spec.name] == gx_count
        if ours[spec.name] != gx_count:
            mismatches.append((spec.name, spec.arguments, "ours", ours[spec.name], "gx", gx_count))
    assert not mismatches, mismatches
    # the data really exercises the predicates: most expectations see failures, some pass
    assert sum(1 for v in ours.values() if v > 0) >= len(ours) - 6
    assert any(v == 0 for v in ours.values())
    df.unpersist()


# Where GX's own Spark query aborts on a value (ANSI mode), GX reports the expectation as
# failed with the exception; ours fails exactly the rows that cannot be compared, or lie outside.
_GX_RAISES: list[tuple[dict[str, Any], str]] = [
    ({"type": "expect_column_values_to_be_between", "kwargs": {"column": "s", "min_value": -5, "max_value": 1000}},
     "s IS NOT NULL AND (try_cast(s AS DOUBLE) IS NULL OR NOT try_cast(s AS DOUBLE) BETWEEN -5 AND 1000)"),
    ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "i", "value_set": [1, "abc", 2.0]}},
     "i IS NOT NULL AND i NOT IN (1, 2)"),
    ({"type": "expect_column_values_to_be_between", "kwargs": {"column": "a", "min_value": 0}},
     "a IS NOT NULL"),
]


def _raised(info: dict[str, Any]) -> bool:
    # GX 1.x: {"raised_exception": …} or, per failing metric, {"<metric id>": {"raised_exception": …}}
    if info.get("raised_exception"):
        return True
    return any(isinstance(v, dict) and v.get("raised_exception") for v in info.values())


def test_where_gx_aborts_on_a_value_gx_fails_the_expectation_and_we_fail_those_rows(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        df = _frame(spark, 11).withColumn("a", F.when(F.col("i") > 50, F.array(F.col("i")))).cache()
        suite = parse_suite({"name": "raises", "expectations": [e for e, _ in _GX_RAISES]})
        ours = _ours(df, suite)
        outcome = validate_batch(df, suite)
        results = [r for r in outcome.result_json["results"]]
        assert len(results) == len(_GX_RAISES)
        for r in results:
            assert r["success"] is False and _raised(r["exception_info"]), r["expectation_config"]
        for spec, (_, sql) in zip(suite.expectations, _GX_RAISES, strict=True):
            assert ours[spec.name] == df.where(sql).count() > 0, (spec.name, ours[spec.name])
        df.unpersist()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
