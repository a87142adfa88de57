"""What the built-in stages share: declared types in, found values out.

* :func:`parse_spark_type` turns a type written in YAML (``TIMESTAMP``,
  ``DECIMAL(10,2)``, ``ARRAY<INT>``, ``a INT, b STRING``) into a Spark
  :class:`~pyspark.sql.types.DataType`, raising a :class:`ConfigError` that
  names the key. Atomic types are parsed in pure Python; complex types by
  Spark's own DDL parser when a session is active, else by :mod:`quarantine.ddl`
  (``quarantine validate`` starts no Spark).
* :func:`render_value` is the one way a stage quotes the value it found in an
  error message: as JSON (strings in double quotes, numbers bare, NULL as
  ``null``), cut to :data:`SNIPPET_CHARS` characters.
* :func:`compare`, :func:`member_of`, :func:`text_length` and :func:`as_text`
  are the total forms of what checks and expectations do with a value: given
  the value's type, they never fail the job, whatever the value (a value that
  cannot be compared yields NULL, which the caller fails the row for).
* :func:`java_regex_problem` says why the JVM cannot compile a regex, so that
  a bad pattern is a config error, not a failed job.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING

from quarantine.ddl import DDLError, atomic_types, parse_ddl_type
from quarantine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import (
        DataType,
    )

__all__ = [
    "SNIPPET_CHARS",
    "Op",
    "as_text",
    "comparable",
    "compare",
    "contains_map",
    "incomparable",
    "java_regex_problem",
    "member_of",
    "parse_spark_type",
    "render_value",
    "snippet",
    "text_length",
    "type_name",
]

#: Found values longer than this are cut (with ``…``) in error messages.
SNIPPET_CHARS = 64

@cache
def _atomic() -> dict[str, DataType]:
    """The atomic names Spark's parser reads, and ``bool`` (a config's long-standing alias)."""
    from pyspark.sql.types import BooleanType

    return {**atomic_types(), "bool": BooleanType()}

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
    from pyspark.sql.types import DecimalType

    if not isinstance(text, str) or not text.strip():
        raise ConfigError(key, text, _EXAMPLES)
    s = text.strip()
    atomic = _atomic().get(s.lower())
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
    from pyspark.sql.types import DataType

    if SparkSession.getActiveSession() is None:  # quarantine validate: no Spark; the same grammar
        try:
            return parse_ddl_type(s)
        except DDLError as exc:
            raise ConfigError(key, s, f"{_EXAMPLES} ({exc})") from None
    try:
        return DataType.fromDDL(s)
    except Exception as exc:  # Spark raises ParseException, AnalysisException…; re-raise as ours
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, s, f"{_EXAMPLES} ({first})") from None


def type_name(t: DataType) -> str:
    """A type as messages name it: SQL keywords upper-case, field names as written.

    ``TIMESTAMP``, ``DECIMAL(10,2)``, ``ARRAY<INT>``, ``MAP<STRING, INT>``,
    ``STRUCT<os: STRING, screen_w: INT>`` (a struct's field names are never upper-cased:
    they are the names the data and the table hold).
    """
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(t, StructType):
        return "STRUCT<" + ", ".join(f"{f.name}: {type_name(f.dataType)}" for f in t.fields) + ">"
    if isinstance(t, ArrayType):
        return f"ARRAY<{type_name(t.elementType)}>"
    if isinstance(t, MapType):
        return f"MAP<{type_name(t.keyType)}, {type_name(t.valueType)}>"
    return t.simpleString().upper()


def snippet(text: Column) -> Column:
    """``text`` cut to :data:`SNIPPET_CHARS` characters, with ``…`` when cut."""
    from pyspark.sql import functions as F

    return F.when(
        F.length(text) > SNIPPET_CHARS, F.concat(F.substring(text, 1, SNIPPET_CHARS), F.lit("…"))
    ).otherwise(text)


def render_value(value: Column) -> Column:
    """A value as it should appear after ``found`` in a message.

    JSON rendering makes the type visible without knowing it at build time:
    ``"abc"`` for a string, ``15000.5`` for a number, ``null`` for NULL,
    ``{"a":1}`` for a struct; binary appears base64-encoded.
    """
    from pyspark.sql import functions as F

    as_json = F.to_json(F.array(value))
    return snippet(F.substring(as_json, F.lit(2), F.length(as_json) - F.lit(2)))


# --------------------------------------------------------------------------- total comparisons
# A check compares a value of the column's type with literals from the config. Left to
# Spark's implicit coercion that comparison can abort the job (under ANSI, a STRING
# compared with a number is cast, and 'abc' fails the cast) or the plan (an ARRAY
# compared with a number). These helpers build comparisons that are total: they look
# at the column's type when the stage is built and yield NULL for a value that cannot
# be compared, which the caller turns into a failure of that row.

_LONG = (-(2**63), 2**63 - 1)

#: A comparison of two columns (``operator.ge``, ``operator.eq``…).
Op = Callable[["Column", "Column"], "Column"]


def _is_numeric_type(dtype: DataType | None) -> bool:
    from pyspark.sql.types import ByteType, DecimalType, DoubleType, FloatType, IntegerType, LongType, ShortType

    return isinstance(dtype, ByteType | ShortType | IntegerType | LongType | FloatType | DoubleType | DecimalType)


def _is_datetime_type(dtype: DataType | None) -> bool:
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    return isinstance(dtype, DateType | TimestampType | TimestampNTZType)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float | Decimal) and not isinstance(x, bool)


def _number(x: int | float | Decimal) -> Column:
    # a Python int beyond BIGINT has no Spark literal; as a double it still orders right
    from pyspark.sql import functions as F

    if isinstance(x, int) and not _LONG[0] <= x <= _LONG[1]:
        return F.lit(float(x))
    return F.lit(x)


def _parse_number(text: str) -> int | float | None:
    try:
        return int(text.strip())
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


class _Kind(StrEnum):
    """How a value of some type meets a bound."""

    SPARK = "spark"  # type unknown: Spark's own coercion (not total)
    DIRECT = "direct"  # the value against the bound as a literal
    AS_NUMBER = "as_number"  # a STRING read as a number (NULL if it is not one)
    PARSED_BOUND = "parsed_bound"  # a string bound read as a DATE/TIMESTAMP (NULL if it is not one)


def _kind(dtype: DataType | None, bound: object) -> _Kind | None:
    """How values of ``dtype`` compare with ``bound``; None if they cannot."""
    from pyspark.sql.types import BooleanType, StringType

    if dtype is None:
        return _Kind.SPARK
    if isinstance(dtype, BooleanType):
        return _Kind.DIRECT if isinstance(bound, bool) else None
    if _is_numeric_type(dtype):
        if isinstance(bound, str):
            return _Kind.DIRECT if _parse_number(bound) is not None else None
        return _Kind.DIRECT if _is_number(bound) else None
    if isinstance(dtype, StringType):
        if isinstance(bound, str):
            return _Kind.DIRECT
        return _Kind.AS_NUMBER if _is_number(bound) else None
    if _is_datetime_type(dtype):
        if isinstance(bound, str):
            return _Kind.PARSED_BOUND
        return _Kind.DIRECT if isinstance(bound, dt.date) else None  # date and datetime
    return None


def _literal(dtype: DataType | None, bound: object, kind: _Kind) -> Column:
    from pyspark.sql import functions as F

    if kind is _Kind.PARSED_BOUND:
        assert dtype is not None
        return F.lit(bound).try_cast(dtype)
    if isinstance(bound, str) and _is_numeric_type(dtype):
        parsed = _parse_number(bound)
        assert parsed is not None
        return _number(parsed)
    if _is_number(bound):
        return _number(bound)  # type: ignore[arg-type]
    return F.lit(bound)


def _operands(value: Column, dtype: DataType | None, bound: object) -> tuple[Column, Column] | None:
    """``(left, right)`` to compare for ``value`` (of ``dtype``) against ``bound``, or None.

    None means no value of ``dtype`` can be compared with ``bound``. ``left`` is
    NULL where this value cannot (a STRING that is not a number); ``right`` is
    NULL when the bound is a string that does not read as a ``dtype`` value.
    """
    kind = _kind(dtype, bound)
    if kind is None:
        return None
    left = value.try_cast("double") if kind is _Kind.AS_NUMBER else value
    return left, _literal(dtype, bound, kind)


def comparable(dtype: DataType | None, bound: object) -> bool:
    """Whether values of ``dtype`` can be compared with ``bound`` at all (see :func:`compare`)."""
    return _kind(dtype, bound) is not None


def compare(value: Column, dtype: DataType | None, op: Op, bound: object) -> Column | None:
    """``value <op> bound`` that never fails, or None if ``dtype`` and ``bound`` do not compare.

    * Numbers compare with numbers (and with strings that read as numbers, such as ``"5"``).
    * A STRING compares with a string as text and with a number as the number it
      holds; a STRING that is not a number yields NULL.
    * DATE and TIMESTAMP compare with dates and with strings that read as one
      (``"2026-01-31"``); a string that does not yields NULL for every row.
    * BOOLEAN compares with booleans.
    * BINARY, ARRAY, MAP, STRUCT and the rest compare with nothing: None.

    Args:
        value: the value.
        dtype: its type (``StageContext.type_of``); None falls back to Spark's own
            coercion, which is not total.
        op: the comparison (``operator.ge``…).
        bound: a literal from the config.

    Returns:
        A boolean column, NULL where ``value`` is NULL or cannot be compared; or None.
    """
    pair = _operands(value, dtype, bound)
    return None if pair is None else op(*pair)


def incomparable(dtype: DataType | None, bounds: Sequence[object]) -> str:
    """Why a value of ``dtype`` was not compared with ``bounds``, for messages."""
    from pyspark.sql.types import StringType

    shown = ", ".join(json.dumps(b, default=str) for b in bounds)
    name = dtype.simpleString() if dtype is not None else "value"
    if isinstance(dtype, StringType) and any(_is_number(b) for b in bounds):
        return f"a {name} that is not a number"
    return f"{name}, which cannot be compared with {shown}"


def member_of(value: Column, dtype: DataType | None, members: Sequence[object]) -> Column:
    """``value`` equals one of ``members``, without failing for any value.

    Members that cannot equal a value of ``dtype`` (see :func:`compare`) are
    skipped. As with Spark's ``IN``, a NULL value gives NULL, and a NULL member
    makes the result NULL (not false) for a value that equals no member.
    """
    from pyspark.sql import functions as F

    direct: list[Column] = []
    as_number: list[Column] = []
    hits: list[Column] = []
    for m in members:
        kind = None if m is None else _kind(dtype, m)
        if kind is None:
            continue
        right = _literal(dtype, m, kind)
        if kind is _Kind.AS_NUMBER:
            as_number.append(right)
        elif kind is _Kind.PARSED_BOUND:
            hits.append(F.coalesce(value == right, F.lit(False)))
        else:
            direct.append(right)
    if direct:
        hits.append(F.coalesce(value.isin(*direct), F.lit(False)))
    if as_number:
        hits.append(F.coalesce(value.try_cast("double").isin(*as_number), F.lit(False)))
    hit = F.lit(False)
    for h in hits:
        hit = hit | h
    if any(m is None for m in members):
        hit = F.when(hit, F.lit(True)).otherwise(F.lit(None).cast("boolean"))
    return F.when(value.isNotNull(), hit)  # NULL IN (…) is NULL, as in Spark


def text_length(value: Column, dtype: DataType | None) -> Column | None:
    """Character length (bytes for BINARY), or None for types without one.

    Atomic non-text values are measured as Spark renders them as a STRING (as
    Spark's ``length`` does when it casts them); ARRAY, MAP and STRUCT have no
    length here.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

    if dtype is None or isinstance(dtype, StringType | BinaryType):
        return F.length(value)
    if isinstance(dtype, ArrayType | MapType | StructType):
        return None
    return F.length(value.cast("string"))


def as_text(value: Column, dtype: DataType | None) -> Column:
    """The value as a STRING for a regex (every type casts to STRING without failing)."""
    from pyspark.sql.types import StringType

    return value if isinstance(dtype, StringType) else value.cast("string")


def contains_map(dtype: DataType | None) -> bool:
    """Whether ``dtype`` is or holds a MAP (which Spark cannot group or partition by)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dtype, MapType):
        return True
    if isinstance(dtype, ArrayType):
        return contains_map(dtype.elementType)
    if isinstance(dtype, StructType):
        return any(contains_map(f.dataType) for f in dtype.fields)
    return False


# --------------------------------------------------------------------------- regular expressions
# Checks and expectations run regexes on the JVM (java.util.regex). A pattern it cannot
# compile would fail the job at the first row; it is a config error instead.

_PY_ONLY_REGEX = re.compile(r"\(\?P[<=>]")
# patterns the JVM compiled (the answer never changes; a suite is checked once per stage build)
_COMPILED: set[str] = set()


def java_regex_problem(pattern: str) -> str | None:
    """Why ``java.util.regex`` cannot compile ``pattern``, or None if it can.

    Python-only syntax (``(?P<name>…)``, ``(?P=name)``) is recognised without
    Spark; anything else is compiled by Spark itself (a one-row query, no data
    read) when a SparkSession is active. Without one only the Python-only check
    runs.
    """
    from pyspark.sql import functions as F

    if _PY_ONLY_REGEX.search(pattern):
        return (
            "(?P<name>…) and (?P=name) are Python-only syntax; "
            "java.util.regex spells them (?<name>…) and \\k<name>"
        )
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None or pattern in _COMPILED:
        return None
    try:
        session.range(1).select(F.regexp_like(F.lit(""), F.lit(pattern))).collect()
    except Exception as exc:  # Spark wraps PatternSyntaxException in several types
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        return lines[0][:300] if lines else type(exc).__name__
    _COMPILED.add(pattern)
    return None
