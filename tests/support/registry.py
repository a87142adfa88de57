"""A stand-in for the Confluent Schema Registry REST API: an in-process HTTP server for tests.

It is not a schema registry. No registry product runs where these tests run, so this
server answers the requests the client (:class:`quarantine.stages.schema_registry.RegistrySchemas`)
makes, the way the API's reference documents them (Confluent's "Schema Registry API
Reference", and its OpenAPI spec: ``getSchema``, ``listVersions``, ``getSchemaByVersion``),
including their failures. It has no storage, no compatibility checks, no contexts, no modes
and no POST endpoints: a test registers a schema by calling :meth:`RegistryStandIn.register`.

What it answers (every body JSON, ``Content-Type: application/vnd.schemaregistry.v1+json``;
every error body ``{"error_code": <int>, "message": <text>}``)::

    GET /schemas/ids/{id}                       200 {"schema": …} (+ "schemaType" unless AVRO, "references")
                                                404 error_code 40403: schema not found
    GET /subjects/{subject}/versions            200 [1, 2, …]
                                                404 error_code 40401: subject not found
    GET /subjects/{subject}/versions/{version}  200 {"subject", "version", "id", "schema"} (+ as above)
                                                404 error_code 40401: subject not found
                                                404 error_code 40402: version not found
                                                422 error_code 42202: invalid version (not 1..2^31-1
                                                    or "latest")
    any path, basic auth configured             401 error_code 401 "Unauthorized" (no or wrong credentials)
    a subject the user may not read             403 error_code 403 "Forbidden"
    any other path                              404 error_code 404 "HTTP 404 Not Found"

A ``references`` item is ``{"name", "subject", "version"}``: the name the schema imports it by
(a ``.proto`` import path) and the subject version holding it. The shapes follow the API
reference; ``schemaType`` is left out for AVRO, as a Confluent registry leaves it out.

and, injected by a test (:attr:`RegistryStandIn.fail_next`, :attr:`RegistryStandIn.delay_s`):
500 with error code 50001 (the backend data store failed), 429 with ``Retry-After`` and no
body (rate limit), any other status, and slow answers. Served over TLS when given an
``ssl.SSLContext``.

Ids are global, as in the API: the same schema registered under two subjects has one id.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Failure", "RegistryStandIn", "Request", "registry_stand_in"]

#: the content type of every answer (the API's v1 media type)
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: the largest version number the API takes (2^31 - 1)
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class Failure:
    """An answer to give instead of the normal one: ``status`` and, with a body, its ``error_code``.

    A 429 has no body and a ``Retry-After`` header, as the API's reference documents it.
    """

    status: int
    error_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class Request:
    """A request the stand-in received: its path and its Authorization header."""

    path: str
    authorization: str | None


@dataclass
class _Version:
    schema_id: int
    schema: str
    schema_type: str
    references: tuple[dict[str, Any], ...]


@dataclass
class RegistryStandIn:
    """The stand-in's state, and its server once :meth:`start` ran.

    Attributes:
        users: basic-auth users and their passwords; empty: no authentication.
        readable: per user, the subjects it may read (others answer 403); None: all.
        fail_next: answers given, in order, before answering normally again.
        delay_s: how long each answer waits before it is sent (a slow registry).
        tls: serve https with this context.
        requests: every request received, in order.
    """

    users: dict[str, str] = field(default_factory=dict)
    readable: dict[str, set[str]] | None = None
    fail_next: list[Failure] = field(default_factory=list)
    delay_s: float = 0.0
    tls: ssl.SSLContext | None = None
    requests: list[Request] = field(default_factory=list)
    _subjects: dict[str, list[_Version | None]] = field(default_factory=dict)  # None: deleted
    _ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (type, canonical schema) → id
    _by_id: dict[int, _Version] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ what a test does

    def register(
        self,
        subject: str,
        schema: str | dict[str, Any],
        *,
        schema_type: str = "AVRO",
        references: Sequence[dict[str, Any]] = (),
    ) -> int:
        """Register ``schema`` under ``subject``; its id.

        A new version of the subject, unless the subject holds the schema already (then its
        id, and no new version). The same schema (canonical JSON) has the same id under every
        subject, as the API documents.
        """
        text = schema if isinstance(schema, str) else json.dumps(schema)
        try:
            canonical = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            canonical = text  # a Protobuf schema is not JSON
        with self._lock:
            key = (schema_type, canonical)
            sid = self._ids.get(key)
            if sid is None:
                sid = len(self._ids) + 1
                self._ids[key] = sid
                self._by_id[sid] = _Version(sid, text, schema_type, tuple(references))
            versions = self._subjects.setdefault(subject, [])
            if all(v is None or v.schema_id != sid for v in versions):  # registered already: no new version
                versions.append(_Version(sid, text, schema_type, tuple(references)))
            return sid

    def delete_version(self, subject: str, version: int) -> None:
        """Delete one version (its schema id stays readable by id, as the API's soft delete keeps it)."""
        with self._lock:
            versions = self._subjects[subject]
            versions[version - 1] = None

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``, ``https://localhost:<port>`` with TLS)."""
        assert self._server is not None, "start() the stand-in first"
        port = self._server.server_address[1]
        return f"https://localhost:{port}" if self.tls is not None else f"http://127.0.0.1:{port}"

    def start(self) -> RegistryStandIn:
        """Serve on a free loopback port, in a daemon thread."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), name="registry-stand-in", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ------------------------------------------------------------------ the API

    def answer(self, path: str, authorization: str | None) -> tuple[int, Any, dict[str, str]]:
        """``(status, body or None, extra headers)`` for ``GET path`` (the server's one decision)."""
        with self._lock:
            self.requests.append(Request(path, authorization))
            if self.fail_next:
                failure = self.fail_next.pop(0)
                if failure.status == 429:
                    return 429, None, {"Retry-After": "1"}
                return failure.status, _error(failure.error_code or failure.status, failure.message or "Failure"), {}
            user = self._user(authorization)
            if self.users and user is None:
                return 401, _error(401, "Unauthorized"), {}
            parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(path).path.strip("/").split("/")]
            if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
                return self._schema(int(parts[2]))
            if len(parts) in (3, 4) and parts[0] == "subjects" and parts[2] == "versions":
                subject = parts[1]
                if user is not None and self.readable is not None and subject not in self.readable.get(user, set()):
                    return 403, _error(403, "Forbidden"), {}
                return self._versions(subject) if len(parts) == 3 else self._version(subject, parts[3])
            return 404, _error(404, "HTTP 404 Not Found"), {}

    def _user(self, authorization: str | None) -> str | None:
        if not authorization or not authorization.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        except ValueError:
            return None
        return user if self.users.get(user) == password else None

    def _schema(self, sid: int) -> tuple[int, Any, dict[str, str]]:
        found = self._by_id.get(sid)
        if found is None:
            return 404, _error(40403, f"Schema {sid} not found"), {}
        return 200, {"schema": found.schema, **_extras(found)}, {}

    def _versions(self, subject: str) -> tuple[int, Any, dict[str, str]]:
        versions = self._subjects.get(subject)
        if not versions or all(v is None for v in versions):
            return 404, _error(40401, f"Subject '{subject}' not found."), {}
        return 200, [i + 1 for i, v in enumerate(versions) if v is not None], {}

    def _version(self, subject: str, version: str) -> tuple[int, Any, dict[str, str]]:
        if version != "latest" and not (version.isdigit() and 1 <= int(version) <= MAX_VERSION):
            return 422, _error(
                42202,
                f"The specified version '{version}' is not a valid version id. Allowed values are between "
                "[1, 2^31-1] and the string \"latest\"",
            ), {}
        versions = self._subjects.get(subject)
        if not versions or all(v is None for v in versions):
            return 404, _error(40401, f"Subject '{subject}' not found."), {}
        found: _Version | None
        if version == "latest":
            number, found = [(i + 1, v) for i, v in enumerate(versions) if v is not None][-1]
        else:
            number = int(version)
            found = versions[number - 1] if number <= len(versions) else None
        if found is None:
            return 404, _error(40402, f"Version {version} not found."), {}
        return 200, {
            "subject": subject, "version": number, "id": found.schema_id, "schema": found.schema, **_extras(found),
        }, {}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "message": message}


def _extras(v: _Version) -> dict[str, Any]:
    """The fields the API leaves out for a plain Avro schema: ``schemaType`` and ``references``."""
    out: dict[str, Any] = {}
    if v.schema_type != "AVRO":
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = list(v.references)
    return out


def _handler(stand_in: RegistryStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            status, body, headers = stand_in.answer(self.path, self.headers.get("Authorization"))
            if stand_in.delay_s:
                time.sleep(stand_in.delay_s)
            data = b"" if body is None else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def registry_stand_in(**kwargs: Any) -> Iterator[RegistryStandIn]:
    """A started :class:`RegistryStandIn` (keyword arguments: its attributes), stopped at the end."""
    stand_in = RegistryStandIn(**kwargs).start()
    try:
        yield stand_in
    finally:
        stand_in.stop()
