"""The columns each stage reads are checked against what the stages before it declare, without Spark
(issue 34, "What validate must know without Spark").

A json stage declares its schema, a cast stage its conversions, a python stage its
``returns`` type, an avro stage its reader schema: so a ``checks`` rule or a cast on a
column no earlier stage produces, or a json stage reading the source's raw bytes, is a
ConfigError naming the stage and the key when the stages are built (which ``quarantine
validate`` and every run do), instead of FIELD_NOT_FOUND or a 12 KB Java stack at run time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.ddl import parse_ddl_type
from quarantine.errors import ConfigError
from quarantine.stages import build_stages

DECODE = {"name": "decode", "type": "decode_utf8"}
PARSE = {"name": "parse", "type": "json", "options": {"schema": "id STRING, name STRING, qty INT"}}
PARSE_TYPE = parse_ddl_type("id STRING, name STRING, qty INT")


def _build(*stages: dict[str, Any]) -> list[Any]:
    raw = {
        "pipeline": "orders",
        "source": {"format": "delta", "path": "/data/source"},
        "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": "/data/quarantine"},
        "stages": list(stages),
    }
    return build_stages(parse_config(raw).stages)


def _refused(*stages: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _build(*stages)
    return info.value


def _checks(*rules: dict[str, Any], **stage: Any) -> dict[str, Any]:
    return {"name": "check", "type": "checks", "options": {"rules": list(rules)}, **stage}


def test_a_checks_rule_on_a_column_no_stage_produces_is_refused_naming_the_stage() -> None:
    e = _refused(DECODE, PARSE, _checks({"column": "qty", "check": "not_null"},
                                        {"column": "qtyy", "check": "range", "min": 0}))
    assert e.key == "stages[2].options.rules[1].column" and e.value == "qtyy"
    message = str(e)
    assert "stage 'check'" in message and "stage 'parse'" in message
    assert "id, name, qty" in message and "did you mean 'qty'?" in message


def test_a_rule_on_a_named_input_is_checked_against_that_stages_output() -> None:
    py = {"name": "enrich", "type": "python",
          "options": {"function": "tests.fixtures_py_stage.split_name", "returns": "STRUCT<a: INT, b: STRING>",
                      "output": "replace"}}
    assert len(_build(DECODE, PARSE, py, _checks({"column": "qty", "check": "not_null"}, input="parse"))) == 4
    e = _refused(DECODE, PARSE, py, _checks({"column": "qty", "check": "not_null"}))
    assert e.key == "stages[3].options.rules[0].column" and "stage 'enrich'" in str(e) and "a, b" in str(e)


def test_a_cast_stage_gives_its_input_with_the_converted_types() -> None:
    cast = {"name": "convert", "type": "cast", "options": {"columns": {"qty": "BIGINT"}}}
    assert len(_build(DECODE, PARSE, cast, _checks({"column": "name", "check": "not_null"}))) == 4
    e = _refused(DECODE, PARSE, cast, _checks({"column": "total", "check": "not_null"}))
    assert "stage 'convert'" in str(e) and "id, name, qty" in str(e)


def test_a_cast_of_a_column_no_stage_produces_is_refused_naming_the_column_key() -> None:
    e = _refused(DECODE, PARSE, {"name": "convert", "type": "cast", "options": {"columns": {"qtty": "BIGINT"}}})
    assert e.key == "stages[2].options.columns.qtty" and "did you mean 'qty'?" in str(e)


def test_a_field_rule_on_an_input_that_is_not_a_struct_is_refused() -> None:
    e = _refused(DECODE, _checks({"column": "qty", "check": "not_null"}))
    assert e.key == "stages[1].options.rules[0].column" and "string" in str(e) and "no fields" in str(e)


def test_a_rule_after_a_python_stage_is_checked_against_its_returns_type() -> None:
    py = {"name": "enrich", "type": "python",
          "options": {"function": "tests.fixtures_py_stage.split_name", "returns": "STRUCT<a: INT, b: STRING>",
                      "output": "replace"}}
    assert len(_build(DECODE, PARSE, py, _checks({"column": "b", "check": "not_null"}))) == 4
    e = _refused(DECODE, PARSE, py, _checks({"column": "c", "check": "not_null"}))
    assert "stage 'enrich'" in str(e) and "a, b" in str(e)


def test_a_rule_after_an_extending_python_stage_reads_its_input_and_its_returns() -> None:
    """Issue 60, B: output: extend (the default) gives the input's fields and the returned ones."""
    py = {"name": "enrich", "type": "python",
          "options": {"function": "tests.fixtures_py_stage.split_name", "returns": "a INT, name BIGINT"}}
    *_, enrich, _ = _build(DECODE, PARSE, py, _checks({"column": "qty", "check": "not_null"},
                                                      {"column": "a", "check": "not_null"}))
    assert enrich.produces(PARSE_TYPE).simpleString() == "struct<id:string,name:bigint,qty:int,a:int>"
    e = _refused(DECODE, PARSE, py, _checks({"column": "c", "check": "not_null"}))
    assert "one of id, name, qty, a" in str(e)


def test_a_rule_after_an_avro_stage_is_checked_against_its_reader_schema(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "Order", "fields": [
        {"name": "order_id", "type": "string"}, {"name": "amount", "type": "double"}]}
    (tmp_path / "order.avsc").write_text(json.dumps(schema), encoding="utf-8")
    avro = {"name": "decode", "type": "avro",
            "options": {"wire_format": "none", "writer_schema": str(tmp_path / "order.avsc")}}
    assert len(_build(avro, _checks({"column": "amount", "check": "not_null"}))) == 2
    e = _refused(avro, _checks({"column": "amout", "check": "not_null"}))
    assert "order_id, amount" in str(e) and "did you mean 'amount'?" in str(e)


def test_where_an_input_is_not_declared_the_columns_are_not_guessed() -> None:
    # a source column other than Kafka's: what it holds is not known before the source is read
    assert len(_build(_checks({"column": "anything", "check": "not_null"}, input="payload"))) == 1


def test_a_json_stage_reading_the_raw_value_is_refused_naming_a_decode_stage() -> None:
    for stages, key in (
        ([{**PARSE, "input": "value"}], "stages[0].input"),
        ([PARSE], "stages[0].input"),
        ([DECODE, {**PARSE, "input": "key"}], "stages[1].input"),
    ):
        e = _refused(*stages)
        assert e.key == key, e
        message = str(e)
        assert "stage 'parse'" in message and "BINARY" in message.upper() and "decode_utf8" in message


def test_a_json_stage_after_a_decode_stage_builds() -> None:
    assert len(_build(DECODE, PARSE)) == 2
    assert len(_build({"name": "key_text", "type": "decode_utf8", "input": "key"},
                      {**PARSE, "input": "key_text"})) == 2


NESTED = {"name": "parse", "type": "json", "options": {
    "schema": "event_id STRING, device STRUCT<os: STRING, screen_w: INT>, tags ARRAY<STRING>",
    "required": ["event_id", "device.os"]}}


def test_rules_casts_and_required_take_a_path_into_nested_structs() -> None:
    """Issue 60, C: device.screen_w is a field of the struct device, wherever a field is named."""
    cast = {"name": "convert", "type": "cast", "options": {"columns": {"device.screen_w": "BIGINT"}}}
    rule = _checks({"column": "device.screen_w", "check": "range", "min": 1})
    *_, converted, check = _build(DECODE, NESTED, cast, rule)
    assert converted.produces(None) is None
    assert check.fields_read() == (("options.rules[0].column", "device.screen_w"),)


@pytest.mark.parametrize(("column", "why"), [
    ("device.screen", "a field of device in the input of stage 'check'"),
    ("device.os.name", "a path through structs: device.os in the input of stage 'check' (stages[2]) is STRING, which "
                       "has no fields"),
    ("tags.first", "a path through structs: tags in the input of stage 'check' (stages[2]) is ARRAY<STRING>"),
    ("devices.os", "one of event_id, device, tags; did you mean 'device'?"),
])
def test_a_path_that_is_not_there_is_refused_naming_the_step(column: str, why: str) -> None:
    e = _refused(DECODE, NESTED, _checks({"column": column, "check": "not_null"}))
    assert e.key == "stages[2].options.rules[0].column" and e.value == column
    assert why in str(e), str(e)
    if column == "device.screen":
        assert "one of os, screen_w; did you mean 'device.screen_w'?" in str(e)


def test_a_required_path_the_schema_does_not_have_is_refused() -> None:
    bad = {**NESTED, "options": {**NESTED["options"], "required": ["device.model"]}}
    e = _refused(DECODE, bad)
    assert e.key == "stages[1].options.required" and e.value == ["device.model"]
