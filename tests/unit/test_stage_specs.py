"""Stage options are validated when the stage is built, without Spark; errors name the key."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import ArrayType, DecimalType, IntegerType, StringType, TimestampType

from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.stages import build_stage, python
from quarantine.values.spark import parse_spark_type
from tests import fixtures_py_stage as fx


def _spec(type_: str, options: dict[str, Any], index: int = 2) -> StageSpec:
    return StageSpec(f"s{index}", type_, None, options, index)


def _key_of(fn: Any, *args: Any) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*args)
    return info.value.key


# ---------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INT", IntegerType()),
        (" string ", StringType()),
        ("timestamp", TimestampType()),
        ("DECIMAL(10,2)", DecimalType(10, 2)),
        ("decimal( 38 , 0 )", DecimalType(38, 0)),
    ],
)
def test_atomic_types_parse_without_spark(text: str, expected: Any) -> None:
    assert parse_spark_type(text, "k") == expected


@pytest.mark.parametrize("bad", ["", "INTEGR", "DECIMAL(40,2)", "DECIMAL(5,6)", 42, None])
def test_bad_types_name_the_key_and_list_examples(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spark_type(bad, "stages[1].options.returns")
    assert info.value.key == "stages[1].options.returns"
    assert "a Spark type such as" in info.value.allowed or "DECIMAL(p,s)" in info.value.allowed


def test_complex_types_parse_without_spark_and_a_bad_one_names_the_key() -> None:
    from pyspark.sql import SparkSession

    assert parse_spark_type("ARRAY<INT>", "k") == ArrayType(IntegerType(), True)
    with pytest.raises(ConfigError) as info:
        parse_spark_type("ARRAY<INT", "stages[1].options.returns")
    assert info.value.key == "stages[1].options.returns"
    # Run alone, the unit tier has no Spark (quarantine.ddl reads the type); on a test worker
    # that ran the integration tier first, a session is active and Spark's parser does.
    if SparkSession.getActiveSession() is None:
        assert "expected '>' at position 10, found the end" in info.value.allowed


# ----------------------------------------------------------------------------- cast


def test_cast_builds_field_casts_in_order() -> None:
    stage = build_stage(_spec("cast", {"columns": {"b": "INT", "a": "TIMESTAMP"}, "formats": {"a": "yyyy-MM-dd"}}))
    assert [(f.field, f.to, f.format) for f in stage.fields] == [
        ("b", IntegerType(), None),
        ("a", TimestampType(), "yyyy-MM-dd"),
    ]
    assert stage.fields[1].describe() == "TIMESTAMP (format 'yyyy-MM-dd')"


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({}, "stages[2].options.columns"),
        ({"columns": {}}, "stages[2].options.columns"),
        ({"columns": ["a"]}, "stages[2].options.columns"),
        ({"columns": {"amount": "MONEY"}}, "stages[2].options.columns.amount"),
        ({"columns": {"a": "INT"}, "formats": {"a": "yyyy"}}, "stages[2].options.formats.a"),
        ({"columns": {"a": "DATE"}, "formats": {"b": "yyyy"}}, "stages[2].options.formats.b"),
        ({"columns": {"a": "DATE"}, "formats": {"a": ""}}, "stages[2].options.formats.a"),
        ({"columns": {"a": "DATE"}, "format": {"a": "yyyy"}}, "stages[2].options.format"),
    ],
)
def test_cast_config_errors_name_the_key(options: dict[str, Any], key: str) -> None:
    assert _key_of(build_stage, _spec("cast", options)) == key


# --------------------------------------------------------------------------- checks


def _rules(*rules: dict[str, Any]) -> StageSpec:
    return _spec("checks", {"rules": list(rules)}, 3)


def test_rules_build_with_their_expected_texts() -> None:
    stage = build_stage(
        _rules(
            {"column": "amount", "check": "range", "min": 0, "max": 10000},
            {"column": "amount", "check": "range", "min": 0.5, "min_inclusive": False},
            {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
            {"column": "sku", "check": "regex", "pattern": r"(?<code>[A-Z]{3})-\d+"},
            {"column": "sku", "check": "length", "max": 12},
            {"column": "id", "check": "not_null"},
        )
    )
    assert [r.check for r in stage.rules] == ["range", "range", "in_set", "regex", "length", "not_null"]
    assert [r.expected() for r in stage.rules] == [
        "between 0 and 10000",
        "> 0.5",
        'one of "EUR", "USD"',
        r"to match /(?<code>[A-Z]{3})-\d+/",
        "length <= 12",
        "a value",
    ]


@pytest.mark.parametrize(
    ("rule", "key"),
    [
        ({"column": "a", "check": "between"}, "stages[3].options.rules[0].check"),
        ({"column": "a"}, "stages[3].options.rules[0].check"),
        ({"column": "a", "check": "range"}, "stages[3].options.rules[0].min"),
        ({"column": "a", "check": "range", "min": 5, "max": 1}, "stages[3].options.rules[0].min"),
        ({"column": "a", "check": "range", "min": True}, "stages[3].options.rules[0].min"),
        (
            {"column": "a", "check": "range", "min": 0, "min_inclusive": "no"},
            "stages[3].options.rules[0].min_inclusive",
        ),
        ({"column": "a", "check": "range", "min": 0, "maximum": 1}, "stages[3].options.rules[0].maximum"),
        ({"column": "a", "check": "in_set", "values": []}, "stages[3].options.rules[0].values"),
        ({"column": "a", "check": "in_set", "values": [{"x": 1}]}, "stages[3].options.rules[0].values"),
        ({"column": "a", "check": "regex", "pattern": "(unclosed"}, "stages[3].options.rules[0].pattern"),
        ({"column": "a", "check": "regex", "pattern": "(?P<x>a)"}, "stages[3].options.rules[0].pattern"),
        ({"column": "a", "check": "regex", "pattern": "a", "match": "prefix"}, "stages[3].options.rules[0].match"),
        ({"column": "a", "check": "length", "min": -1}, "stages[3].options.rules[0].min"),
        ({"column": "a", "check": "length"}, "stages[3].options.rules[0].min"),
        ({"check": "expr", "expr": "  "}, "stages[3].options.rules[0].expr"),
        ({"column": "", "check": "not_null"}, "stages[3].options.rules[0].column"),
        ("not_null", "stages[3].options.rules[0]"),
    ],
)
def test_bad_rules_name_the_rule_and_key(rule: Any, key: str) -> None:
    assert _key_of(build_stage, _rules(rule)) == key


def test_the_second_bad_rule_is_named_by_its_index() -> None:
    spec = _rules({"column": "a", "check": "not_null"}, {"column": "b", "check": "regex", "pattern": "["})
    with pytest.raises(ConfigError) as info:
        build_stage(spec)
    assert info.value.key == "stages[3].options.rules[1].pattern"
    assert "valid regular expression" in info.value.allowed


@pytest.mark.parametrize("options", [{}, {"rules": []}, {"rules": "not_null"}, {"rules": [], "x": 1}])
def test_rules_must_be_a_non_empty_list(options: dict[str, Any]) -> None:
    key = _key_of(build_stage, _spec("checks", options, 3))
    assert key in ("stages[3].options.rules", "stages[3].options.x")


# --------------------------------------------------------------------------- python


def _py(**options: Any) -> StageSpec:
    base = {"function": "tests.fixtures_py_stage.parse_amount", "returns": "DOUBLE"}
    return _spec("python", {**base, **options}, 4)


def test_python_stage_resolves_dotted_and_colon_paths() -> None:
    assert build_stage(_py()).fn is fx.parse_amount
    assert build_stage(_py(function="tests.fixtures_py_stage:Recorder.seen")).fn is fx.Recorder.seen
    stage = build_stage(
        _py(mode="VECTORIZED", nullable=True, retriable=["TimeoutError", "tests.fixtures_py_stage.TransientError"])
    )
    assert (stage.mode, stage.nullable) == (python.PythonMode.VECTORIZED, True)
    assert stage.retriable == (TimeoutError, fx.TransientError)


@pytest.mark.parametrize(
    ("options", "key", "says"),
    [
        ({"function": "no_such_pkg.mod.fn"}, "stages[4].options.function", "No module named"),
        ({"function": "tests.fixtures_py_stage.nope"}, "stages[4].options.function", "has no nope"),
        ({"function": "tests.fixtures_py_stage.NOT_CALLABLE"}, "stages[4].options.function", "a callable"),
        ({"function": "parse_amount"}, "stages[4].options.function", "dotted path"),
        ({"returns": "FLOATY"}, "stages[4].options.returns", "a Spark type"),
        ({"mode": "batch"}, "stages[4].options.mode", "row | vectorized"),
        ({"nullable": "yes"}, "stages[4].options.nullable", "true | false"),
        ({"retriable": ["NotAnError"]}, "stages[4].options.retriable[0]", "an exception class"),
        (
            {"retriable": ["tests.fixtures_py_stage.parse_amount"]},
            "stages[4].options.retriable[0]",
            "an exception class",
        ),
        ({"function_name": "x"}, "stages[4].options.function_name", "did you mean 'stages[4].options.function'"),
    ],
)
def test_python_config_errors_name_the_key(options: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_stage(_py(**options))
    assert info.value.key == key
    assert says in str(info.value)


def test_python_stage_api_validates_too() -> None:
    stage = python.python_stage("p", fx.parse_amount, "DOUBLE")
    assert (stage.name, stage.kind, stage.mode, stage.input) == ("p", "transform", "row", None)
    with pytest.raises(ConfigError, match=r"row \| vectorized"):
        python.python_stage("p", fx.parse_amount, "DOUBLE", mode="fast")
    with pytest.raises(ConfigError, match="a callable"):
        python.python_stage("p", fx.NOT_CALLABLE, "DOUBLE")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        python.python_stage("p", fx.parse_amount, "NUMBERISH")
