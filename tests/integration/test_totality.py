"""No single value stops a pipeline: values that do not fit a check fail their row, not the job.

Every test here runs with ANSI mode on (Spark 4's default, and the mode in which
an implicit cast of a bad value aborts the job), and checks two things: the
job finishes, and the rows that could not be compared are quarantined with a
message naming what was found. Regexes Spark cannot compile are config errors
raised when the stage is built, before any data is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.expectations.stage import ExpectationStage
from quarantine.expectations.suite import parse_suite
from quarantine.stage import Stage
from quarantine.stages import build_stage as checks_from_spec
from quarantine.stages import build_stage as expectation_from_spec


@pytest.fixture
def ansi(spark: Any) -> Iterator[Any]:
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)


def _records(spark: Any, rows: list[tuple[Any, ...]], ddl: str) -> DataFrame:
    src = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], f"id INT, {ddl}")
    fields = [c for c in src.columns if c != "id"]
    return src.select("id", F.struct(*fields).alias("rec"))


def _run(df: DataFrame, stage: Stage) -> list[Any]:
    return [r[stage.name] for r in apply_stages(df, [stage]).orderBy("id").collect()]


def _expect(*expectations: dict[str, Any]) -> ExpectationStage:
    suite = parse_suite({"name": "t", "expectations": list(expectations)})
    return ExpectationStage(name="expect", suite=suite, input="rec")


def _errors(out: list[Any]) -> list[str | None]:
    assert all((r["result"] is None) != (r["error"] is None) for r in out)
    return [r["error"]["message"] if r["error"] is not None else None for r in out]


def test_string_against_numeric_bounds_fails_the_row_not_the_job(ansi: Any) -> None:
    df = _records(ansi, [("5",), ("abc",), (None,), ("1e3",), (" 7 ",)], "s STRING")
    stage = _expect(
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "s", "min_value": 0, "max_value": 10}}
    )
    messages = _errors(_run(df, stage))
    assert messages[0] is None and messages[2] is None and messages[4] is None
    assert messages[1] is not None and "'abc'" in messages[1] and "string" in messages[1]
    assert "not a number" in messages[1]
    assert messages[3] is not None and "'1e3'" in messages[3]


def test_complex_values_against_numeric_bounds_fail_every_row_naming_the_type(ansi: Any) -> None:
    df = _records(ansi, [([1, 2], {"a": 1}), (None, None)], "a ARRAY<INT>, m MAP<STRING, INT>")
    stage = _expect(
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "a", "min_value": 0, "max_value": 10}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "m", "min_value": 0}},
    )
    messages = _errors(_run(df, stage))
    assert messages[1] is None  # NULLs are out of the domain, as in GX
    assert messages[0] is not None
    assert "array<int>" in messages[0] and "map<string,int>" in messages[0]


def test_a_value_set_of_mixed_types_fails_the_row_not_the_job(ansi: Any) -> None:
    df = _records(ansi, [(1, "abc"), (3, "x"), (None, "1"), (2, None)], "i INT, s STRING")
    stage = _expect(
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "i", "value_set": [1, "abc", 2.0]}},
        {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": "s", "value_set": [1, "x"]}},
    )
    messages = _errors(_run(df, stage))
    assert messages[0] is None
    assert messages[1] is not None and "in_set(column=i" in messages[1] and "not_be_in_set(column=s" in messages[1]
    assert messages[2] is not None and "'1'" in messages[2]  # "1" is the number 1: in the set
    assert messages[3] is None


def test_a_python_only_regex_is_a_config_error_when_the_suite_loads(tmp_path: Path) -> None:
    suite = tmp_path / "s.json"
    pattern = "^(?P<prefix>ord)-[0-9]+$"
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "order_id", "regex": pattern}},
    ]}))
    with pytest.raises(ConfigError) as info:
        expectation_from_spec(StageSpec("expect", "expectation", None, {"suite": str(suite)}, 4))
    text = str(info.value)
    assert "expect_column_values_to_match_regex" in text and "order_id" in text and pattern in text


def test_a_regex_java_cannot_compile_is_a_config_error_when_the_suite_loads(spark: Any, tmp_path: Path) -> None:
    suite = tmp_path / "s.json"
    pattern = "^a{,3}$"  # Python 3.11 reads {,3} as 0..3; java.util.regex rejects it
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_not_match_regex", "kwargs": {"column": "sku", "regex": pattern}},
    ]}))
    with pytest.raises(ConfigError) as info:
        expectation_from_spec(StageSpec("expect", "expectation", None, {"suite": str(suite)}, 4))
    text = str(info.value)
    assert "expect_column_values_to_not_match_regex" in text and "sku" in text and pattern in text


def test_a_check_regex_java_cannot_compile_is_a_config_error(spark: Any) -> None:
    rules = [{"column": "sku", "check": "regex", "pattern": "^a{,3}$"}]
    with pytest.raises(ConfigError, match=r"rules\[0\]\.pattern"):
        checks_from_spec(StageSpec("check", "checks", None, {"rules": rules}, 2))


def test_check_range_on_a_string_field_fails_the_row_not_the_job(ansi: Any) -> None:
    df = _records(ansi, [("5",), ("abc",), (None,)], "s STRING")
    stage = checks_from_spec(StageSpec("check", "checks", "rec", {"rules": [
        {"column": "s", "check": "range", "min": 0, "max": 10},
    ]}, 2))
    messages = _errors(_run(df, stage))
    assert messages[0] is None and messages[2] is None
    assert messages[1] is not None and '"abc"' in messages[1] and "string" in messages[1]


def test_check_in_set_and_length_on_any_type_fail_the_row_not_the_job(ansi: Any) -> None:
    df = _records(ansi, [(7, [1]), (None, None)], "i INT, a ARRAY<INT>")
    stage = checks_from_spec(StageSpec("check", "checks", "rec", {"rules": [
        {"column": "i", "check": "in_set", "values": ["abc", 7]},
        {"column": "i", "check": "length", "max": 3},
        {"column": "a", "check": "length", "max": 3},
        {"column": "a", "check": "range", "min": 0},
    ]}, 2))
    messages = _errors(_run(df, stage))
    assert messages[1] is None
    assert messages[0] is not None and "field 'i'" not in messages[0]
    assert "array<int>" in messages[0]


def test_value_lengths_with_min_above_max_fail_every_non_null_value_as_in_gx(ansi: Any) -> None:
    # GX's own test case negative_test_with_max_lt_min: min_value=1, max_value=0 -> every value unexpected
    df = _records(ansi, [("smart",), ("",), (None,)], "s STRING")
    stage = _expect(
        {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "s", "min_value": 1, "max_value": 0}}
    )
    assert not stage.untranslated
    messages = _errors(_run(df, stage))
    assert messages[0] is not None and messages[1] is not None and messages[2] is None


def test_value_lengths_with_fractional_bounds_use_gx_integers(ansi: Any) -> None:
    # GX 1.x's pydantic model holds min_value/max_value as int: 1.9 -> 1, 3.5 -> 3, "2" -> 2
    df = _records(ansi, [("a",), ("abc",), ("abcd",)], "s STRING")
    stage = _expect(
        {"type": "expect_column_value_lengths_to_be_between",
         "kwargs": {"column": "s", "min_value": 1.9, "max_value": 3.5}}
    )
    assert not stage.untranslated
    messages = _errors(_run(df, stage))
    assert messages[0] is None and messages[1] is None  # lengths 1 and 3 are within [1, 3]
    assert messages[2] is not None and "(length 4)" in messages[2]
