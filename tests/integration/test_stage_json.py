"""json: parse against a declared schema; every kind of bad JSON gets its own class and message."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from quarantine.batch.chain import apply_stages
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.json import JsonParse
from tests.helpers import kafka_df

SCHEMA = StructType(
    [
        StructField("order_id", StringType()),
        StructField("amount", DoubleType()),
        StructField("quantity", IntegerType()),
        StructField("tags", ArrayType(StringType())),
        StructField(
            "customer",
            StructType([StructField("id", IntegerType()), StructField("name", StringType())]),
        ),
    ]
)


def _parse(spark: Any, values: list[str | bytes | None], required: tuple[str, ...] = ("order_id",)) -> list[Any]:
    raw = [v.encode() if isinstance(v, str) else v for v in values]
    stages = [DecodeUtf8("decode"), JsonParse("parse", SCHEMA, required=required)]
    out = apply_stages(kafka_df(spark, raw), stages)
    return [r.parse for r in out.orderBy("offset").collect()]


def _error(row: Any) -> tuple[str, str, str, str]:
    assert row.result is None, row
    e = row.error
    return (e.stage, e.kind, e.error_class, e.message)


def test_valid_object_with_nested_types_and_unicode_parses(spark: Any) -> None:
    (row,) = _parse(
        spark,
        [
            '{"order_id": "Ø-17 東京", "amount": 12.5, "quantity": 3, "tags": ["a", "ß"], '
            '"customer": {"id": 7, "name": "Zoë 🚀"}, "extra": "ignored"}'
        ],
    )
    assert row.error is None
    r = row.result
    assert (r.order_id, r.amount, r.quantity, r.tags) == ("Ø-17 東京", 12.5, 3, ["a", "ß"])
    assert (r.customer.id, r.customer.name) == (7, "Zoë 🚀")
    assert r.asDict().keys() == {"order_id", "amount", "quantity", "tags", "customer"}


def test_optional_fields_may_be_absent_or_null(spark: Any) -> None:
    (row,) = _parse(spark, ['{"order_id": "A1", "amount": null}'])
    assert row.error is None
    assert (row.result.order_id, row.result.amount, row.result.quantity) == ("A1", None, None)


def test_truncated_json_is_malformed(spark: Any) -> None:
    text = '{"order_id": "A1", "amount": 1'
    (row,) = _parse(spark, [text])
    assert _error(row) == (
        "parse",
        "deserialize",
        "MalformedJson",
        f"malformed JSON ({len(text)} chars); expected a JSON object, found {text}",
    )


def test_long_malformed_input_is_cut_in_the_message(spark: Any) -> None:
    text = '{"order_id": "' + "x" * 200
    (row,) = _parse(spark, [text])
    _, _, cls, message = _error(row)
    assert cls == "MalformedJson"
    assert message == f"malformed JSON (214 chars); expected a JSON object, found {text[:64]}…"


def test_empty_and_blank_values_say_empty(spark: Any) -> None:
    empty, blank = _parse(spark, ["", "  \n\t"])
    assert _error(empty)[2:] == ("MalformedJson", "empty value; expected a JSON object")
    assert _error(blank)[2:] == (
        "MalformedJson",
        "empty value (4 chars of whitespace); expected a JSON object",
    )


def test_null_value_fails_in_decode_and_is_carried_unchanged(spark: Any) -> None:
    (row,) = _parse(spark, [None])
    assert _error(row) == ("decode", "deserialize", "NullInput", "column 'value' is NULL; expected UTF-8 bytes")


def test_null_string_input_without_decode_is_null_input(spark: Any) -> None:
    df = kafka_df(spark, [None]).withColumn("text", F.lit(None).cast("string"))
    out = apply_stages(df, [JsonParse("parse", SCHEMA, input="text")])
    (row,) = out.collect()
    assert _error(row.parse)[2:] == ("NullInput", "input is NULL; expected a JSON object")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("[1, 2]", "[1,2]"),
        ('"just a string"', '"just a string"'),
        ("42", "42"),
        ("null", "null"),
        ("true", "true"),
    ],
)
def test_json_that_is_not_an_object_quotes_what_it_found(spark: Any, text: str, found: str) -> None:
    (row,) = _parse(spark, [text])
    assert _error(row)[2:] == ("NotAJsonObject", f"expected a JSON object, found {found}")


def test_wrong_types_name_each_field_and_quote_the_json_value(spark: Any) -> None:
    (row,) = _parse(spark, ['{"order_id": "A1", "amount": "12,50", "quantity": 2.5, "tags": "x"}'])
    assert _error(row)[2:] == (
        "SchemaMismatch",
        "field 'amount': expected DOUBLE, found \"12,50\"; field 'quantity': expected INT, found 2.5; "
        "field 'tags': expected ARRAY<STRING>, found \"x\"",
    )


def test_wrong_type_object_where_number_expected(spark: Any) -> None:
    (row,) = _parse(spark, ['{"order_id": "A1", "amount": {"value": 1}}'])
    assert _error(row)[2:] == ("SchemaMismatch", "field 'amount': expected DOUBLE, found {\"value\":1}")


def test_missing_and_null_required_fields_are_told_apart(spark: Any) -> None:
    missing, null = _parse(
        spark, ['{"amount": 1.0}', '{"order_id": null, "amount": null}'], required=("order_id", "amount")
    )
    assert _error(missing)[2:] == (
        "MissingRequiredField",
        "required field 'order_id': expected a value, found no such field",
    )
    assert _error(null)[2:] == (
        "MissingRequiredField",
        "required field 'order_id': expected a value, found null; "
        "required field 'amount': expected a value, found null",
    )


def test_exactly_one_of_result_and_error_over_a_mixed_batch(spark: Any) -> None:
    values: list[str | bytes | None] = [
        '{"order_id": "A"}',
        "{",
        "",
        None,
        b"\xff",
        "[]",
        '{"order_id": 1}',
        '{"amount": "x"}',
    ]
    rows = _parse(spark, values)
    assert [(r.result is None) != (r.error is None) for r in rows] == [True] * len(values)
    assert [r.error.error_class if r.error else None for r in rows] == [
        None,
        "MalformedJson",
        "MalformedJson",
        "NullInput",
        "InvalidUtf8",
        "NotAJsonObject",
        "SchemaMismatch",  # a number for a STRING field (strings: strict, issue 34)
        "SchemaMismatch",
    ]
