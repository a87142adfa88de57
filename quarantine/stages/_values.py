"""What the built-in stages share: declared types in, found values out.

* :func:`parse_spark_type` turns a type written in YAML (``TIMESTAMP``,
  ``DECIMAL(10,2)``, ``ARRAY<INT>``, ``a INT, b STRING``) into a Spark
  :class:`~pyspark.sql.types.DataType`, raising a :class:`ConfigError` that
  names the key. Atomic types are parsed in pure Python (no Spark needed, so
  option validation is unit-testable); complex types are parsed by Spark's own
  DDL parser and therefore need an active SparkSession.
* :func:`render_value` is the one way a stage quotes the value it found in an
  error message: as JSON (strings in double quotes, numbers bare, NULL as
  ``null``), cut to :data:`SNIPPET_CHARS` characters.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
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
)

from quarantine.errors import ConfigError

__all__ = ["SNIPPET_CHARS", "parse_spark_type", "render_value", "snippet", "type_name"]

#: Found values longer than this are cut (with ``…``) in error messages.
SNIPPET_CHARS = 64

_ATOMIC: dict[str, DataType] = {
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
    "bool": BooleanType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
    "binary": BinaryType(),
    "decimal": DecimalType(10, 0),
    "dec": DecimalType(10, 0),
    "numeric": DecimalType(10, 0),
}
_DECIMAL = re.compile(
    r"^(?:decimal|dec|numeric)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$", re.IGNORECASE
)
_EXAMPLES = "a Spark type such as STRING, INT, DOUBLE, DECIMAL(10,2), DATE, TIMESTAMP, ARRAY<INT>"


def parse_spark_type(text: object, key: str) -> DataType:
    """Parse a Spark SQL type name (DDL) written in a config.

    Args:
        text: the configured value.
        key: the config key, for the error (e.g. ``stages[2].options.columns.amount``).

    Returns:
        The DataType. A top-level ``a INT, b STRING`` list is a struct.

    Raises:
        ConfigError: not a string, or not a type Spark knows.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(key, text, _EXAMPLES)
    s = text.strip()
    atomic = _ATOMIC.get(s.lower())
    if atomic is not None:
        return atomic
    m = _DECIMAL.match(s)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2) or 0)
        if not 1 <= precision <= 38 or scale > precision:
            raise ConfigError(key, text, "DECIMAL(p,s) with 1 <= p <= 38 and 0 <= s <= p")
        return DecimalType(precision, scale)
    if re.fullmatch(r"[A-Za-z_]+", s):  # one word that is not a type we know
        raise ConfigError(key, text, _EXAMPLES)
    return _parse_with_spark(s, key)


def _parse_with_spark(s: str, key: str) -> DataType:
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is None:
        raise ConfigError(
            key, s, f"{_EXAMPLES} (complex types are parsed by Spark: start a SparkSession first)"
        )
    try:
        return DataType.fromDDL(s)
    except Exception as exc:  # Spark raises ParseException, AnalysisException…; re-raise as ours
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, s, f"{_EXAMPLES} ({first})") from None


def type_name(t: DataType) -> str:
    """The upper-case SQL name used in messages: ``TIMESTAMP``, ``DECIMAL(10,2)``."""
    return t.simpleString().upper()


def snippet(text: Column) -> Column:
    """``text`` cut to :data:`SNIPPET_CHARS` characters, with ``…`` when cut."""
    return F.when(
        F.length(text) > SNIPPET_CHARS, F.concat(F.substring(text, 1, SNIPPET_CHARS), F.lit("…"))
    ).otherwise(text)


def render_value(value: Column) -> Column:
    """A value as it should appear after ``found`` in a message.

    JSON rendering makes the type visible without knowing it at build time:
    ``"abc"`` for a string, ``15000.5`` for a number, ``null`` for NULL,
    ``{"a":1}`` for a struct; binary appears base64-encoded.
    """
    as_json = F.to_json(F.array(value))
    return snippet(F.substring(as_json, F.lit(2), F.length(as_json) - F.lit(2)))
