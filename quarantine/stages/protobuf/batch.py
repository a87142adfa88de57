"""The protobuf stage's executor side: one Arrow batch of values in, the stage's call column out.

:class:`DecodeBatch` is what the stage's Arrow UDF runs on the executors. It gets a
whole Arrow batch of the stage's input and the rows to skip, and returns
``STRUCT<result: T, error: ERROR_STRUCT, unknown_fields: ARRAY<STRING>>``:

* a skipped row (an earlier stage failed it) → all NULL: nothing is decoded;
* otherwise exactly one of ``result`` and ``error`` is set (a NULL value with
  ``nullable``: neither);
* ``unknown_fields``: the numbers (``#7``) of the fields the record's top-level
  message holds that its writer schema does not declare, NULL when none.

The records are grouped by writer message: those whose first six bytes are a known
id's header and the indexes ``[0]`` by Arrow (one dictionary encode of the prefix, the
messages sliced there), the rest (NULLs, poison, other indexes) in a Python loop over
their header and message indexes. Each message is parsed by the ``protobuf`` package's
``FromString`` (the upb parser), and each group's messages become the reader's struct
column field by field (:func:`quarantine.stages.protobuf.types.columns`). Nothing a record holds fails the
batch: a record that does not parse is an error of its own, and a group whose column
cannot be built (a Timestamp out of range) is built again one record at a time.

Error classes (:class:`ProtobufErrorClass`), and their messages::

    NullInput                 column 'value' is NULL; expected Protobuf bytes
    BadMagicByte              column 'value' is not in the schema-registry wire format: expected the magic byte
                              0x00 and a 4-byte schema id, found 0x7B226F7264 (34 bytes)
    UnknownSchemaId           schema id 42: no writer schema for it in schemas/ (ids: 1, 2)
    UnknownMessageIndex       schema id 1: message indexes [3] name no message of shop/order.proto
                              (its messages: shop.Order, shop.Refund)
    UndecodableProtobuf       schema id 1: 4 bytes do not decode as the message shop.Order (starting 0xFFFFFFFF)
                              schema id 1: the message-index array is cut short at byte 5
                              schema id 1: the message legacy.Item lacks required fields: id
    IncompatibleReaderSchema  schema id 3: its records (shop.Order) cannot be read as the message shop.Order
                              (field 'amount': written as string, read as double)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from quarantine.schema import result_struct
from quarantine.stages.protobuf.descriptors import (
    MessageIndexError,
    decode_message_indexes,
    message_at,
    pool_of,
    schema_file,
    top_level_messages,
)
from quarantine.stages.protobuf.types import Incompatible, columns
from quarantine.stages.python.arrow_batch import take_rows
from quarantine.stages.schema_sources import HEADER_BYTES

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["UNKNOWN_FIELDS", "DecodeBatch", "ProtobufErrorClass", "call_struct"]

#: The call column's field holding each record's unknown field numbers.
UNKNOWN_FIELDS = "unknown_fields"
_SHOWN_BYTES = 16


class ProtobufErrorClass(StrEnum):
    """The error classes of the ``protobuf`` stage (the ``avro`` stage's names where they apply)."""

    NULL_INPUT = "NullInput"
    BAD_MAGIC_BYTE = "BadMagicByte"
    UNKNOWN_SCHEMA_ID = "UnknownSchemaId"
    UNKNOWN_MESSAGE_INDEX = "UnknownMessageIndex"
    UNDECODABLE = "UndecodableProtobuf"
    INCOMPATIBLE = "IncompatibleReaderSchema"


def call_struct(result: StructType) -> StructType:
    """What the Arrow UDF returns: the result column's fields plus ``unknown_fields ARRAY<STRING>``."""
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType

    out = result_struct(result)
    return StructType([*out.fields, StructField(UNKNOWN_FIELDS, ArrayType(StringType(), True))])


@dataclass(frozen=True)
class _Plan:
    """How the records of one (schema id, message indexes) are read: a parser and a column builder, or why not."""

    parse: Callable[[bytes], Any] | None
    build: Callable[[list[Any]], pa.StructArray] | None
    writer: str
    error: tuple[ProtobufErrorClass, str] | None = None
    #: the writer message holds a proto2 ``required`` field, at any depth: each record is checked for it
    required: bool = False


#: Records by (schema id, message indexes): their rows and their messages (the bytes after the indexes).
_Groups = dict[tuple[int, tuple[int, ...]], tuple[list[int], list[bytes]]]

#: Plans by (writer set, message indexes, reader set, reader message): one per executor process.
_PLANS: dict[tuple[bytes, tuple[int, ...], bytes, str], _Plan] = {}


@dataclass(frozen=True)
class DecodeBatch:
    """The code that runs on the executors, one Arrow batch at a time (see the module docstring).

    Attributes:
        stage: the stage's name (the error's ``stage``).
        kind: the error's ``kind`` (``deserialize``).
        what: the input as messages name it (``column 'value'``).
        wire_format: values carry the schema-registry header and message indexes.
        sets: the writer schemas' descriptor sets by schema id (plain Protobuf: one, id 0).
        reader_set: the descriptor set that declares the reader message.
        reader: the full name of the message records are read as.
        result_type: the reader message's Spark type.
        nullable: a NULL value is a NULL result instead of ``NullInput``.
        source: where the writer schemas came from (for messages).
    """

    stage: str
    kind: str
    what: str
    wire_format: bool
    sets: tuple[tuple[int, bytes], ...]
    reader_set: bytes
    reader: str
    result_type: StructType
    nullable: bool
    source: str

    def run(self, values: pa.Array, skip: pa.Array) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(skip, pa.ChunkedArray):
            skip = skip.combine_chunks()
        n = len(values)
        todo = ~np.asarray(skip.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        errors: dict[int, dict[str, Any]] = {}
        groups: _Groups = {}
        if self.wire_format and n:
            self._frame_by_prefix(values, todo, groups)
        rest = np.flatnonzero(todo)
        key: tuple[int, tuple[int, ...]]
        known = dict(self.sets)
        for pos, b in zip(rest.tolist(), take_rows(values, rest).to_pylist(), strict=True):
            if b is None:
                if not self.nullable:
                    errors[pos] = self._error(ProtobufErrorClass.NULL_INPUT, f"{self.what} is NULL; expected "
                                              "Protobuf bytes")
                continue
            if not self.wire_format:
                key, start = (0, ()), 0
            else:
                if len(b) < HEADER_BYTES or b[0] != 0:
                    errors[pos] = self._bad_magic(b)
                    continue
                sid = int.from_bytes(b[1:HEADER_BYTES], "big")
                if sid not in known:
                    errors[pos] = self._unknown_id(sid)
                    continue
                try:
                    indexes, start = decode_message_indexes(b, HEADER_BYTES)
                except MessageIndexError as exc:
                    errors[pos] = self._error(ProtobufErrorClass.UNDECODABLE, f"schema id {sid}: {exc}")
                    continue
                key = (sid, indexes)
            group = groups.get(key)
            if group is None:
                group = groups[key] = ([], [])
            group[0].append(pos)
            group[1].append(b[start:] if start else b)
        done: list[tuple[np.ndarray, pa.StructArray]] = []
        unknown: dict[int, list[str]] = {}
        for key, (positions, payloads) in groups.items():
            self._decode(key, positions, payloads, errors, unknown, done)
        return self._assemble(n, done, errors, unknown)

    def _frame_by_prefix(self, values: pa.Array, todo: np.ndarray, groups: _Groups) -> None:
        """The common case without a Python step per record: rows whose first six bytes are a
        known id's header and the indexes ``[0]`` are grouped by Arrow (their messages sliced
        there too) and taken off ``todo``; the other rows are left to the loop."""
        import pyarrow.compute as pc

        known = dict(self.sets)
        encoded = pc.binary_slice(values, 0, HEADER_BYTES + 1).dictionary_encode()
        codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        messages: pa.Array | None = None
        for code, prefix in enumerate(encoded.dictionary.to_pylist()):
            if len(prefix) != HEADER_BYTES + 1 or prefix[0] != 0 or prefix[HEADER_BYTES] != 0:
                continue
            sid = int.from_bytes(prefix[1:HEADER_BYTES], "big")
            if sid not in known:
                continue
            rows = np.flatnonzero((codes == code) & todo)
            if not len(rows):
                continue
            if messages is None:
                # to the end (an explicit stop: pyarrow 25's stop=None fails on values shorter than start)
                messages = pc.binary_slice(values, HEADER_BYTES + 1, 2**31 - 1)
            groups[(sid, (0,))] = (rows.tolist(), take_rows(messages, rows).to_pylist())
            todo[rows] = False

    # ------------------------------------------------------------------ one writer message

    def _decode(
        self,
        key: tuple[int, tuple[int, ...]],
        positions: list[int],
        payloads: list[bytes],
        errors: dict[int, dict[str, Any]],
        unknown: dict[int, list[str]],
        done: list[tuple[np.ndarray, pa.StructArray]],
    ) -> None:
        from google.protobuf.message import DecodeError
        from google.protobuf.unknown_fields import UnknownFieldSet

        plan = self._plan(*key)
        if plan.error is not None or plan.parse is None or plan.build is None:
            error_class, text = plan.error or (ProtobufErrorClass.UNDECODABLE, "no parser")
            for pos in positions:
                errors[pos] = self._error(error_class, text)
            return
        parse = plan.parse
        messages: list[Any] = []
        ok: list[int] = []
        for pos, payload in zip(positions, payloads, strict=True):
            try:
                message = parse(payload)
            except (DecodeError, RuntimeError, ValueError):
                errors[pos] = self._undecodable(key[0], payload, plan.writer)
                continue
            if plan.required and not message.IsInitialized():
                missing = ", ".join(message.FindInitializationErrors()[:10])
                errors[pos] = self._error(
                    ProtobufErrorClass.UNDECODABLE,
                    f"{self._id_text(key[0])}: the message {plan.writer} lacks required fields: {missing}",
                )
                continue
            messages.append(message)
            ok.append(pos)
            extra = UnknownFieldSet(message)
            if len(extra):
                unknown[pos] = [f"#{num}" for num in sorted({f.field_number for f in extra})]
        if not messages:
            return
        try:
            done.append((np.asarray(ok, dtype=np.int64), plan.build(messages)))
            return
        except Exception:  # a value the reader's type cannot hold: find its records, one at a time
            pass
        for pos, message in zip(ok, messages, strict=True):
            try:
                done.append((np.asarray([pos], dtype=np.int64), plan.build([message])))
            except Exception as exc:
                unknown.pop(pos, None)
                errors[pos] = self._error(
                    ProtobufErrorClass.UNDECODABLE,
                    f"{self._id_text(key[0])}: the message {plan.writer} decodes, but a value does not fit "
                    f"its Spark type ({type(exc).__name__}: {exc})",
                )

    def _plan(self, sid: int, indexes: tuple[int, ...]) -> _Plan:
        writer_set = dict(self.sets)[sid]
        cache_key = (writer_set, indexes, self.reader_set, self.reader)
        plan = _PLANS.get(cache_key)
        if plan is None:
            plan = _PLANS[cache_key] = self._new_plan(sid, writer_set, indexes)
        return plan

    def _new_plan(self, sid: int, writer_set: bytes, indexes: tuple[int, ...]) -> _Plan:
        from google.protobuf import message_factory

        id_text = self._id_text(sid)
        # plain Protobuf: the one set holds the reader message, which every record is
        writer = message_at(writer_set, indexes) if self.wire_format else _find(writer_set, self.reader)
        if writer is None:
            file = schema_file(writer_set)
            names = ", ".join(top_level_messages(writer_set)[:20])
            text = (f"{id_text}: message indexes {list(indexes)} name no message of {file.name} "
                    f"(its messages: {names})")
            return _Plan(None, None, "", (ProtobufErrorClass.UNKNOWN_MESSAGE_INDEX, text))
        reader = _find(self.reader_set, self.reader)
        try:
            if writer.full_name != self.reader:  # another message of the topic: not a version of this one
                raise Incompatible("another message")
            build = columns(writer, reader)
        except Incompatible as exc:
            text = f"{id_text}: its records ({writer.full_name}) cannot be read as the message {self.reader} ({exc})"
            return _Plan(None, None, writer.full_name, (ProtobufErrorClass.INCOMPATIBLE, text))
        parse = message_factory.GetMessageClass(writer).FromString
        return _Plan(parse, build, writer.full_name, required=_has_required(writer, ()))

    # ------------------------------------------------------------------ errors

    def _id_text(self, sid: int) -> str:
        return f"schema id {sid}" if self.wire_format else "plain Protobuf"

    def _error(self, error_class: ProtobufErrorClass, message: str) -> dict[str, Any]:
        return {"stage": self.stage, "kind": self.kind, "error_class": error_class.value, "message": message,
                "stacktrace": None, "retriable": False, "attempts": 1}

    def _bad_magic(self, b: bytes) -> dict[str, Any]:
        return self._error(
            ProtobufErrorClass.BAD_MAGIC_BYTE,
            f"{self.what} is not in the schema-registry wire format: expected the magic byte 0x00 and a 4-byte "
            f"schema id, found 0x{b[:HEADER_BYTES].hex().upper()} ({len(b)} bytes)",
        )

    def _unknown_id(self, sid: int) -> dict[str, Any]:
        ids = ", ".join(str(s) for s, _ in self.sets[:20])
        return self._error(ProtobufErrorClass.UNKNOWN_SCHEMA_ID,
                           f"schema id {sid}: no writer schema for it in {self.source} (ids: {ids})")

    def _undecodable(self, sid: int, payload: bytes, writer: str) -> dict[str, Any]:
        return self._error(
            ProtobufErrorClass.UNDECODABLE,
            f"{self._id_text(sid)}: {len(payload)} bytes do not decode as the message {writer} "
            f"(starting 0x{payload[:_SHOWN_BYTES].hex().upper()})",
        )

    # ------------------------------------------------------------------ the column

    def _assemble(
        self,
        n: int,
        done: list[tuple[np.ndarray, pa.StructArray]],
        errors: dict[int, dict[str, Any]],
        unknown: dict[int, list[str]],
    ) -> pa.Array:
        from pyspark.sql.pandas.types import to_arrow_type

        out_type = to_arrow_type(call_struct(self.result_type))
        result_type, error_type, unknown_type = (f.type for f in out_type)
        if not done:
            result = pa.nulls(n, type=result_type)
        elif len(done) == 1 and len(done[0][0]) == n:  # every row decoded, in order: no scatter
            result = done[0][1]
        else:
            positions = np.concatenate([p for p, _ in done])
            decoded = pa.concat_arrays([a for _, a in done])
            result = decoded.take(_scatter(n, positions))
        if errors:
            at = sorted(errors)
            error = pa.array([errors[p] for p in at], type=error_type).take(_scatter(n, np.asarray(at)))
        else:
            error = pa.nulls(n, type=error_type)
        if unknown:
            at = sorted(unknown)
            extra = pa.array([unknown[p] for p in at], type=unknown_type).take(_scatter(n, np.asarray(at)))
        else:
            extra = pa.nulls(n, type=unknown_type)
        return pa.StructArray.from_arrays([result, error, extra], fields=list(out_type))


def _find(data: bytes, full_name: str) -> Any | None:
    pool, _ = pool_of(data)
    try:
        return pool.FindMessageTypeByName(full_name)
    except KeyError:
        return None


def _has_required(desc: Any, seen: tuple[str, ...]) -> bool:
    """Whether a message holds a proto2 ``required`` field, itself or in a message field (upb's parser
    does not check them: ``IsInitialized`` does)."""
    if desc.full_name in seen:
        return False
    for fd in desc.fields:
        if fd.label == fd.LABEL_REQUIRED:
            return True
        if fd.message_type is not None and _has_required(fd.message_type, (*seen, desc.full_name)):
            return True
    return False


def _scatter(n: int, positions: np.ndarray) -> pa.Array:
    """An index array of length ``n``: row ``positions[j]`` takes ``j``, other rows null."""
    idx = np.full(n, -1, dtype=np.int64)
    idx[positions] = np.arange(len(positions), dtype=np.int64)
    return pa.array(idx, mask=idx < 0)

