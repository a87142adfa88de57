"""Protobuf messages as Spark types, and parsed messages as Arrow columns of those types.

:func:`message_type` derives the stage's result type from a message descriptor:

| Protobuf | Spark |
|---|---|
| ``double`` / ``float`` | DOUBLE / FLOAT |
| ``int32``, ``sint32``, ``sfixed32`` | INT |
| ``int64``, ``sint64``, ``sfixed64``, ``uint32``, ``fixed32`` | BIGINT |
| ``uint64``, ``fixed64`` | DECIMAL(20,0) (every value fits) |
| ``bool`` / ``string`` / ``bytes`` | BOOLEAN / STRING / BINARY |
| an enum | STRING: the value's name (an open enum's unknown number: its digits) |
| a message | STRUCT of its fields (NULL when not set) |
| ``repeated T`` | ARRAY<T> (empty, never NULL, when none) |
| ``map<K, V>`` | MAP<K, V> (entries in key order) |
| ``google.protobuf.Timestamp`` | TIMESTAMP (microseconds: nanoseconds below a microsecond are cut) |
| ``google.protobuf.*Value`` (the wrappers) | the wrapped type, NULL when not set |

A field without presence (a proto3 scalar not marked ``optional``) holds its default
when it was not written (0, ``""``, the enum's first value); a field with presence
(``optional``, a oneof's member, a message, a wrapper) is NULL. A message that holds
itself, directly or not (``google.protobuf.Struct``, a tree), has no Spark type: it is
refused when the stage is built.

:func:`columns` builds the code that turns a list of parsed messages of one *writer*
message into one Arrow struct column of the *reader* message's type, field by field
(a Python list per field, one Arrow conversion each: no per-row dicts). Fields are
matched by name: a reader field the writer lacks takes its default (as above), a writer
field the reader lacks is left out, and a numeric field may widen (INT → BIGINT,
DOUBLE, DECIMAL; FLOAT → DOUBLE; BIGINT → DECIMAL). Anything else that differs is
:class:`Incompatible`, known before any record is read.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import (
        DataType,
        StructType,
    )

__all__ = ["Builder", "Incompatible", "columns", "field_type", "message_type"]

#: A column builder: the values of one field (Python objects), which are set (None: all) → an Arrow array.
Builder = Callable[[list[Any], "np.ndarray | None"], pa.Array]

_TIMESTAMP = "google.protobuf.Timestamp"
_WRAPPERS = {
    f"google.protobuf.{n}Value" for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String",
                                          "Bytes")
}
_ENUM, _MESSAGE, _GROUP = 14, 11, 10
#: The range a google.protobuf.Timestamp may hold (its definition's): 0001-01-01 to 9999-12-31.
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799
_WIDENS = {
    ("int", "bigint"), ("int", "double"), ("int", "decimal(20,0)"), ("float", "double"), ("bigint", "decimal(20,0)"),
}


@cache
def _scalars() -> dict[int, DataType]:
    """FieldDescriptor.TYPE_* numbers → Spark types."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
    )

    return {
        1: DoubleType(), 2: FloatType(), 3: LongType(), 4: DecimalType(20, 0), 5: IntegerType(), 6: DecimalType(20, 0),
        7: LongType(), 8: BooleanType(), 9: StringType(), 12: BinaryType(), 13: LongType(), 15: IntegerType(),
        16: LongType(), 17: IntegerType(), 18: LongType(),
    }


class Incompatible(ValueError):  # noqa: N818 - reads as the reason: raise Incompatible("field 'a': …")
    """The writer message's records cannot be read as the reader message (the reason is the text)."""


def _is_map(fd: Any) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _repeated(fd: Any) -> bool:
    return bool(fd.label == fd.LABEL_REPEATED)


def message_type(desc: Any, _seen: tuple[str, ...] = ()) -> StructType:
    """The Spark type of a message (see the module docstring).

    Raises:
        Incompatible: the message holds itself (no finite Spark type).
    """
    from pyspark.sql.types import StructField, StructType

    if desc.full_name in _seen:
        path = " → ".join((*_seen, desc.full_name))
        raise Incompatible(f"message {desc.full_name} holds itself ({path}): a recursive message has no Spark type")
    seen = (*_seen, desc.full_name)
    return StructType([StructField(fd.name, field_type(fd, seen), True) for fd in desc.fields])


def field_type(fd: Any, seen: tuple[str, ...] = ()) -> DataType:
    """The Spark type of one field (repeated → ARRAY, map → MAP)."""
    from pyspark.sql.types import ArrayType, MapType

    if _is_map(fd):
        key, value = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
        return MapType(_value_type(key, seen), _value_type(value, seen), True)
    value_type = _value_type(fd, seen)
    return ArrayType(value_type, True) if _repeated(fd) else value_type


def _value_type(fd: Any, seen: tuple[str, ...]) -> DataType:
    from pyspark.sql.types import StringType, TimestampType

    if fd.type == _ENUM:
        return StringType()
    if fd.type in (_MESSAGE, _GROUP):
        name = fd.message_type.full_name
        if name == _TIMESTAMP:
            return TimestampType()
        if name in _WRAPPERS:
            return _value_type(fd.message_type.fields_by_name["value"], seen)
        return message_type(fd.message_type, seen)
    return _scalars()[fd.type]


def _arrow(t: DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t)


def columns(writer: Any, reader: Any) -> Callable[[list[Any]], pa.StructArray]:
    """The builder of the reader's struct column from parsed writer messages (see the module docstring).

    Raises:
        Incompatible: a field both declare cannot be read as the reader's (named in the text).
    """
    struct = _struct(writer, reader, "")

    def build(messages: list[Any]) -> pa.StructArray:
        out: pa.StructArray = struct(messages, None)
        return out

    return build


def _struct(writer: Any, reader: Any, path: str) -> Builder:
    arrow = _arrow(message_type(reader))
    fields: list[tuple[str, Builder | None, Any, bool]] = []
    for rfd in reader.fields:
        wfd = writer.fields_by_name.get(rfd.name)
        column = None if wfd is None else _field(wfd, rfd, f"{path}{rfd.name}")
        presence = wfd is not None and bool(wfd.has_presence) and not _repeated(wfd)
        fields.append((rfd.name, column, rfd, presence))

    def build(messages: list[Any], mask: np.ndarray | None) -> pa.Array:
        n = len(messages)
        arrays = []
        for (name, column, rfd, presence), af in zip(fields, arrow, strict=True):
            if column is None:
                arrays.append(_default(rfd, af.type, n))
                continue
            values = list(map(attrgetter(name), messages))
            has = np.fromiter((m.HasField(name) for m in messages), bool, n) if presence else None
            arrays.append(column(values, has))
        validity = None if mask is None else pa.array(~mask)
        return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=validity)

    return build


def _default(rfd: Any, at: pa.DataType, n: int) -> pa.Array:
    """A reader field the writer does not declare: its default in every row."""
    if _is_map(rfd) or _repeated(rfd):
        return pa.array([[]] * n, type=at)
    if rfd.has_presence:
        return pa.nulls(n, type=at)
    value = rfd.default_value
    if rfd.type == _ENUM:
        value = rfd.enum_type.values_by_number[value].name if value in rfd.enum_type.values_by_number else str(value)
    return pa.array([value] * n, type=at)


def _where(text: str) -> str:
    return f"field '{text}'"


def _field(wfd: Any, rfd: Any, path: str) -> Builder:
    wt, rt = field_type(wfd), field_type(rfd)
    if _is_map(wfd) != _is_map(rfd) or _repeated(wfd) != _repeated(rfd):
        raise Incompatible(f"{_where(path)}: written as {wt.simpleString()}, read as {rt.simpleString()}")
    at = _arrow(rt)
    if _is_map(wfd):
        wk, wv = (wfd.message_type.fields_by_name[k] for k in ("key", "value"))
        rk, rv = (rfd.message_type.fields_by_name[k] for k in ("key", "value"))
        keys, items = _value(wk, rk, f"{path} key"), _value(wv, rv, f"{path} value")

        def build_map(values: list[Any], mask: np.ndarray | None) -> pa.Array:
            offsets = [0]
            ks: list[Any] = []
            vs: list[Any] = []
            for entries in values:
                for k in sorted(entries):
                    ks.append(k)
                    vs.append(entries[k])
                offsets.append(len(ks))
            return pa.MapArray.from_arrays(
                pa.array(offsets, type=pa.int32()), keys(ks, None), items(vs, _has_all(wv, vs)), type=at
            )

        return build_map
    value = _value(wfd, rfd, path)
    if _repeated(wfd):
        def build_list(values: list[Any], mask: np.ndarray | None) -> pa.Array:
            offsets = np.zeros(len(values) + 1, dtype=np.int32)
            np.cumsum([len(v) for v in values], out=offsets[1:])
            flat = [x for v in values for x in v]
            return pa.ListArray.from_arrays(pa.array(offsets), value(flat, _has_all(wfd, flat)), type=at)

        return build_list
    return value


def _has_all(fd: Any, values: list[Any]) -> np.ndarray | None:
    """Elements of a repeated message field or a map's message values are always set."""
    return np.ones(len(values), dtype=bool) if fd.type in (_MESSAGE, _GROUP) else None


def _value(wfd: Any, rfd: Any, path: str) -> Builder:
    """The builder of one singular value's column (a scalar, an enum, a message)."""
    wt, rt = _value_type(wfd, ()), _value_type(rfd, ())
    at = _arrow(rt)
    if wfd.type in (_MESSAGE, _GROUP) and rfd.type in (_MESSAGE, _GROUP):
        wname, rname = wfd.message_type.full_name, rfd.message_type.full_name
        if wname == _TIMESTAMP and rname == _TIMESTAMP:
            return _timestamps
        if wname in _WRAPPERS and rname in _WRAPPERS:
            inner = _value(wfd.message_type.fields_by_name["value"], rfd.message_type.fields_by_name["value"], path)
            return lambda values, mask: inner([v.value for v in values], mask)
        if wname not in _WRAPPERS | {_TIMESTAMP} and rname not in _WRAPPERS | {_TIMESTAMP}:
            return _struct(wfd.message_type, rfd.message_type, f"{path}.")
    if (wfd.type in (_MESSAGE, _GROUP)) != (rfd.type in (_MESSAGE, _GROUP)) or not _fits(wt, rt):
        raise Incompatible(f"{_where(path)}: written as {wt.simpleString()}, read as {rt.simpleString()}")
    if wfd.type == _ENUM:
        names = {v.number: v.name for v in wfd.enum_type.values}

        def build_enum(values: list[Any], mask: np.ndarray | None) -> pa.Array:
            shown = [names.get(v) or str(v) for v in values]
            return pa.array(shown, type=at, mask=None if mask is None else ~mask)

        return build_enum

    def build_scalar(values: list[Any], mask: np.ndarray | None) -> pa.Array:
        return pa.array(values, type=at, mask=None if mask is None else ~mask)

    return build_scalar


def _fits(wt: DataType, rt: DataType) -> bool:
    return wt == rt or (wt.simpleString(), rt.simpleString()) in _WIDENS


def _timestamps(values: list[Any], mask: np.ndarray | None) -> pa.Array:
    n = len(values)
    seconds = np.fromiter((v.seconds for v in values), np.int64, n)
    nanos = np.fromiter((v.nanos for v in values), np.int64, n)
    bad = (seconds < _MIN_SECONDS) | (seconds > _MAX_SECONDS) | (nanos < 0) | (nanos > 999_999_999)
    if mask is not None:
        bad &= mask
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"a google.protobuf.Timestamp outside 0001-01-01..9999-12-31 (seconds={seconds[k]}, "
                         f"nanos={nanos[k]})")
    micros = seconds * 1_000_000 + nanos // 1_000
    return pa.array(micros, type=pa.timestamp("us", tz="UTC"), mask=None if mask is None else ~mask)
