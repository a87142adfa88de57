"""Protobuf schemas as the ``protobuf`` stage reads them: descriptor sets, message indexes, lookups.

A schema is a ``FileDescriptorSet`` in its binary form, as ``protoc --include_imports
--descriptor_set_out=order.desc order.proto`` writes it (``grpcio-tools`` bundles a
``protoc``: ``python -m grpc_tools.protoc``): every file the schema needs, its imports
first. The schema's own file is the set's **last** file (protoc writes the files named on
its command line after their imports); its messages are the ones a message index names.

Where the sets come from: a folder of ``<id>.desc`` files, one per schema id, for the
schema-registry wire format (:class:`FolderDescriptors`), or one ``.desc`` file for plain
Protobuf. A registry serves a Protobuf schema as ``.proto`` text: it is compiled to such a
set, keyed by the same schema id, by :mod:`quarantine.stages.protobuf.registry`. Either way
the stage holds the sets' bytes, which are what reaches the executors.

The wire format's message indexes (Confluent's): after the magic byte and the 4-byte
schema id, a count then that many indexes, each a zigzag varint (Kafka's
``ByteUtils.writeVarint``); ``[0]``, the first message of the file, is written as the one
byte ``0x00`` (a count of 0). The first index picks a top-level message of the schema's
file, each further index a message nested in the one before.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quarantine.errors import ConfigError
from quarantine.stages.schema_sources import UnknownSchemaIdError

__all__ = [
    "FolderDescriptors",
    "MessageIndexError",
    "decode_message_indexes",
    "encode_message_indexes",
    "message_at",
    "pool_of",
    "read_descriptor_set",
    "schema_file",
    "top_level_messages",
]

#: More indexes than this in one record's array is not a schema's nesting: the bytes are bad.
_MAX_INDEXES = 64


class MessageIndexError(ValueError):
    """A record's message-index array cannot be read (cut short, a count out of range)."""


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 31)


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= 0xFFFFFFFF
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_message_indexes(indexes: tuple[int, ...] | list[int]) -> bytes:
    """The message-index array as the wire format writes it (``[0]`` → ``b"\\x00"``); pure."""
    if list(indexes) == [0]:
        return b"\x00"
    return _varint(_zigzag(len(indexes))) + b"".join(_varint(_zigzag(i)) for i in indexes)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of at most 5 bytes at ``pos``: ``(value, next position)``."""
    raw = shift = 0
    for k in range(5):
        if pos + k >= len(buf):
            raise MessageIndexError(f"the message-index array is cut short at byte {pos + k}")
        byte = buf[pos + k]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + k + 1
        shift += 7
    raise MessageIndexError(f"the message-index array holds a varint longer than 5 bytes at byte {pos}")


def decode_message_indexes(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """The message indexes starting at ``buf[pos]``, and the position of the message after them.

    Raises:
        MessageIndexError: the array is cut short, or its count is negative or larger than
            :data:`_MAX_INDEXES`.
    """
    count, pos = _read_varint(buf, pos)
    if count == 0:
        return (0,), pos
    if not 0 < count <= _MAX_INDEXES:
        raise MessageIndexError(f"the message-index array's count is {count} (expected 0 to {_MAX_INDEXES})")
    out = []
    for _ in range(count):
        index, pos = _read_varint(buf, pos)
        out.append(index)
    return tuple(out), pos


def read_descriptor_set(path: str | Path, key: str) -> bytes:
    """The bytes of a ``FileDescriptorSet`` file, checked: it parses and its files build a pool.

    Raises:
        ConfigError: naming ``key``: the file cannot be read, is not a descriptor set, or
            holds no file with a message (a ``.proto`` source instead of protoc's output).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(key, str(path), f"a readable FileDescriptorSet (.desc) file ({exc})") from None
    try:
        pool, files = _build_pool(data)
    except Exception as exc:  # DecodeError, TypeError from the pool: both mean not a usable set
        raise ConfigError(
            key, str(path), "a FileDescriptorSet as `protoc --include_imports --descriptor_set_out` writes it "
            f"({type(exc).__name__}: {exc})",
        ) from None
    if not files or not pool.FindFileByName(files[-1]).message_types_by_name:  # a .proto has none
        raise ConfigError(key, str(path), "a FileDescriptorSet whose last file declares at least one message")
    return data


def _build_pool(data: bytes) -> tuple[Any, list[str]]:
    from google.protobuf import descriptor_pb2, descriptor_pool

    fds = descriptor_pb2.FileDescriptorSet.FromString(data)
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    return pool, [f.name for f in fds.file]


@functools.lru_cache(maxsize=64)
def pool_of(data: bytes) -> tuple[Any, str]:
    """A descriptor pool holding the set ``data``, and the name of its last file (cached per process).

    One pool per set: two schema ids may hold different versions of one file.
    """
    pool, files = _build_pool(data)
    return pool, files[-1]


def schema_file(data: bytes) -> Any:
    """The ``FileDescriptor`` of a set's schema file (its last)."""
    pool, name = pool_of(data)
    return pool.FindFileByName(name)


def top_level_messages(data: bytes) -> list[str]:
    """The full names of the messages of a set's schema file, in the order it declares them."""
    return [_full_name(data, (i,)) for i in range(len(_schema_proto(data).message_type))]


@functools.lru_cache(maxsize=64)
def _schema_proto(data: bytes) -> Any:
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FileDescriptorSet.FromString(data).file[-1]


def _full_name(data: bytes, indexes: tuple[int, ...]) -> str:
    proto = _schema_proto(data)
    names = [proto.package] if proto.package else []
    candidates = proto.message_type
    for index in indexes:
        names.append(candidates[index].name)
        candidates = candidates[index].nested_type
    return ".".join(names)


def message_at(data: bytes, indexes: tuple[int, ...]) -> Any | None:
    """The message ``indexes`` name in the set's schema file, or None when there is none.

    The indexes count messages in the order the file declares them (a map field's entry
    message among the nested ones, as protoc and the schema registry's serializers count).
    """
    proto = _schema_proto(data)
    candidates = proto.message_type
    for index in indexes:
        if not 0 <= index < len(candidates):
            return None
        candidates = candidates[index].nested_type
    pool, _ = pool_of(data)
    return pool.FindMessageTypeByName(_full_name(data, indexes))


@dataclass(frozen=True)
class FolderDescriptors:
    """Offline Protobuf schemas: ``<folder>/<id>.desc``, one ``FileDescriptorSet`` per schema id.

    Attributes:
        folder: the folder (the config loader checks that it exists).
    """

    folder: Path

    def ids(self) -> list[int]:
        """The ids the folder holds, in order."""
        return sorted(int(p.stem) for p in self.folder.glob("*.desc") if p.stem.isdigit())

    def descriptor_set(self, schema_id: int, key: str) -> bytes:
        """The set registered under ``schema_id``, checked (:func:`read_descriptor_set`).

        Raises:
            UnknownSchemaIdError: the folder has no ``<id>.desc``.
            ConfigError: naming ``key``: the file is not a usable descriptor set.
        """
        path = self.folder / f"{schema_id}.desc"
        if not path.is_file():
            known = ", ".join(map(str, self.ids()[:20])) or "none"
            raise UnknownSchemaIdError(
                schema_id, f"schema id {schema_id}: no {path.name} in {self.folder} (ids: {known})"
            )
        return read_descriptor_set(path, key)
