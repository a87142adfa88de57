"""Protobuf writer schemas from a schema registry: ``.proto`` text compiled to descriptor sets.

A registry speaking the Confluent REST API serves a Protobuf schema as ``.proto`` text
(``"schemaType": "PROTOBUF"``) with its ``references``: each ``{name, subject, version}``
names an import path and the subject version holding that imported file. The stage reads
descriptor sets, so each version is compiled here, on the driver, when the stage is built
or refreshed: the schema and its references (fetched recursively with ``GET
/subjects/{subject}/versions/{version}``) are written under their reference names into a
temporary folder, and the ``protoc`` that ``grpcio-tools`` bundles compiles them with the
well-known types (``google/protobuf/*.proto``) on its include path, as ``protoc
--include_imports --descriptor_set_out`` does. The schema's own file is named on protoc's
command line, so it is the set's last file (:mod:`quarantine.stages.protobuf.descriptors`).

What leaves the driver is the set's bytes, keyed by schema id like a folder's ``<id>.desc``
files: the executors never see the registry.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib import resources
from pathlib import Path, PurePosixPath

from quarantine.errors import ConfigError
from quarantine.stages.protobuf.descriptors import read_descriptor_set
from quarantine.stages.schema_registry import RegistrySchemas, SubjectVersion

__all__ = ["ProtoCompileError", "compile_version", "protobuf_versions"]

_SHOWN_CHARS = 600
#: A compile that takes longer is taken for a hung protoc (a schema compiles in well under a second).
_TIMEOUT_S = 120


class ProtoCompileError(ValueError):
    """A registered ``.proto`` schema (or a file it imports) does not compile; the message is protoc's."""


def protobuf_versions(
    versions: Iterable[SubjectVersion],
) -> tuple[list[SubjectVersion], list[tuple[SubjectVersion, str]]]:
    """The Protobuf versions of ``versions``, and the others left out with why (``a AVRO schema``)."""
    kept: list[SubjectVersion] = []
    skipped: list[tuple[SubjectVersion, str]] = []
    for v in versions:
        if v.schema_type == "PROTOBUF":
            kept.append(v)
        else:
            skipped.append((v, f"a {v.schema_type} schema, not Protobuf"))
    return kept, skipped


def compile_version(version: SubjectVersion, client: RegistrySchemas) -> bytes:
    """The ``FileDescriptorSet`` of one registered Protobuf version, its schema's file last.

    Args:
        version: a ``PROTOBUF`` version, as :meth:`RegistrySchemas.version` reads it.
        client: reads the versions its references name (each once per call).

    Raises:
        ProtoCompileError: the text or a reference does not compile (protoc's message), or a
            reference's name is not a relative path.
        SchemaLookupError: a reference could not be read from the registry.
    """
    with tempfile.TemporaryDirectory(prefix="quarantine-proto-") as tmp:
        root = Path(tmp)
        _write_references(root, version, client, set())
        own = _own_name(version, root)
        _write(root, own, version.schema)
        out = root / "set.desc"
        include = resources.files("grpc_tools") / "_proto"
        args = [f"-I{root}", f"-I{include}", "--include_imports", f"--descriptor_set_out={out}", str(root / own)]
        code, said = _protoc(args)
        if code != 0 or not out.is_file():
            raise ProtoCompileError(said.replace(f"{root}{os.sep}", "").strip()[:_SHOWN_CHARS] or f"protoc exit {code}")
        try:
            return read_descriptor_set(out, f"{version.subject} v{version.version}")
        except ConfigError as exc:  # a schema file declaring no message
            raise ProtoCompileError(str(exc)) from None


def _write_references(root: Path, version: SubjectVersion, client: RegistrySchemas, seen: set[str]) -> None:
    """Every file ``version`` imports through its references, under their names (depth first)."""
    for ref in version.references:
        if ref.name in seen:
            continue
        seen.add(ref.name)
        imported = client.version(ref.subject, ref.version)
        _write(root, ref.name, imported.schema)
        _write_references(root, imported, client, seen)


def _write(root: Path, name: str, text: str) -> None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ProtoCompileError(f"the reference name {name!r} is not a relative import path")
    target = root.joinpath(*path.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def _own_name(version: SubjectVersion, root: Path) -> str:
    """The schema's own file name: ``<subject>.v<version>.proto``, unless a reference took it."""
    name = re.sub(r"[^\w.-]", "_", f"{version.subject}.v{version.version}") + ".proto"
    while (root / name).exists():
        name = "_" + name
    return name


def _protoc(args: list[str]) -> tuple[int, str]:
    """grpcio-tools' protoc run on ``args`` in a child process (the protobuf extra's; ``from_spec``
    checks it is installed): its exit code and what it wrote to stderr. A child process, so
    that protoc's messages are read without touching this process's own stderr."""
    try:
        done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args], capture_output=True,
                              timeout=_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return -1, f"protoc did not finish in {_TIMEOUT_S} s"
    return done.returncode, (done.stderr or b"").decode("utf-8", "replace")
