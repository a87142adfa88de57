"""json: a STRING field takes only a JSON string (or null), unless ``strings: coerce`` (issue 34, defect 6).

An object, an array, a number or a boolean where the schema declares STRING used to reach
the target as its JSON text, while ``"12"`` for an INT field was (rightly) a
SchemaMismatch. Strict is the default; ``coerce`` keeps the old behaviour.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.stages import build_stage as from_spec
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.json import JsonParse
from tests.helpers import kafka_df

SCHEMA = StructType([StructField("name", StringType()), StructField("n", IntegerType())])


def _parse(spark: Any, values: list[str], *, strings: str = "strict", schema: StructType = SCHEMA) -> list[Any]:
    stages = [DecodeUtf8("decode"), JsonParse("parse", schema, strings=strings)]
    out = apply_stages(kafka_df(spark, [v.encode() for v in values]), stages)
    return [r.parse for r in out.orderBy("offset").collect()]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"name": {"first": "a"}}', '{"first":"a"}'),
        ('{"name": ["a","b"]}', '["a","b"]'),
        ('{"name": 12345}', "12345"),
        ('{"name": -1.5e3}', "-1500.0"),  # the token as parsed (a DOUBLE)
        ('{"name": true}', "true"),
        ('{"name": false}', "false"),
    ],
)
def test_a_non_string_json_value_in_a_string_field_is_a_schema_mismatch_naming_the_field(
    spark: Any, text: str, found: str
) -> None:
    (row,) = _parse(spark, [text])
    assert row.result is None
    assert row.error.error_class == "SchemaMismatch"
    assert row.error.message == f"field 'name': expected STRING, found {found}"


def test_a_bare_nan_or_infinity_in_a_string_field_fails_as_the_malformed_json_it_is(spark: Any) -> None:
    # Spark's parser takes them (allowNonNumericNumbers) and gives a STRING field "NaN"; JSON has no such token
    rows = _parse(spark, ['{"name": NaN}', '{"name": -Infinity}'])
    assert [r.error.error_class for r in rows] == ["MalformedJson", "MalformedJson"]
    (coerced,) = _parse(spark, ['{"name": NaN}'], strings="coerce")
    assert (coerced.error, coerced.result.name) == (None, '"NaN"')  # as before: its JSON text


def test_json_strings_of_every_shape_pass_a_string_field_unchanged(spark: Any) -> None:
    # strings that look like other JSON (the first-letter look suspects them, the token says string)
    strings = ["12345", "true", "false", "null", "NaN", "Infinity", "-1", "2026-11-27", '{"first": "a"}', '["a"]',
               '"quoted"', 'he said "hi" {x} [y]', "", "héllo ☃ 東京 🚀", "  padded  ", "\\back\\slash", "tom"]
    texts = [json.dumps({"name": s, "n": 1}) for s in strings]
    rows = _parse(spark, [*texts, '{"name": null, "n": 1}', '{"n": 1}'])
    assert [r.error for r in rows] == [None] * len(rows)
    assert [r.result.name for r in rows] == [*strings, None, None]


def test_a_string_field_mismatch_is_reported_with_the_other_fields_mismatches(spark: Any) -> None:
    (row,) = _parse(spark, ['{"name": [1], "n": "12"}'])
    assert row.error.message == """field 'name': expected STRING, found [1]; field 'n': expected INT, found "12\""""


def test_only_the_non_string_field_of_a_record_with_suspect_strings_is_named(spark: Any) -> None:
    schema = StructType([StructField(n, StringType()) for n in ("a", "b", "c")])
    (row,) = _parse(spark, ['{"a": "12", "b": 12, "c": "{x}"}'], schema=schema)
    assert row.error.message == "field 'b': expected STRING, found 12"


def test_a_secret_string_field_is_not_quoted(spark: Any) -> None:
    schema = StructType([StructField("password", StringType())])
    (row,) = _parse(spark, ['{"password": {"hunter": 2}}'], schema=schema)
    assert row.error.message == "field 'password': expected STRING, found [redacted]"


def test_strings_coerce_keeps_non_string_values_as_their_json_text(spark: Any) -> None:
    rows = _parse(spark, ['{"name": {"first": "a"}}', '{"name": ["a","b"]}', '{"name": 12345}', '{"name": "x"}'],
                  strings="coerce")
    assert [r.error for r in rows] == [None] * 4
    assert [r.result.name for r in rows] == ['{"first":"a"}', '["a","b"]', "12345", "x"]


def test_options_strings_is_strict_or_coerce(spark: Any) -> None:
    def spec(**options: Any) -> StageSpec:
        return StageSpec(name="parse", type="json", options={"schema": "name STRING", **options})

    assert from_spec(spec()).strings == "strict"
    assert from_spec(spec(strings="coerce")).strings == "coerce"
    with pytest.raises(ConfigError, match=r"strict \| coerce"):
        from_spec(spec(strings="lenient"))
