"""Protobuf for tests: ``.proto`` text compiled to a descriptor set by a real ``protoc``, and records.

``protoc`` is the one ``grpcio-tools`` bundles (a dev dependency), run in-process with the
well-known types (``google/protobuf/*.proto``) on its include path, exactly as
``python -m grpc_tools.protoc --include_imports --descriptor_set_out`` runs it: the sets
the stage reads in these tests are the sets a user's build writes.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from quarantine.stages.protobuf.descriptors import encode_message_indexes, pool_of
from quarantine.stages.schema_sources import wire_encode

__all__ = ["compile_proto", "framed", "message_class"]


def compile_proto(folder: Path, name: str, source: str) -> Path:
    """Write ``folder/<name>.proto`` and compile it to ``folder/<name>.desc`` (its imports included)."""
    from grpc_tools import protoc

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.proto").write_text(source, encoding="utf-8")
    include = resources.files("grpc_tools") / "_proto"
    out = folder / f"{name}.desc"
    code = protoc.main(["protoc", f"-I{folder}", f"-I{include}", "--include_imports",
                        f"--descriptor_set_out={out}", str(folder / f"{name}.proto")])
    if code != 0:
        raise RuntimeError(f"protoc failed ({code}) on {name}.proto")
    return out


def message_class(desc: Path | bytes, full_name: str) -> Any:
    """The generated class of ``full_name`` in a descriptor set (a file's path or its bytes)."""
    from google.protobuf import message_factory

    data = desc if isinstance(desc, bytes) else desc.read_bytes()
    pool, _ = pool_of(data)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def framed(schema_id: int, payload: bytes, indexes: tuple[int, ...] = (0,)) -> bytes:
    """A value in the wire format: magic byte, schema id, message indexes, then the message."""
    return wire_encode(schema_id, encode_message_indexes(indexes) + payload)
