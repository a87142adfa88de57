"""Writer schemas by id: the wire format, the lookup failures, and a folder of ``.avsc`` files.

The schema-registry wire format is a zero magic byte, the writer schema's id as a 4-byte
big-endian integer, then the encoded message (Protobuf adds message indexes after the id).
The ``avro`` stage (:mod:`quarantine.stages.avro`) reads its writer schemas when it is
built: every ``<id>.avsc`` of a :class:`FolderSchemas`, or every version of the subjects
of a :class:`~quarantine.stages.schema_registry.RegistrySource` (``GET /subjects/{subject}/versions``,
then ``GET /subjects/{subject}/versions/{version}`` for each version not read yet), through
:class:`~quarantine.stages.schema_registry.RegistrySchemas`, the HTTP client in
:mod:`quarantine.stages.schema_registry` (basic auth, TLS, each schema id fetched once).

Failures are typed from the HTTP status and the body's ``error_code`` (the API's error
format: ``{"error_code": 40401, "message": "Subject not found"}``), so that the stage and
its callers can tell what waiting mends from what it does not:

* :class:`UnknownSchemaIdError` — the folder has no ``<id>.avsc``, or the registry answers
  404 with error code 40403. Not retriable: the id will not appear by waiting.
* :class:`UnknownSubjectError` (404, 40401), :class:`UnknownVersionError` (404, 40402) —
  not retriable.
* :class:`RegistryAuthError` — 401 or 403: the credentials are wrong or lack the right.
  Not retriable.
* :class:`RegistryUnreachableError` — connection refused, a timeout, 429, or a 5xx answer
  (50001: the backend data store failed). Retriable: :func:`registry_retry` retries it under
  the pipeline's ``errors.retry.*`` policy.
* :class:`SchemaLookupError` itself — any other answer (400, 422 with 42202, a 404 without
  an error code: no Confluent REST API at that URL), an answer that is not what the API
  documents, or a TLS certificate the client does not trust. Not retriable.

Credentials never reach a message: a URL's ``user:password@`` is cut before it is
shown, and the password given for basic auth is redacted from every error text.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from quarantine.errors import QuarantineError

__all__ = [
    "HEADER_BYTES",
    "MAGIC_BYTE",
    "FolderSchemas",
    "RegistryAuthError",
    "RegistryUnreachableError",
    "SchemaLookupError",
    "SchemaSource",
    "UnknownSchemaIdError",
    "UnknownSubjectError",
    "UnknownVersionError",
    "wire_encode",
    "wire_header",
]

#: The first byte of every record in the schema-registry wire format.
MAGIC_BYTE = 0
#: Magic byte plus the 4-byte schema id.
HEADER_BYTES = 5


class SchemaLookupError(QuarantineError):
    """A writer schema (or a subject's list of versions) could not be had.

    Attributes:
        schema_id: the id asked for (None for a subject's versions).
        status: the registry's HTTP status, when it answered.
        error_code: the ``error_code`` of its answer's body, when it had one.
        error_class: the name the quarantine table records for this failure.
    """

    error_class = "SchemaLookupError"

    def __init__(
        self, schema_id: int | None, message: str, *, status: int | None = None, error_code: int | None = None
    ) -> None:
        self.schema_id = schema_id
        self.status = status
        self.error_code = error_code
        super().__init__(message)


class UnknownSchemaIdError(SchemaLookupError):
    """The source has no schema under this id (not retriable)."""

    error_class = "UnknownSchemaId"


class UnknownSubjectError(SchemaLookupError):
    """The registry has no such subject: 404 with error code 40401 (not retriable)."""

    error_class = "UnknownSubject"


class UnknownVersionError(SchemaLookupError):
    """The subject has no such version: 404 with error code 40402 (not retriable)."""

    error_class = "UnknownVersion"


class RegistryAuthError(SchemaLookupError):
    """The registry refused the credentials (401) or their rights (403) (not retriable)."""

    error_class = "RegistryAuth"


class RegistryUnreachableError(SchemaLookupError):
    """The registry did not answer, or answered with a server error or 429 (retriable)."""

    error_class = "RegistryUnreachable"


def wire_header(value: bytes | None) -> tuple[int, int] | None:
    """``(magic byte, schema id)`` of a wire-format value; None when it is shorter than the header."""
    if value is None or len(value) < HEADER_BYTES:
        return None
    magic, schema_id = struct.unpack(">BI", bytes(value[:HEADER_BYTES]))
    return magic, schema_id


def wire_encode(schema_id: int, payload: bytes) -> bytes:
    """A value in the wire format: magic byte, big-endian id, payload (for tests and demos)."""
    return struct.pack(">BI", MAGIC_BYTE, schema_id) + payload


class SchemaSource(Protocol):
    """Where writer schemas come from."""

    def schema(self, schema_id: int) -> str:
        """The writer schema (Avro JSON) registered under ``schema_id``.

        Raises:
            UnknownSchemaIdError: there is none.
            RegistryUnreachableError: the source could not be asked (retriable).
        """
        ...


@dataclass(frozen=True)
class FolderSchemas:
    """Offline schemas: ``<folder>/<id>.avsc``, one file per schema id.

    Attributes:
        folder: the folder (it must exist; the config loader checks this before any read).
    """

    folder: Path

    def ids(self) -> list[int]:
        """The ids the folder holds, in order."""
        return sorted(int(p.stem) for p in self.folder.glob("*.avsc") if p.stem.isdigit())

    def schema(self, schema_id: int) -> str:
        path = self.folder / f"{schema_id}.avsc"
        if not path.is_file():
            known = ", ".join(map(str, self.ids()[:20])) or "none"
            raise UnknownSchemaIdError(
                schema_id, f"schema id {schema_id}: no {path.name} in {self.folder} (ids: {known})"
            )
        text = path.read_text(encoding="utf-8")
        try:
            json.loads(text)
        except ValueError as exc:
            raise UnknownSchemaIdError(schema_id, f"schema id {schema_id}: {path} is not JSON ({exc})") from None
        return text
