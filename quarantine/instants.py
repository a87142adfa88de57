"""Rows brought back from Spark with every instant in UTC: what the operator commands collect.

PySpark turns a collected ``TIMESTAMP`` into a naive :class:`datetime.datetime` in the
*process's* local zone (``datetime.fromtimestamp``): in a process east of UTC a record
stamped 9999-12-31T12:00:00Z overflows Python's year 9999 (``ValueError: year 10000 is
out of range``) and the command fails on a value inside a record, and every other instant
comes back as a local wall clock without its offset. :func:`collect_utc` asks Spark for
each instant's UTC wall clock instead (a ``TIMESTAMP_NTZ``, which PySpark converts
without a zone) and hands it back marked UTC: every value a table can hold (years 0001
to 9999) is read, whatever the process's or the session's zone, and ISO 8601 output
carries ``+00:00``. ``inspect``, ``stats``, ``sql`` and ``report`` collect through it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, TimestampType

__all__ = ["collect_utc", "utc_wall_clocks"]

_SESSION_ZONE = "spark.sql.session.timeZone"


def _has_instant(t: DataType) -> bool:
    if isinstance(t, TimestampType):
        return True
    if isinstance(t, StructType):
        return any(_has_instant(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return _has_instant(t.elementType)
    if isinstance(t, MapType):
        return _has_instant(t.valueType)
    return False


def _utc(c: Column, t: DataType, zone: str) -> Column:
    """``c`` (of type ``t``) with every ``TIMESTAMP`` in it as its UTC wall clock (``TIMESTAMP_NTZ``)."""
    if not _has_instant(t):
        return c
    if isinstance(t, TimestampType):
        # the session zone's wall clock, then moved to UTC's: exact for every instant Spark holds
        return F.convert_timezone(F.lit(zone), F.lit("UTC"), c.cast("timestamp_ntz"))
    if isinstance(t, StructType):
        fields = [_utc(c[f.name], f.dataType, zone).alias(f.name) for f in t.fields]
        return F.when(c.isNotNull(), F.struct(*fields))
    if isinstance(t, ArrayType):
        element = t.elementType
        return F.transform(c, lambda x: _utc(x, element, zone))
    assert isinstance(t, MapType)
    value_type = t.valueType
    return F.transform_values(c, lambda _, v: _utc(v, value_type, zone))


def utc_wall_clocks(df: DataFrame) -> DataFrame:
    """``df`` with every ``TIMESTAMP`` (in structs, arrays and map values too) as its UTC wall clock (pure).

    The columns keep their names and order; only their timestamps' type changes, to
    ``TIMESTAMP_NTZ``. Duplicate column names (a SQL join's) are kept as they are.
    """
    zone = df.sparkSession.conf.get(_SESSION_ZONE) or "UTC"
    if not any(_has_instant(f.dataType) for f in df.schema.fields):
        return df
    names = df.columns
    if len(set(names)) != len(names):  # a select by name would be ambiguous: by position
        renamed = df.toDF(*[f"_c{i}" for i in range(len(names))])
        cols = [_utc(F.col(f"_c{i}"), f.dataType, zone).alias(names[i]) for i, f in enumerate(df.schema.fields)]
        return renamed.select(*cols)
    return df.select(*[_utc(F.col(f"`{f.name}`"), f.dataType, zone).alias(f.name) for f in df.schema.fields])


def _aware(value: Any, t: DataType) -> Any:
    """A value collected from :func:`utc_wall_clocks`'s frame, its instants (of ``t``'s TIMESTAMPs) marked UTC."""
    if value is None or not _has_instant(t):
        return value
    if isinstance(t, TimestampType):
        return value.replace(tzinfo=dt.UTC)
    if isinstance(t, StructType):
        return Row(*t.names)(*[_aware(v, f.dataType) for v, f in zip(value, t.fields, strict=True)])
    if isinstance(t, ArrayType):
        return [_aware(v, t.elementType) for v in value]
    assert isinstance(t, MapType)
    return {k: _aware(v, t.valueType) for k, v in value.items()}


def collect_utc(df: DataFrame) -> list[Row]:
    """``df.collect()``, every instant an aware UTC :class:`~datetime.datetime` (never the process's zone).

    Args:
        df: any frame (a SQL query's too: duplicate column names are kept).

    Returns:
        The rows, in ``df``'s column order and names; a ``TIMESTAMP`` anywhere in a row
        (a struct's field, an array's element, a map's value) is an aware datetime in UTC,
        a ``TIMESTAMP_NTZ`` of ``df``'s own stays naive.
    """
    schema = df.schema
    if not any(_has_instant(f.dataType) for f in schema.fields):
        return df.collect()
    return [_aware(r, schema) for r in utc_wall_clocks(df).collect()]
