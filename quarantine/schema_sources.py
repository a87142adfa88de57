"""Writer schemas by id: a folder of ``.avsc`` files, or a registry speaking the Confluent REST API.

The schema-registry wire format is a zero magic byte, the writer schema's id as a 4-byte
big-endian integer, then the encoded message (Protobuf adds message indexes after the id).
The ``avro`` stage (:mod:`quarantine.stages.avro`) reads every schema of a
:class:`FolderSchemas` once, when it is built. :class:`RegistrySchemas` is the client for
a registry, fetching each id once and caching it; no stage uses it yet (no registry can
run where this project is tested, so it is tested against a stub of one endpoint only).

Failures are typed so the stage can quarantine each with its own error class:

* :class:`UnknownSchemaIdError` — the folder has no ``<id>.avsc``, or the registry answers
  404 (error code 40403). Not retriable: the id will not appear by waiting.
* :class:`RegistryUnreachableError` — connection refused, a timeout, or a 5xx answer.
  Retriable: :func:`registry_retry` retries it under the pipeline's ``errors.retry.*``
  policy, and what still fails is quarantined or fails the run per tolerance.

Credentials never reach a message: a URL's ``user:password@`` is cut before it is
shown, and the password given for basic auth is redacted from every error text.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from quarantine.errors import QuarantineError, RetriesExhaustedError
from quarantine.redaction import redact_text
from quarantine.retriable import RetriableClassifier
from quarantine.retry import RetryPolicy, RetryWithToleranceOperator

__all__ = [
    "HEADER_BYTES",
    "MAGIC_BYTE",
    "FolderSchemas",
    "RegistrySchemas",
    "RegistryUnreachableError",
    "SchemaLookupError",
    "SchemaSource",
    "UnknownSchemaIdError",
    "registry_retry",
    "wire_encode",
    "wire_header",
]

#: The first byte of every record in the schema-registry wire format.
MAGIC_BYTE = 0
#: Magic byte plus the 4-byte schema id.
HEADER_BYTES = 5


class SchemaLookupError(QuarantineError):
    """A writer schema could not be had for an id.

    Attributes:
        schema_id: the id asked for.
        error_class: the name the quarantine table records for this failure.
    """

    error_class = "SchemaLookupError"

    def __init__(self, schema_id: int, message: str) -> None:
        self.schema_id = schema_id
        super().__init__(message)


class UnknownSchemaIdError(SchemaLookupError):
    """The source has no schema under this id (not retriable)."""

    error_class = "UnknownSchemaId"


class RegistryUnreachableError(SchemaLookupError):
    """The registry did not answer, or answered with a server error (retriable)."""

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


def _shown_url(url: str) -> str:
    """The URL without ``user:password@``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@dataclass(repr=False)
class RegistrySchemas:
    """Schemas from a registry speaking the Confluent REST API (``GET /schemas/ids/{id}``).

    Each id is fetched at most once per instance (one instance per run); concurrent
    callers of one id wait for the first fetch.

    Attributes:
        url: the registry's base URL (``https://host:8081``; ``user:password@`` allowed).
        user: basic-auth user (overrides the URL's).
        password: basic-auth password (never shown).
        timeout_s: per-request timeout.
        retry: runs each fetch (see :func:`registry_retry`); None fetches once.
        opener: the HTTP call (``urllib.request.urlopen``; injected in tests of the retries).
    """

    url: str
    user: str | None = None
    password: str | None = None
    timeout_s: float = 10.0
    retry: RetryWithToleranceOperator | None = None
    opener: Callable[..., object] = urllib.request.urlopen
    _cache: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    #: how many HTTP requests were made (tests and metrics read it).
    requests: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"schema registry url: expected http(s)://host[:port], found {_shown_url(self.url)!r}")
        if self.user is None and parts.username:
            self.user = urllib.parse.unquote(parts.username)
        if self.password is None and parts.password:
            self.password = urllib.parse.unquote(parts.password)
        self.base = _shown_url(self.url).rstrip("/")

    def __repr__(self) -> str:  # no password, no URL userinfo
        return f"RegistrySchemas({self.base!r}, user={self.user!r})"

    def schema(self, schema_id: int) -> str:
        with self._lock:
            if schema_id not in self._cache:
                def fetch() -> str:
                    return self._fetch(schema_id)

                if self.retry is None:
                    self._cache[schema_id] = fetch()
                else:
                    try:
                        self._cache[schema_id], _ = self.retry.call(fetch, name=f"schema registry: id {schema_id}")
                    except RetriesExhaustedError as exc:
                        cause = exc.__cause__
                        if isinstance(cause, RegistryUnreachableError):
                            gave_up = f"{cause} (gave up after {exc.attempts} attempts)"
                            raise RegistryUnreachableError(schema_id, gave_up) from None
                        if isinstance(cause, SchemaLookupError):
                            raise cause from None
                        raise
            return self._cache[schema_id]

    def _secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password,) if s)

    def _fetch(self, schema_id: int) -> str:
        request = urllib.request.Request(f"{self.base}/schemas/ids/{schema_id}", headers={
            "Accept": "application/vnd.schemaregistry.v1+json, application/json",
        })
        if self.user is not None:
            token = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        self.requests += 1
        where = f"schema id {schema_id} from {self.base}"
        try:
            with self.opener(request, timeout=self.timeout_s) as response:  # type: ignore[attr-defined]
                body = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = redact_text(exc.read().decode("utf-8", "replace")[:300], self._secrets())
            if exc.code == 404:
                raise UnknownSchemaIdError(schema_id, f"{where}: not registered (HTTP 404: {detail})") from None
            if exc.code >= 500 or exc.code == 429:
                raise RegistryUnreachableError(schema_id, f"{where}: HTTP {exc.code} ({detail})") from None
            raise SchemaLookupError(schema_id, f"{where}: HTTP {exc.code} ({detail})") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryUnreachableError(
                schema_id, f"{where}: unreachable ({redact_text(str(reason), self._secrets())})"
            ) from None
        except ValueError as exc:
            raise SchemaLookupError(schema_id, f"{where}: the answer is not JSON ({exc})") from None
        schema = body.get("schema") if isinstance(body, dict) else None
        if not isinstance(schema, str):
            raise SchemaLookupError(schema_id, f"{where}: the answer has no 'schema' string")
        return schema


def registry_retry(policy: RetryPolicy) -> RetryWithToleranceOperator:
    """An operator that retries :class:`RegistryUnreachableError` (only) with ``policy``'s backoff and budget."""
    retriable = RetriableClassifier.of((), lambda exc: isinstance(exc, RegistryUnreachableError), include_delta=False)
    return RetryWithToleranceOperator(replace(policy, retriable=retriable))
