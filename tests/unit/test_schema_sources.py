"""Writer schemas by id: the folder source, and the registry client over HTTP — caching,
basic auth, TLS, listing a subject's versions, each documented error code typed, retries,
no secret in a message.

The server is :class:`tests.support.registry.RegistryStandIn`, a stand-in for the
Confluent Schema Registry REST API (the three GET endpoints the client calls, answered as
the API's reference documents them, failures included). It is not a registry.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quarantine.errorhandling.retry import RetryPolicy
from quarantine.stages.schema_registry import (
    RegistrySchemas,
    RegistrySource,
    SubjectVersion,
    avro_writers,
    registry_retry,
)
from quarantine.stages.schema_sources import (
    HEADER_BYTES,
    FolderSchemas,
    RegistryAuthError,
    RegistryUnreachableError,
    SchemaLookupError,
    UnknownSchemaIdError,
    UnknownSubjectError,
    UnknownVersionError,
    wire_encode,
    wire_header,
)
from tests.support.registry import Failure, RegistryStandIn, registry_stand_in

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "order_id", "type": "string"}]}
ORDER_V2 = {"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "note", "type": ["null", "string"], "default": None}]}
PASSWORD = "s3cr3t-Registry-Pw"


@pytest.fixture
def stand_in() -> Iterator[RegistryStandIn]:
    with registry_stand_in() as s:
        s.register("orders-value", ORDER)
        yield s


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


# ------------------------------------------------------------------ answers

def test_the_registry_is_asked_once_per_id_with_basic_auth_from_the_url(stand_in: RegistryStandIn) -> None:
    stand_in.users = {"bob": PASSWORD}
    source = RegistrySchemas(stand_in.url.replace("http://", f"http://bob:{PASSWORD}@"))
    assert PASSWORD not in repr(source) and repr(source).startswith("RegistrySchemas('http://127.0.0.1:")
    assert json.loads(source.schema(1)) == ORDER
    assert json.loads(source.schema(1)) == ORDER
    assert source.requests == 1 and [r.path for r in stand_in.requests] == ["/schemas/ids/1"]
    (request,) = stand_in.requests
    assert request.authorization == "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()


def test_a_subjects_versions_are_listed_then_each_read_once(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-value", ORDER_V2)
    stand_in.register("payments-value", ORDER)  # the same schema under another subject: the same id
    client = RegistrySchemas(stand_in.url)
    assert client.versions("orders-value") == [1, 2]
    v2 = client.version("orders-value", 2)
    assert (v2.subject, v2.version, v2.schema_id, v2.schema_type) == ("orders-value", 2, 2, "AVRO")
    assert json.loads(v2.schema) == ORDER_V2 and client.version("payments-value", "latest").schema_id == 1

    source = RegistrySource(stand_in.url, ("orders-value", "payments-value"))
    stand_in.requests.clear()
    found = source.list(known={("orders-value", 1)})
    assert [(v.subject, v.version, v.schema_id) for v in found] == [("orders-value", 2, 2), ("payments-value", 1, 1)]
    assert [r.path for r in stand_in.requests] == [
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/2",
        "/subjects/payments-value/versions", "/subjects/payments-value/versions/1",
    ]


def test_a_subject_name_is_one_path_segment(stand_in: RegistryStandIn) -> None:
    stand_in.register("shop/orders value:v", ORDER)
    assert RegistrySchemas(stand_in.url).versions("shop/orders value:v") == [1]
    assert stand_in.requests[-1].path == "/subjects/shop%2Forders%20value%3Av/versions"


def test_versions_that_are_not_plain_avro_are_left_out_saying_why(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-value", ORDER_V2, references=[{"name": "shop.Money", "subject": "money", "version": 1}])
    stand_in.register("orders-value", 'syntax = "proto3"; message Order {}', schema_type="PROTOBUF")
    writers, skipped = avro_writers(RegistrySource(stand_in.url, ("orders-value",)).list())
    assert list(writers) == [1]
    assert [(v.version, why) for v, why in skipped] == [
        (2, "it references other schemas (money v1), which is not supported"),
        (3, "a PROTOBUF schema, not Avro"),
    ]


def test_a_version_deleted_between_the_list_and_the_read_is_left_out(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-value", ORDER_V2)
    original = stand_in.answer

    def deleting(path: str, auth: str | None) -> Any:  # the version goes once the list is answered
        out = original(path, auth)
        if path.endswith("/versions"):
            stand_in.delete_version("orders-value", 2)
        return out

    stand_in.answer = deleting  # type: ignore[method-assign]
    assert [v.version for v in RegistrySource(stand_in.url, ("orders-value",)).list()] == [1]


# ------------------------------------------------------------------ each documented error code

def test_40403_schema_not_found_is_an_unknown_id_not_retried(stand_in: RegistryStandIn) -> None:
    client = RegistrySchemas(stand_in.url, retry=_fast_retry())
    with pytest.raises(UnknownSchemaIdError) as e:
        client.schema(99)
    assert str(e.value) == (
        f"schema id 99 from {stand_in.url}: not registered (HTTP 404, error code 40403: Schema 99 not found)"
    )
    assert (e.value.schema_id, e.value.status, e.value.error_code, client.requests) == (99, 404, 40403, 1)


def test_40401_subject_not_found_names_the_subject(stand_in: RegistryStandIn) -> None:
    client = RegistrySchemas(stand_in.url, retry=_fast_retry())
    with pytest.raises(UnknownSubjectError, match=r"the versions of subject 'order-value' from .*: HTTP 404, "
                       r"error code 40401: Subject 'order-value' not found\.") as e:
        client.versions("order-value")
    assert e.value.error_code == 40401 and client.requests == 1
    with pytest.raises(UnknownSubjectError):
        client.version("order-value", 1)


def test_40402_version_not_found(stand_in: RegistryStandIn) -> None:
    with pytest.raises(UnknownVersionError, match=r"version 7 of subject 'orders-value' .* error code 40402: "
                       r"Version 7 not found\.") as e:
        RegistrySchemas(stand_in.url).version("orders-value", 7)
    assert (e.value.status, e.value.error_code) == (404, 40402)


def test_42202_an_invalid_version_is_a_lookup_error_not_retried(stand_in: RegistryStandIn) -> None:
    client = RegistrySchemas(stand_in.url, retry=_fast_retry())
    with pytest.raises(SchemaLookupError, match=r"HTTP 422, error code 42202: The specified version '0' is not a "
                       r"valid version id") as e:
        client.version("orders-value", 0)
    assert type(e.value) is SchemaLookupError and e.value.error_code == 42202 and client.requests == 1


def test_50001_a_backend_store_failure_is_retried_then_answered(stand_in: RegistryStandIn) -> None:
    stand_in.fail_next = [Failure(500, 50001, "Error in the backend data store")] * 2
    client = RegistrySchemas(stand_in.url, retry=_fast_retry())
    assert client.versions("orders-value") == [1] and client.requests == 3


def test_50001_that_stays_is_unreachable_after_the_budget_with_no_secret_shown(stand_in: RegistryStandIn) -> None:
    stand_in.users = {"bob": PASSWORD}
    stand_in.fail_next = [Failure(500, 50001, f"store down; password {PASSWORD} leaked by the server")] * 1000
    client = RegistrySchemas(stand_in.url, user="bob", password=PASSWORD, retry=_fast_retry(200))
    gave_up = r"HTTP 500, error code 50001: .* \(gave up after \d+ attempts\)"
    with pytest.raises(RegistryUnreachableError, match=gave_up) as e:
        client.schema(1)
    assert PASSWORD not in str(e.value) and client.requests >= 2
    assert e.value.error_class == "RegistryUnreachable" and e.value.error_code == 50001


def test_401_unauthorized_is_an_auth_error_not_retried(stand_in: RegistryStandIn) -> None:
    stand_in.users = {"bob": PASSWORD}
    client = RegistrySchemas(stand_in.url, user="bob", password="wrong-" + PASSWORD, retry=_fast_retry())
    with pytest.raises(RegistryAuthError, match=r"HTTP 401, error code 401: Unauthorized \(check the user and "
                       r"password: the registry did not accept them\)") as e:
        client.versions("orders-value")
    assert e.value.status == 401 and client.requests == 1 and PASSWORD not in str(e.value)
    with pytest.raises(RegistryAuthError):
        RegistrySchemas(stand_in.url).schema(1)  # no credentials at all


def test_403_forbidden_is_an_auth_error_naming_the_right(stand_in: RegistryStandIn) -> None:
    stand_in.register("payments-value", ORDER_V2)
    stand_in.users, stand_in.readable = {"bob": PASSWORD}, {"bob": {"orders-value"}}
    client = RegistrySchemas(stand_in.url, user="bob", password=PASSWORD)
    assert client.versions("orders-value") == [1]
    with pytest.raises(RegistryAuthError, match=r"HTTP 403, error code 403: Forbidden \(.*lack the right"):
        client.versions("payments-value")


def test_429_rate_limited_without_a_body_is_retried(stand_in: RegistryStandIn) -> None:
    stand_in.fail_next = [Failure(429)]
    client = RegistrySchemas(stand_in.url, retry=_fast_retry())
    assert client.versions("orders-value") == [1] and client.requests == 2
    stand_in.fail_next = [Failure(429)]
    with pytest.raises(RegistryUnreachableError, match=r"HTTP 429$"):
        RegistrySchemas(stand_in.url).versions("orders-value")


def test_a_404_without_an_error_code_asks_whether_the_url_is_the_api(stand_in: RegistryStandIn) -> None:
    with pytest.raises(SchemaLookupError, match=r"HTTP 404, error code 404: HTTP 404 Not Found \(is this the base "
                       r"URL of a Confluent REST API\?\)") as e:
        RegistrySchemas(stand_in.url + "/not-the-api").versions("orders-value")
    assert type(e.value) is SchemaLookupError


# ------------------------------------------------------------------ slow, closed, untrusted

def test_a_slow_answer_is_unreachable_after_the_timeout_then_retried(stand_in: RegistryStandIn) -> None:
    stand_in.delay_s = 1.5
    started = time.monotonic()
    with pytest.raises(RegistryUnreachableError, match=r"unreachable \(no answer within 0\.3 s\)"):
        RegistrySchemas(stand_in.url, timeout_s=0.3).versions("orders-value")
    assert time.monotonic() - started < 1.4
    stand_in.delay_s = 0.0
    assert RegistrySchemas(stand_in.url, timeout_s=0.3).versions("orders-value") == [1]


def test_a_closed_port_is_unreachable_and_the_url_password_is_not_shown() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    source = RegistrySchemas(f"http://bob:{PASSWORD}@127.0.0.1:{port}", timeout_s=2)
    where = rf"schema id 1 from http://127\.0\.0\.1:{port}: unreachable"
    with pytest.raises(RegistryUnreachableError, match=where) as e:
        source.schema(1)
    assert PASSWORD not in str(e.value) and "bob" not in str(e.value)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost`` (its own CA) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "registry.pem", tmp_path / "registry-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_file, key_file


def test_https_with_the_registrys_ca_file_and_an_untrusted_certificate_is_not_retried(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert_file, key_file)
    with registry_stand_in(tls=tls) as s:
        s.register("orders-value", ORDER)
        assert s.url.startswith("https://localhost:")
        assert RegistrySource(s.url, ("orders-value",), ca_file=str(cert_file)).list()[0] == SubjectVersion(
            "orders-value", 1, 1, json.dumps(ORDER))
        untrusted = RegistrySchemas(s.url, retry=_fast_retry())
        with pytest.raises(SchemaLookupError, match=r"TLS certificate is not trusted .*give the certificate "
                           r"authority's PEM file as ca_file") as e:
            untrusted.versions("orders-value")
        assert type(e.value) is SchemaLookupError and untrusted.requests == 1


# ------------------------------------------------------------------ odd answers, bad URLs

def test_an_answer_without_what_the_api_documents_is_a_lookup_error(stand_in: RegistryStandIn) -> None:
    stand_in.register("broken", ORDER)
    stand_in._by_id[2] = stand_in._by_id[1].__class__(2, 42, "AVRO", ())  # type: ignore[arg-type]
    with pytest.raises(SchemaLookupError, match=r"no 'schema' string"):
        RegistrySchemas(stand_in.url).schema(2)


@pytest.mark.parametrize("url", ["", "ftp://host", "registry:8081", "http://", "http://host:port"])
def test_a_bad_registry_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="schema registry url: expected http"):
        RegistrySchemas(url)
    with pytest.raises(ValueError, match="schema registry url: expected http"):
        RegistrySource(url, ("s",))


def test_a_registry_source_shows_no_password_and_pickles() -> None:
    import pickle

    source = RegistrySource("https://bob:pw@registry:8081/", ("a", "b"), user="bob", password=PASSWORD)
    assert source.describe() == "subjects a, b at https://registry:8081"
    assert PASSWORD not in repr(source) and "pw" not in repr(source)
    assert pickle.loads(pickle.dumps(source)) == source
