"""Property: every built-in stage, every check rule and every translated expectation is total.

For any values of every Spark type (NULLs, NaN, ±inf, extremes, empty and huge
strings, malformed UTF-8, deep JSON), with ANSI mode on, the job finishes and
every row of every stage's column (fields named by a nested path among them, and a
``python`` stage extending a struct of every type) has exactly one of ``result`` and ``error``
(a ``nullable: true`` decode of a NULL input has neither, as documented).

Each example is one DataFrame holding a fixed set of extreme rows plus the
generated rows; every stage runs on it in one job. Stages are applied one per
:func:`apply_stages` call so that no stage's failure hides another's rows.

The stages are every type of the stage table (:data:`~quarantine.stages.STAGE_TYPES`) and the
checks are every rule of :data:`~quarantine.stages.checks.rules.RULES`: a type or rule added
there without a line here fails :func:`test_every_stage_type_and_rule_of_the_tables_is_here`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.expectations import TRANSLATED_TYPES
from quarantine.expectations.stage import ExpectationStage
from quarantine.expectations.suite import parse_suite
from quarantine.stage import Stage
from quarantine.stages import STAGE_TYPES, build_stage
from quarantine.stages.checks.rules import RULES
from tests.support.protobuf import compile_proto

_UTC = dt.UTC
# the widest DECIMAL(38,18) value Python's default decimal context (28 digits) carries intact
_DEC = Decimal("99999999999999999999.99999999")
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)

# name, DDL type, values every example includes, generated values
_FIELDS: list[tuple[str, str, list[Any], st.SearchStrategy[Any]]] = [
    ("s", "STRING", [
        "", " ", "abc", "5", " 7 ", "1e3", "NaN", "-Infinity", "9" * 400, "\x00", "2026-01-01", "2026-1-5",
        "2026-13-45 25:61:61", "{", '{"a": 1}', '{"a": "x", "c": 1e999, "d": 1e40}', '{"a": 99999999999}',
        '{"e": "2026-13-45", "f": "yesterday", "g": [1, "x"], "h": {"k": "v"}, "k": 3}', "[1,2]", "[" * 5000,
        '{"a":' * 3000, "x" * 100_000, "true", "日本語😀", "\ufeff{}", "null",
    ], _TEXT),
    ("b", "BINARY", [
        b"", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00" * 1000, b'{"a":1}',
        b"\xe2\x82", b'{"a": "\xff"}', "é".encode(),
    ], st.binary(max_size=30)),
    ("i8", "TINYINT", [-128, 127, 0], st.integers(-128, 127)),
    ("i16", "SMALLINT", [-32768, 32767], st.integers(-32768, 32767)),
    ("i32", "INT", [-(2**31), 2**31 - 1, 3], st.integers(-(2**31), 2**31 - 1)),
    ("i64", "BIGINT", [-(2**63), 2**63 - 1, 10], st.integers(-(2**63), 2**63 - 1)),
    ("f", "FLOAT", [float("nan"), float("inf"), float("-inf"), 3.4e38, -0.0, 1e-45], st.floats(width=32)),
    ("d", "DOUBLE", [float("nan"), float("inf"), float("-inf"), 1.7976931348623157e308, 5e-324, -0.0], st.floats()),
    ("dec", "DECIMAL(38,18)", [_DEC, -_DEC, Decimal(0), Decimal("1E-18")],
     st.decimals(min_value=-_DEC, max_value=_DEC, places=8, allow_nan=False, allow_infinity=False)),
    ("bool", "BOOLEAN", [True, False], st.booleans()),
    ("dt", "DATE", [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)], st.dates()),
    ("ts", "TIMESTAMP", [
        dt.datetime(1, 1, 1, tzinfo=_UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
        dt.datetime(1970, 1, 1, tzinfo=_UTC),
    ], st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(_UTC))),
    ("arr", "ARRAY<INT>", [[], [None], [2**31 - 1, -(2**31)], list(range(1000))],
     st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=5)),
    ("m", "MAP<STRING, INT>", [{}, {"": None}, {"a": 1, "b": 2}],
     st.dictionaries(_TEXT, st.none() | st.integers(-5, 5), max_size=3)),
    ("st", "STRUCT<a: INT, b: STRING>", [(None, None), (1, "x")],
     st.tuples(st.none() | st.integers(-(2**31), 2**31 - 1), st.none() | _TEXT)),
]
_NAMES = [n for n, *_ in _FIELDS]
_DDL = ", ".join(f"{n} {t}" for n, t, *_ in _FIELDS)


def _extreme_rows() -> list[tuple[Any, ...]]:
    longest = max(len(v) for _, _, v, _ in _FIELDS)
    rows = [tuple(vals[k % len(vals)] for _, _, vals, _ in _FIELDS) for k in range(longest)]
    rows.append(tuple(None for _ in _FIELDS))
    return rows


_ROW = st.tuples(*[st.none() | strat for *_, strat in _FIELDS])

_JSON_SCHEMA = (
    "a INT, b STRING, c DOUBLE, d DECIMAL(10,2), e DATE, f TIMESTAMP, g ARRAY<INT>, h MAP<STRING, INT>, "
    "k STRUCT<x: INT>"
)
_CASTS: list[dict[str, Any]] = [
    {"columns": {"s": "INT", "u": "DOUBLE", "i64": "INT", "d": "BIGINT", "f": "DECIMAL(5,2)", "dec": "TINYINT",
                 "bool": "INT", "dt": "TIMESTAMP", "ts": "DATE", "b": "STRING", "arr": "ARRAY<STRING>",
                 "m": "MAP<STRING, STRING>", "st": "STRUCT<a: STRING, b: INT>", "i8": "BOOLEAN", "i16": "STRING"}},
    {"columns": {"s": "DATE", "u": "TIMESTAMP", "i32": "DECIMAL(3,1)", "d": "FLOAT", "dec": "DOUBLE",
                 "arr": "ARRAY<TINYINT>", "st": "STRUCT<a: BOOLEAN, b: DATE>", "ts": "STRING"},
     "formats": {"s": "yyyy-MM-dd", "u": "yyyy-MM-dd HH:mm:ss"}},
    {"columns": {"s": "DECIMAL(38,18)", "u": "BOOLEAN", "d": "DECIMAL(38,0)", "ts": "TIMESTAMP_NTZ",
                 "dt": "STRING", "f": "INT"}},
    {"columns": {"s": "TIMESTAMP", "u": "BIGINT", "dec": "DECIMAL(4,2)", "i64": "DOUBLE"},
     "formats": {"s": "dd/MM/yyyy HH:mm"}},
    {"columns": {"st.a": "TINYINT", "st.b": "TIMESTAMP"}, "formats": {"st.b": "yyyy-MM-dd"}},  # nested, by path
]


def _rules(field: str) -> list[dict[str, Any]]:
    return [
        {"column": field, "check": "not_null"},
        {"column": field, "check": "range", "min": 0, "max": 10},
        {"column": field, "check": "range", "min": -1.5, "max_inclusive": False, "max": 1e300},
        {"column": field, "check": "range", "min": "2000-01-01", "max": "2030-12-31"},
        {"column": field, "check": "in_set", "values": ["abc", 1, 2.5, True]},
        {"column": field, "check": "not_in_set", "values": ["x", 0, False]},
        {"column": field, "check": "regex", "pattern": "[a-z0-9]+"},
        {"column": field, "check": "regex", "pattern": "\\d", "match": "search"},
        {"column": field, "check": "length", "min": 1, "max": 5},
        {"column": field, "check": "expr", "expr": f"rec.{field} IS NOT NULL AND CAST(rec.{field} AS STRING) != ''"},
    ]


def _expectations(field: str) -> list[dict[str, Any]]:
    def e(kind: str, **kw: Any) -> dict[str, Any]:
        return {"type": f"expect_column_{kind}", "kwargs": {"column": field, **kw}}

    return [
        e("values_to_not_be_null"),
        e("values_to_be_null"),
        e("values_to_be_between", min_value=0, max_value=10),
        e("values_to_be_between", min_value=-1.5, strict_min=True),
        e("values_to_be_between", min_value="2000-01-01", max_value="2030-12-31"),
        e("values_to_be_in_set", value_set=[1, "abc", 2.5, True, None]),
        e("values_to_be_in_set", value_set=["x", "2026-01-01"]),
        e("values_to_not_be_in_set", value_set=["x", 0, False]),
        e("values_to_match_regex", regex="^[a-z]+$"),
        e("values_to_not_match_regex", regex="\\d"),
        e("value_lengths_to_be_between", min_value=1, max_value=5),
        e("value_lengths_to_be_between", min_value=5, max_value=1),
        e("value_lengths_to_be_between", min_value=1.5, strict_max=True, max_value=3),
        e("value_lengths_to_equal", value=3),
        e("values_to_be_of_type", type_="NumericType"),
        e("values_to_be_unique"),
    ]


def test_every_translated_type_is_fed_every_spark_type() -> None:
    assert {e["type"] for e in _expectations("x")} == set(TRANSLATED_TYPES)
    assert {t.split("(")[0].split("<")[0] for _, t, *_ in _FIELDS} >= {
        "STRING", "BINARY", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "BOOLEAN",
        "DATE", "TIMESTAMP", "ARRAY", "MAP", "STRUCT",
    }


#: A record of the decoding stages' schemas: two fields, one optional.
_AVRO = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "a", "type": "int"}, {"name": "s", "type": ["null", "string"]}]}
_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int32 a = 1;\n  string s = 2;\n}\n'


def _spec(name: str, type_: str, input_: str, options: dict[str, Any]) -> Stage:
    return build_stage(StageSpec(name, type_, input_, options, 0))


def _avro(folder: Path) -> list[Stage]:
    (folder / "avro").mkdir()
    (folder / "avro" / "1.avsc").write_text(json.dumps(_AVRO), encoding="utf-8")
    return [
        _spec("avro", "avro", "b", {"schemas": str(folder / "avro")}),
        _spec("avro_plain", "avro", "b", {"wire_format": "none", "writer_schema": str(folder / "avro" / "1.avsc")}),
    ]


def _protobuf(folder: Path) -> list[Stage]:
    desc = compile_proto(folder / "proto", "order", _PROTO)
    (folder / "descs").mkdir()
    (folder / "descs" / "1.desc").write_bytes(desc.read_bytes())
    return [
        _spec("protobuf", "protobuf", "b", {"schemas": str(folder / "descs")}),
        _spec("protobuf_plain", "protobuf", "b", {"wire_format": "none", "descriptor": str(desc)}),
    ]


#: Each stage type of the table and how this test builds its stages over the frame's columns.
STAGES: dict[str, Callable[[Path], list[Stage]]] = {
    "decode_utf8": lambda _: [_spec("decode", "decode_utf8", "b", {}),
                              _spec("decode_opt", "decode_utf8", "b", {"nullable": True})],
    "avro": _avro,
    "protobuf": _protobuf,
    "json": lambda _: [_spec("json_s", "json", "s", {"schema": _JSON_SCHEMA, "required": ["a", "k.x"]}),
                       _spec("json_u", "json", "u", {"schema": _JSON_SCHEMA})],
    "cast": lambda _: [_spec(f"cast{i}", "cast", "rec", opts) for i, opts in enumerate(_CASTS)],
    # one checks and one expectation stage per field: each stays a plan Spark optimises quickly
    "checks": lambda _: [
        *[_spec(f"checks_{f}", "checks", "rec", {"rules": _rules(f)}) for f in _NAMES],
        _spec("checks_nested", "checks", "rec", {"rules": [
            *_rules("st.a"), *_rules("st.b"), {"check": "expr", "expr": "rec.st.a > 0 OR rec.m['a'] = 1"},
        ]}),
    ],
    "python": lambda _: [
        _spec("python_row", "python", "s", {"function": "tests.fixtures_py_stage.parse_amount", "returns": "double"}),
        _spec("python_vectorized", "python", "s", {"function": "tests.fixtures_py_stage.parse_amount_vectorized",
                                                    "returns": "double", "mode": "vectorized"}),
        # extending a struct of every type (output: extend, the default), in both modes
        _spec("python_extend", "python", "rec",
              {"function": "tests.fixtures_py_stage.text_length", "returns": "n INT, s STRING"}),
        _spec("python_extend_vectorized", "python", "rec",
              {"function": "tests.fixtures_py_stage.text_length_batch", "returns": "n INT, s STRING",
               "mode": "vectorized"}),
    ],
    "expectation": lambda _: [
        ExpectationStage(name=f"expect_{f}", suite=parse_suite({"name": f, "expectations": _expectations(f)}),
                         input="rec")
        for f in _NAMES
    ],
}


def test_every_stage_type_and_rule_of_the_tables_is_here() -> None:
    assert set(STAGES) == set(STAGE_TYPES)
    assert {r["check"] for r in _rules("x")} == set(RULES)


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> list[Stage]:
    """Every stage this test runs (:data:`STAGES`), built once; their schema files in a folder of the module's."""
    folder = tmp_path_factory.mktemp("totality")
    return [stage for build in STAGES.values() for stage in build(folder)]


def _frame(spark: Any, rows: list[tuple[Any, ...]]) -> DataFrame:
    src = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], f"id INT, {_DDL}")
    u = F.col("b").cast("string").alias("u")  # malformed UTF-8 bytes as a STRING
    return src.select("id", "b", "s", u, F.struct(*[F.col(n) for n in _NAMES], u).alias("rec"))


# No shrinking: each step is a Spark job per stage; a failure names the stage and the row
# (the falsifying example lists the generated rows after the fixed extreme ones).
@settings(
    max_examples=3, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rows=st.lists(_ROW, min_size=1, max_size=10))
def test_no_value_of_any_type_fails_the_job(spark: Any, stages: list[Stage], rows: list[tuple[Any, ...]]) -> None:
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    data = _extreme_rows() + rows
    bad: list[tuple[str, int]] = []
    failed_somewhere: set[str] = set()
    df = _frame(spark, data).cache()
    try:
        # one job per stage over every row: a stage's column must come back for all of them
        for s in stages:
            out = apply_stages(df, [s]).select(
                "id", "b",
                F.col(s.name).getField("result").isNotNull().alias("r"),
                F.col(s.name).getField("error").isNotNull().alias("e"),
            ).collect()
            assert len(out) == len(data), s.name
            nullable_null = s.name == "decode_opt"  # a NULL input has neither side, by design
            bad += [(s.name, r["id"]) for r in out if r["r"] == r["e"] and not (nullable_null and r["b"] is None)]
            if any(r["e"] for r in out):
                failed_somewhere.add(s.name)
    finally:
        df.unpersist()
        spark.conf.set("spark.sql.ansi.enabled", before)
    assert not bad, bad[:10]
    # the data exercises the error side of every stage
    assert failed_somewhere == {s.name for s in stages}
