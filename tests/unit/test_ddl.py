"""quarantine.ddl: Spark type DDL read without Spark (``quarantine validate`` starts no JVM).

The differential test against Spark's own parser is tests/integration/test_ddl_differential.py.
"""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    CharType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    VarcharType,
    VariantType,
)

from quarantine.ddl import DDLError, parse_ddl_schema, parse_ddl_type

S = StructType
F = StructField


@pytest.mark.parametrize(("text", "expected"), [
    ("INT", IntegerType()),
    ("  bigint ", LongType()),
    ("timestamp_ntz", TimestampNTZType()),
    ("variant", VariantType()),
    ("DECIMAL(10,2)", DecimalType(10, 2)),
    ("dec(5)", DecimalType(5, 0)),
    ("decimal", DecimalType(10, 0)),
    ("varchar(3)", VarcharType(3)),
    ("char(2)", CharType(2)),
    ("ARRAY<INT>", ArrayType(IntegerType(), True)),
    ("map<string, array<decimal(38,0)>>", MapType(StringType(), ArrayType(DecimalType(38, 0), True), True)),
    ("struct<>", S([])),
    ("struct<a:int, `b c`: string not null comment 'x'>",
     S([F("a", IntegerType()), F("b c", StringType(), False, {"comment": "x"})])),
    ("STRUCT<a INT>", S([F("a", IntegerType())])),
    ("a INT, b STRING", S([F("a", IntegerType()), F("b", StringType())])),
    ("a: INT", S([F("a", IntegerType())])),
    ("`a``b` int", S([F("a`b", IntegerType())])),
    ("string int", S([F("string", IntegerType())])),  # a field named like a type
    ("order_id STRING, amount DOUBLE, items ARRAY<STRUCT<sku: STRING, qty: INT>>", S([
        F("order_id", StringType()), F("amount", parse_ddl_type("double")),
        F("items", ArrayType(S([F("sku", StringType()), F("qty", IntegerType())]), True)),
    ])),
])
def test_reads_the_types_a_config_uses(text: str, expected: object) -> None:
    assert parse_ddl_type(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty type"),
    ("bool", "unknown type 'bool' at position 1"),
    ("a INTT", "unknown type 'INTT' at position 3"),
    ("array<int", "expected '>' at position 10, found the end"),
    ("map<string>", "expected ',' at position 11, found '>'"),
    ("decimal(40,2)", "DECIMAL(40,2): needs 1 <= precision <= 38"),
    ("decimal(x)", "expected a number at position 9, found 'x'"),
    ("a int,", "expected a field name at position 7, found the end"),
    ("int not null", "expected the end at position 5, found 'not'"),
    ("a int comment x", "expected a quoted comment at position 15, found 'x'"),
    ("interval day", "interval types are not supported"),
    ("a INT; DROP TABLE t", "unexpected character ';' at position 6"),
])
def test_a_type_that_does_not_parse_says_where_and_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(DDLError) as err:
        parse_ddl_type(text)
    assert message in str(err.value)


def test_a_schema_is_a_field_list() -> None:
    assert parse_ddl_schema("STRUCT<a: INT>") == S([F("a", IntegerType())])
    with pytest.raises(DDLError, match=r"expected a field list .* found the type array<int>"):
        parse_ddl_schema("array<int>")
