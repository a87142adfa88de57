"""decode_utf8: valid bytes pass through as text; invalid UTF-8 and NULL are quarantined."""

from __future__ import annotations

from typing import Any

from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from quarantine.batch.chain import apply_stages
from quarantine.schema import ERROR_STRUCT, result_struct
from quarantine.stages.decode import DecodeUtf8
from tests.helpers import kafka_df


def _run(spark: Any, values: list[bytes | None], stage: DecodeUtf8) -> list[Any]:
    out = apply_stages(kafka_df(spark, values), [stage])
    return [r[stage.name] for r in out.orderBy("offset").collect()]


def test_valid_utf8_including_unicode_and_empty_passes_through(spark: Any) -> None:
    values = [b"plain", "Zürich — 東京 🚀".encode(), b""]
    rows = _run(spark, values, DecodeUtf8("decode"))
    assert [r.result for r in rows] == ["plain", "Zürich — 東京 🚀", ""]
    assert all(r.error is None for r in rows)


def test_invalid_utf8_is_quarantined_with_length_and_leading_bytes(spark: Any) -> None:
    bad = b"ok\xc3\x28 then more"  # 0xC3 starts a 2-byte sequence; 0x28 is not a continuation
    (row,) = _run(spark, [bad], DecodeUtf8("decode"))
    assert row.result is None
    err = row.error
    assert (err.stage, err.kind, err.error_class) == ("decode", "deserialize", "InvalidUtf8")
    assert err.message == (
        f"column 'value' is not valid UTF-8 at byte 2 (0xC3) of {len(bad)} bytes, starting 0x{bad[:16].hex().upper()}"
    )
    assert (err.stacktrace, err.retriable, err.attempts) == (None, False, 1)


def test_the_first_invalid_byte_is_named_by_its_offset_counted_in_bytes(spark: Any) -> None:
    """Multi-byte characters before it count as their bytes; a real U+FFFD before it (valid
    UTF-8, EF BF BD) is not mistaken for it; a sequence cut at the end is at its lead byte."""
    values = ["€ü".encode() + b"\xff rest", "a\ufffdb".encode() + b"\x80", "ok €".encode()[:-1], b"\xfe"]
    rows = _run(spark, values, DecodeUtf8("decode"))
    said = [r.error.message.split(" of ")[0].rsplit(" ", 3)[-3:] for r in rows]
    assert said == [["byte", "5", "(0xFF)"], ["byte", "5", "(0x80)"], ["byte", "3", "(0xE2)"], ["byte", "0", "(0xFE)"]]


def test_truncated_multibyte_sequence_is_invalid(spark: Any) -> None:
    truncated = "€".encode()[:2]
    (row,) = _run(spark, [truncated], DecodeUtf8("decode"))
    assert row.error.error_class == "InvalidUtf8"


def test_null_value_is_an_error_unless_nullable(spark: Any) -> None:
    (strict,) = _run(spark, [None], DecodeUtf8("decode"))
    assert strict.result is None
    assert strict.error.error_class == "NullInput"
    assert strict.error.message == "column 'value' is NULL; expected UTF-8 bytes"

    (lenient,) = _run(spark, [None], DecodeUtf8("decode", nullable=True))
    assert lenient.error is None and lenient.result is None


def test_decodes_the_key_column_when_asked(spark: Any) -> None:
    df = kafka_df(spark, [b"v"], keys=[b"\xff\xfe"])
    out = apply_stages(df, [DecodeUtf8("key_text", input="key")])
    (row,) = out.collect()
    assert row.key_text.error.error_class == "InvalidUtf8"
    assert row.key_text.error.message.startswith("column 'key' is not valid UTF-8 at byte 0 (0xFF) of 2 bytes")


def test_column_type_is_the_result_struct_and_exactly_one_side_is_set(spark: Any) -> None:
    values = [b"a", b"\xff", None, "ü".encode()]
    out = apply_stages(kafka_df(spark, values), [DecodeUtf8("decode")])
    column_type = out.schema["decode"].dataType
    assert column_type.simpleString() == result_struct(StringType()).simpleString()
    assert column_type["error"].dataType.fieldNames() == ERROR_STRUCT.fieldNames()
    both_or_neither = out.where(F.col("decode.result").isNull() == F.col("decode.error").isNull())
    assert both_or_neither.count() == 0
    expected = spark.createDataFrame(
        [(0, "a", None), (1, None, "InvalidUtf8"), (2, None, "NullInput"), (3, "ü", None)],
        "offset BIGINT, text STRING, error_class STRING",
    )
    actual = out.select(
        "offset", F.col("decode.result").alias("text"), F.col("decode.error.error_class").alias("error_class")
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
