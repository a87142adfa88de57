"""Spark SQL type DDL, parsed in pure Python: a config checked without starting Spark.

``quarantine validate`` checks a config's stage options (a ``cast`` stage's target
types, a ``json`` stage's schema, a ``python`` stage's return type) before any JVM
exists. Spark's own parser (``DataType.fromDDL``) needs a session; this module reads
the same grammar for the types a pipeline config uses:

* atomic types and their aliases (``STRING``, ``INT``/``INTEGER``, ``BIGINT``/``LONG``,
  ``DOUBLE``, ``BOOLEAN``, ``DATE``, ``TIMESTAMP``, ``TIMESTAMP_NTZ``, ``BINARY``, …),
  ``DECIMAL(p[,s])``, ``CHAR(n)``/``VARCHAR(n)``, ``VARIANT``;
* ``ARRAY<T>``, ``MAP<K, V>``, ``STRUCT<name: T, …>`` (the colon optional, field
  names plain or in backticks, ``NOT NULL`` and ``COMMENT '…'`` after a field's type);
* a top-level field list ``a INT, b STRING`` or ``a: INT, b: STRING`` (a struct), as
  ``DataType.fromDDL`` reads it.

Spark's parser stays the authority where a session is active (the stages use it
then); a differential test (``tests/integration/test_ddl.py``) holds the two to the
same answers. Interval types are not read here: they are not types a Kafka record's
fields are cast to, and the error says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import (
        DataType,
        StructField,
        StructType,
    )

__all__ = ["DDLError", "atomic_types", "parse_ddl_schema", "parse_ddl_type"]

@cache
def atomic_types() -> dict[str, DataType]:
    """Atomic type names (lower case) and their types, aliases included, as Spark's parser reads them."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        TimestampNTZType,
        TimestampType,
        VariantType,
    )

    return {
        "string": StringType(),
        "int": IntegerType(),
        "integer": IntegerType(),
        "bigint": LongType(),
        "long": LongType(),
        "smallint": ShortType(),
        "short": ShortType(),
        "tinyint": ByteType(),
        "byte": ByteType(),
        "double": DoubleType(),
        "float": FloatType(),
        "real": FloatType(),
        "boolean": BooleanType(),
        "date": DateType(),
        "timestamp": TimestampType(),
        "timestamp_ltz": TimestampType(),
        "timestamp_ntz": TimestampNTZType(),
        "binary": BinaryType(),
        "variant": VariantType(),
        "decimal": DecimalType(10, 0),
        "dec": DecimalType(10, 0),
        "numeric": DecimalType(10, 0),
    }
_DECIMALS = frozenset({"decimal", "dec", "numeric"})
_CHARS = frozenset({"char", "character", "varchar"})
_COMPLEX = frozenset({"array", "map", "struct", "interval"})

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)|(?P<punct><>|[<>(),:]))"
)


class DDLError(ValueError):
    """A type DDL that does not parse; the message says what was expected and where."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # quoted | string | word | number | punct | end
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            start = len(text) - len(text[pos:].lstrip())
            raise DDLError(f"unexpected character {text[start]!r} at position {start + 1}")
        out.append(_Tok(m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, expected: str) -> DDLError:
        t = self.tok
        found = "the end" if t.kind == "end" else repr(t.text)
        return DDLError(f"expected {expected} at position {t.pos + 1}, found {found}")

    def take(self, text: str) -> bool:
        if self.tok.kind in ("punct", "word") and self.tok.text.lower() == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise self.fail(repr(text))

    def number(self) -> int:
        if self.tok.kind != "number":
            raise self.fail("a number")
        self.i += 1
        return int(self.toks[self.i - 1].text)

    def name(self) -> str:
        t = self.tok
        if t.kind == "word":
            self.i += 1
            return t.text
        if t.kind == "quoted":
            self.i += 1
            return t.text[1:-1].replace("``", "`")
        raise self.fail("a field name")

    def data_type(self) -> DataType:
        from pyspark.sql.types import ArrayType, CharType, DecimalType, MapType, StructType, VarcharType

        t = self.tok
        if t.kind != "word":
            raise self.fail("a type")
        word = t.text.lower()
        self.i += 1
        if word == "array":
            self.expect("<")
            element = self.data_type()
            self.expect(">")
            return ArrayType(element, True)
        if word == "map":
            self.expect("<")
            key = self.data_type()
            self.expect(",")
            value = self.data_type()
            self.expect(">")
            return MapType(key, value, True)
        if word == "struct":
            if self.take("<>"):
                return StructType([])
            self.expect("<")
            fields = [] if self.tok.text == ">" else self.fields()
            self.expect(">")
            return StructType(fields)
        if word in _DECIMALS and self.take("("):
            precision = self.number()
            scale = self.number() if self.take(",") else 0
            self.expect(")")
            if not 1 <= precision <= 38 or scale > precision:
                raise DDLError(f"DECIMAL({precision},{scale}): needs 1 <= precision <= 38 and scale <= precision")
            return DecimalType(precision, scale)
        if word in _CHARS:
            self.expect("(")
            length = self.number()
            self.expect(")")
            return VarcharType(length) if word == "varchar" else CharType(length)
        if word == "interval":
            raise DDLError("interval types are not supported in a pipeline config")
        atomic = atomic_types().get(word)
        if atomic is None:
            raise DDLError(f"unknown type {t.text!r} at position {t.pos + 1}")
        return atomic

    def field(self) -> StructField:
        from pyspark.sql.types import StructField

        name = self.name()
        self.take(":")
        dtype = self.data_type()
        nullable = True
        if self.take("not"):
            self.expect("null")
            nullable = False
        metadata = {}
        if self.take("comment"):
            if self.tok.kind != "string":
                raise self.fail("a quoted comment")
            metadata = {"comment": _unquote(self.tok.text)}
            self.i += 1
        return StructField(name, dtype, nullable, metadata)

    def fields(self) -> list[StructField]:
        out = [self.field()]
        while self.take(","):
            out.append(self.field())
        return out

    def end(self) -> None:
        if self.tok.kind != "end":
            raise self.fail("the end")


def _unquote(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s[1:-1])


def parse_ddl_type(text: str) -> DataType:
    """One type, as ``DataType.fromDDL`` reads it (a top-level ``a INT, b STRING`` is a struct).

    Raises:
        DDLError: the text is not a type this grammar reads; the message names the
            position and what was expected there.
    """
    from pyspark.sql.types import StructType

    p = _Parser(text)
    if p.tok.kind == "end":
        raise DDLError("empty type")
    start = p.i
    try:
        dtype = p.data_type()
        p.end()
        return dtype
    except DDLError as as_type:
        p.i = start  # not one type: a field list ``a INT, b STRING``?
        try:
            fields = p.fields()
            p.end()
        except DDLError as as_fields:
            # the message of the reading the text was meant as: a type if it starts with one
            first = p.toks[start].text.lower()
            if len(p.toks) == 2 or first in atomic_types() or first in _CHARS or first in _COMPLEX:
                raise as_type from None
            raise as_fields from None
        return StructType(fields)


def parse_ddl_schema(text: str) -> StructType:
    """A schema: ``a INT, b STRING`` or ``STRUCT<a: INT, b: STRING>``.

    Raises:
        DDLError: not a struct, or not DDL this grammar reads.
    """
    from pyspark.sql.types import StructType

    dtype = parse_ddl_type(text)
    if not isinstance(dtype, StructType):
        raise DDLError(
            f"expected a field list such as 'order_id STRING, amount DOUBLE', found the type {dtype.simpleString()}"
        )
    return dtype
