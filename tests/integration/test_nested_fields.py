"""Nested data: a field inside a struct is named by its path, in options and in messages, as written.

Issue 60, C. A ``checks`` rule, a ``cast`` column and a ``json`` stage's ``required`` take
``device.screen_w``; a nested field of the wrong type is quarantined naming its path, like a
top-level one; a type is shown with its field names as the user wrote them; an ``expr`` rule's
failure shows the values of the columns its expression reads.
"""

from __future__ import annotations

from typing import Any

import yaml

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.stage import Stage
from quarantine.stages import build_stage
from tests.helpers import kafka_df
from tests.support.readme import block

SCHEMA = "event_id STRING, device STRUCT<os: STRING, version: STRING, screen_w: INT>, tags ARRAY<STRING>"
GOOD = '{"event_id": "e1", "device": {"os": "ios", "version": "17", "screen_w": 390}, "tags": ["a"]}'


def _stage(name: str, type_: str, options: dict[str, Any], input_: str | None = None) -> Stage:
    return build_stage(StageSpec(name, type_, input_, options, 2))


def _run(spark: Any, values: list[str], *stages: Stage) -> list[Any]:
    out = apply_stages(kafka_df(spark, [v.encode() for v in values]), [_stage("decode", "decode_utf8", {}), *stages])
    return [r[stages[-1].name] for r in out.orderBy("offset").collect()]


def _parse(required: list[str] | None = None) -> Stage:
    return _stage("parse", "json", {"schema": SCHEMA, "required": required or ["event_id"]})


def _message(row: Any) -> tuple[str, str]:
    assert row.result is None, row
    return row.error.error_class, row.error.message


def test_a_checks_rule_reads_a_nested_field_by_its_path(spark: Any) -> None:
    rules = [
        {"column": "device.screen_w", "check": "range", "min": 200, "max": 4000},
        {"column": "device.os", "check": "in_set", "values": ["ios", "android"]},
    ]
    narrow = GOOD.replace("390", "120")
    phone = GOOD.replace('"ios"', '"palm"')
    no_device = '{"event_id": "e2", "device": null}'
    ok, small, palm, none = _run(spark, [GOOD, narrow, phone, no_device], _parse(), _stage("check", "checks",
                                                                                       {"rules": rules}))
    assert ok.error is None and ok.result.device.screen_w == 390
    assert _message(small) == ("range", "field 'device.screen_w': expected between 200 and 4000, found 120")
    assert _message(palm) == ("in_set", "field 'device.os': expected one of \"ios\", \"android\", found \"palm\"")
    assert none.error is None  # a NULL struct: its fields are NULL, and every check but not_null passes on NULL


def test_a_nested_field_of_the_wrong_type_names_its_path(spark: Any) -> None:
    wide = GOOD.replace("390", '"wide"')
    both = GOOD.replace("390", '"wide"').replace('"17"', "{\"major\": 17}").replace('"e1"', "7")
    flat = '{"event_id": "e3", "device": "abc"}'
    rows = _run(spark, [wide, both, flat], _parse())
    assert _message(rows[0]) == ("SchemaMismatch", "field 'device.screen_w': expected INT, found \"wide\"")
    # a nested STRING takes any JSON value as its text (strings: strict is for top-level fields)
    assert _message(rows[1]) == (
        "SchemaMismatch", "field 'event_id': expected STRING, found 7; field 'device.screen_w': expected INT, "
        "found \"wide\"",
    )
    # the struct itself of the wrong kind: named with its type as written, field names in their case
    assert _message(rows[2]) == (
        "SchemaMismatch",
        "field 'device': expected STRUCT<os: STRING, version: STRING, screen_w: INT>, found \"abc\"",
    )


def test_a_field_inside_a_struct_inside_a_struct_is_named_by_its_whole_path(spark: Any) -> None:
    parse = _stage("parse", "json", {"schema": "id INT, a STRUCT<b: STRUCT<c: DOUBLE, Mixed_Case: BOOLEAN>>"})
    (row,) = _run(spark, ['{"id": 1, "a": {"b": {"c": "x", "Mixed_Case": "y"}}}'], parse)
    assert _message(row) == (
        "SchemaMismatch",
        "field 'a.b.c': expected DOUBLE, found \"x\"; field 'a.b.Mixed_Case': expected BOOLEAN, found \"y\"",
    )


def test_required_takes_a_path(spark: Any) -> None:
    values = [GOOD, '{"event_id": "e2", "device": {"os": null}}', '{"event_id": "e3", "device": {}}',
              '{"event_id": "e4"}']
    ok, null_os, no_os, no_device = _run(spark, values, _parse(["event_id", "device.os"]))
    assert ok.error is None
    assert _message(null_os) == ("MissingRequiredField", "required field 'device.os': expected a value, found null")
    assert _message(no_os) == (
        "MissingRequiredField", "required field 'device.os': expected a value, found no such field"
    )
    assert _message(no_device) == _message(no_os)  # an absent struct: its fields are absent too


def test_a_cast_converts_a_nested_field_in_place(spark: Any) -> None:
    parse = _stage("parse", "json", {"schema": "id INT, device STRUCT<os: STRING, screen_w: STRING>"})
    cast = _stage("convert", "cast", {"columns": {"device.screen_w": "INT"}})
    ok, bad, null = _run(spark, [
        '{"id": 1, "device": {"os": "ios", "screen_w": "390"}}',
        '{"id": 2, "device": {"os": "ios", "screen_w": "wide"}}',
        '{"id": 3, "device": null}',
    ], parse, cast)
    assert ok.error is None and ok.result.asDict(recursive=True) == {"id": 1, "device": {"os": "ios", "screen_w": 390}}
    assert _message(bad) == ("CastFailed", "field 'device.screen_w': cannot convert \"wide\" to INT")
    assert null.error is None and null.result.device is None
    assert cast.produces(parse.produces(None)).simpleString() == "struct<id:int,device:struct<os:string,screen_w:int>>"


def test_an_expr_rules_failure_shows_the_values_it_read(spark: Any) -> None:
    rules = [{"check": "expr",
              "expr": "parse.result.device.screen_w > 200 AND size(parse.result.tags) < 3 OR parse.result.api_key "
                      "IS NULL"}]
    parse = _stage("parse", "json", {"schema": f"{SCHEMA}, api_key STRING"})
    value = GOOD.replace("390", "100").replace('["a"]', '["a", "b", "c"], "api_key": "s3cr3t"')
    ok, bad = _run(spark, [GOOD, value], parse, _stage("check", "checks", {"rules": rules}, "parse"))
    assert ok.error is None
    assert _message(bad) == (
        "expr",
        "row: expected parse.result.device.screen_w > 200 AND size(parse.result.tags) < 3 OR parse.result.api_key "
        "IS NULL, found parse.result.device.screen_w = 100, parse.result.tags = [\"a\",\"b\",\"c\"], "
        "parse.result.api_key = [redacted]",
    )


def test_the_stages_pages_nested_fields_block_runs_as_written(spark: Any) -> None:
    """docs/stages.md, "Nested fields": required, cast and a rule on device paths."""
    stages = [
        build_stage(StageSpec(s["name"], s["type"], s.get("input"), s["options"], i + 1))
        for i, s in enumerate(yaml.safe_load(block("nested-fields").body)["stages"])
    ]
    values = [
        '{"event_id": "e1", "device": {"os": "ios", "screen_w": "390"}}',
        '{"event_id": "e2", "device": {"screen_w": "390"}}',
        '{"event_id": "e3", "device": {"os": "ios", "screen_w": "wide"}}',
        '{"event_id": "e4", "device": {"os": "ios", "screen_w": "120"}}',
    ]
    ok, no_os, wide, narrow = _run(spark, values, *stages)
    assert ok.error is None and ok.result.device.asDict() == {"os": "ios", "screen_w": 390}
    assert _message(no_os) == (
        "MissingRequiredField", "required field 'device.os': expected a value, found no such field"
    )
    assert _message(wide) == ("CastFailed", "field 'device.screen_w': cannot convert \"wide\" to INT")
    assert _message(narrow) == ("range", "field 'device.screen_w': expected between 200 and 8000, found 120")
