"""Writer schemas by id (issue 14 groundwork): the folder source, and the registry client's
behaviour over HTTP — caching, basic auth, error kinds, retries, no secret in a message.

The HTTP server here is a stub of the Confluent API's one endpoint the client calls
(``GET /schemas/ids/{id}``), started in-process to test the client's handling of each
answer. It is not a schema registry: issue 14 asks for a real one in the e2e tier.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from quarantine.retry import RetryPolicy
from quarantine.schema_sources import (
    HEADER_BYTES,
    FolderSchemas,
    RegistrySchemas,
    RegistryUnreachableError,
    SchemaLookupError,
    UnknownSchemaIdError,
    registry_retry,
    wire_encode,
    wire_header,
)

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "order_id", "type": "string"}]}
PASSWORD = "s3cr3t-Registry-Pw"


class _Stub(BaseHTTPRequestHandler):
    schemas: ClassVar[dict[int, str]] = {}
    fail_next: ClassVar[list[int]] = []  # HTTP codes to answer before answering normally
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        if type(self).fail_next:
            code = type(self).fail_next.pop(0)
            self._answer(code, {"error_code": code * 100, "message": f"password {PASSWORD} leaked by the server"})
            return
        schema_id = int(self.path.rsplit("/", 1)[-1])
        if schema_id in type(self).schemas:
            self._answer(200, {"schema": type(self).schemas[schema_id]})
        else:
            self._answer(404, {"error_code": 40403, "message": "Schema not found"})

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    _Stub.schemas = {1: json.dumps(ORDER)}
    _Stub.fail_next = []
    _Stub.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _fast_retry(budget_ms: int = 2000) -> Any:
    return registry_retry(RetryPolicy(timeout_ms=budget_ms, initial_backoff_ms=10, max_delay_ms=20, jitter=0.0))


def test_the_wire_header_is_a_zero_byte_and_a_big_endian_id() -> None:
    value = wire_encode(258, b"payload")
    assert value[:HEADER_BYTES] == b"\x00\x00\x00\x01\x02" and wire_header(value) == (0, 258)
    assert wire_header(b"\xff\x00\x00\x00\x07rest") == (255, 7)  # a wrong magic byte is read, not judged
    assert wire_header(b"\x00\x00") is None and wire_header(None) is None and wire_header(b"") is None


def test_a_folder_source_reads_id_dot_avsc_and_names_a_missing_id(tmp_path: Path) -> None:
    (tmp_path / "7.avsc").write_text(json.dumps(ORDER))
    (tmp_path / "12.avsc").write_text("{not json")
    (tmp_path / "notes.txt").write_text("ignored")
    source = FolderSchemas(tmp_path)
    assert source.ids() == [7, 12] and json.loads(source.schema(7)) == ORDER
    with pytest.raises(UnknownSchemaIdError, match=r"schema id 8: no 8\.avsc in .* \(ids: 7, 12\)") as missing:
        source.schema(8)
    assert missing.value.schema_id == 8 and missing.value.error_class == "UnknownSchemaId"
    with pytest.raises(UnknownSchemaIdError, match=r"schema id 12: .*12\.avsc is not JSON"):
        source.schema(12)


def test_the_registry_is_asked_once_per_id_with_basic_auth_from_the_url(stub: str) -> None:
    source = RegistrySchemas(stub.replace("http://", f"http://bob:{PASSWORD}@"))
    assert PASSWORD not in repr(source) and repr(source).startswith("RegistrySchemas('http://127.0.0.1:")
    assert json.loads(source.schema(1)) == ORDER
    assert json.loads(source.schema(1)) == ORDER
    assert source.requests == 1 and [p for p, _ in _Stub.seen] == ["/schemas/ids/1"]
    (_, auth), = _Stub.seen
    assert auth == "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()


def test_an_unknown_id_is_not_retried_and_names_the_id_and_registry(stub: str) -> None:
    source = RegistrySchemas(stub, retry=_fast_retry())
    with pytest.raises(UnknownSchemaIdError, match=r"schema id 99 from http://127\.0\.0\.1:\d+: not registered") as e:
        source.schema(99)
    assert e.value.schema_id == 99 and source.requests == 1


def test_server_errors_are_retried_then_answered(stub: str) -> None:
    _Stub.fail_next = [503, 500]
    source = RegistrySchemas(stub, retry=_fast_retry())
    assert json.loads(source.schema(1)) == ORDER
    assert source.requests == 3


def test_a_registry_that_stays_down_is_unreachable_after_the_budget_with_no_secret_shown(stub: str) -> None:
    _Stub.fail_next = [503] * 1000
    source = RegistrySchemas(stub, user="bob", password=PASSWORD, retry=_fast_retry(200))
    with pytest.raises(RegistryUnreachableError, match=r"HTTP 503 .* \(gave up after \d+ attempts\)") as e:
        source.schema(1)
    assert PASSWORD not in str(e.value) and source.requests >= 2
    assert e.value.error_class == "RegistryUnreachable"


def test_a_closed_port_is_unreachable_and_the_url_password_is_not_shown() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    source = RegistrySchemas(f"http://bob:{PASSWORD}@127.0.0.1:{port}", timeout_s=2)
    where = rf"schema id 1 from http://127\.0\.0\.1:{port}: unreachable"
    with pytest.raises(RegistryUnreachableError, match=where) as e:
        source.schema(1)
    assert PASSWORD not in str(e.value) and "bob" not in str(e.value)


def test_a_client_error_or_an_answer_without_a_schema_is_a_lookup_error(stub: str) -> None:
    _Stub.fail_next = [401]  # its message repeats the password (a server may)
    with pytest.raises(SchemaLookupError, match=r"HTTP 401") as e:
        RegistrySchemas(stub, user="bob", password=PASSWORD).schema(1)
    assert type(e.value) is SchemaLookupError and PASSWORD not in str(e.value)
    _Stub.schemas[2] = 42  # type: ignore[assignment]  # not a string
    with pytest.raises(SchemaLookupError, match=r"no 'schema' string"):
        RegistrySchemas(stub).schema(2)


@pytest.mark.parametrize("url", ["", "ftp://host", "registry:8081", "http://"])
def test_a_bad_registry_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="schema registry url: expected http"):
        RegistrySchemas(url)
