"""Personal data in quarantine, without Spark: the encryption keys, what an encrypted value shows, ``forget``'s words.

The Spark side (the table's files, replay, rotation, ``forget --purge``) is
``tests/integration/test_personal_data.py`` and ``tests/integration/test_forget.py``; here are
the parts that run in Python: the config keys (a key written where its reference belongs is
refused and never echoed), the key ring (a key read from where it is kept, its size checked), the
AES-GCM layout Spark writes opened in Python, and what the read-only commands print with and
without the key.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from quarantine.config import parse_config
from quarantine.errors import ConfigError
from quarantine.keyring import KeyRing, Sealed, sealed_text_key
from quarantine.listeners.error_log import ErrorContextLogger
from quarantine.ops.forget import Forgotten, Purge, parse_key
from quarantine.ops.triage_output import print_sql, record_json
from quarantine.secret_reference import ReferenceKind, SecretReference
from quarantine.secret_refs import MappingScopes, resolved_secrets
from quarantine.sinks.quarantine import QuarantineWriter
from quarantine.sql import get_query
from tests.helpers import orders_config

KEY_1 = "0123456789abcdef0123456789abcdef"  # 32 bytes: AES-256
KEY_2 = "fedcba9876543210"  # 16 bytes: AES-128
SECRET_TEXT = "alice.zorblax@example.com"


def _seal(key: str, data: bytes) -> bytes:
    """What Spark's ``aes_encrypt(data, key, 'GCM', 'DEFAULT', iv)`` returns, with the writer's IV
    (the first 12 bytes of SHA-256 over the key and the data): IV, ciphertext, tag."""
    iv = hashlib.sha256(key.encode() + data).digest()[:12]
    return iv + AESGCM(key.encode()).encrypt(iv, data, None)


def _sealed_text(key_id: str, key: str, text: str) -> str:
    return f"encrypted:{key_id}:{base64.b64encode(_seal(key, text.encode())).decode()}"


def _config(d: Path, **errors: Any) -> Any:
    return parse_config(orders_config(d, **errors))


def _encrypted(d: Path, **more: Any) -> Any:
    return _config(d, **{"deadletterqueue.encryption.key": "env:Q_KEY_2", "deadletterqueue.encryption.key.id": "k2",
                         "deadletterqueue.encryption.old.keys": {"k1": "env:Q_KEY_1"}, **more})


# --------------------------------------------------------------------------- references and config


def test_a_secret_reference_is_an_environment_variable_or_a_databricks_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    env = SecretReference.parse(" env:Q_KEY ")
    assert (env.kind, env.name, str(env)) == (ReferenceKind.ENV, "Q_KEY", "env:Q_KEY")
    monkeypatch.delenv("Q_KEY", raising=False)
    assert env.resolve() is None and env.unavailable() == "the environment variable Q_KEY is not set"
    monkeypatch.setenv("Q_KEY", "v")
    assert env.resolve() == "v"
    dbx = SecretReference.parse("{{secrets/quarantine/aes-2026}}")
    assert (dbx.kind, dbx.scope, dbx.name, str(dbx)) == (
        ReferenceKind.DATABRICKS, "quarantine", "aes-2026", "{{secrets/quarantine/aes-2026}}")
    # read as every {{secrets/…}} is (quarantine.secret_refs): from the scopes given, else the Databricks SDK's
    assert dbx.resolve(scopes=MappingScopes({("quarantine", "aes-2026"): "v" * 32})) == "v" * 32
    assert "v" * 32 in resolved_secrets()  # masked wherever a config's secrets are, as every scope's secret
    assert dbx.resolve(scopes=MappingScopes({})) is None and "could not be read here" in dbx.unavailable()
    for bad in (KEY_1, "${env:Q_KEY}", "env:", "env:1X", "{{secrets/a}}", ""):
        with pytest.raises(ValueError) as info:
            SecretReference.parse(bad)
        assert KEY_1 not in str(info.value)


def test_the_config_names_where_each_key_is_never_a_key_and_never_echoes_one(tmp_path: Path) -> None:
    config = _encrypted(tmp_path)
    e = config.errors
    assert (e.dlq_encryption_key, e.dlq_encryption_key_id, dict(e.dlq_encryption_old_keys)) == (
        "env:Q_KEY_2", "k2", {"k1": "env:Q_KEY_1"})
    # the key itself, where its reference belongs (as ${env:NAME} would put it): refused, in no message
    for errors, key in (
        ({"deadletterqueue.encryption.key": KEY_1, "deadletterqueue.encryption.key.id": "k"},
         "errors.deadletterqueue.encryption.key"),
        ({"deadletterqueue.encryption.old.keys": {"k0": KEY_1}}, "errors.deadletterqueue.encryption.old.keys.k0"),
    ):
        with pytest.raises(ConfigError) as info:
            _config(tmp_path, **errors)
        assert info.value.key == key and KEY_1 not in str(info.value)
        assert "env:NAME" in str(info.value) and "{{secrets/<scope>/<key>}}" in str(info.value)
    refused = {
        "errors.deadletterqueue.encryption.key.id": [
            {"deadletterqueue.encryption.key": "env:Q"},  # a key needs its id
            {"deadletterqueue.encryption.key.id": "k"},  # an id needs its key
            {"deadletterqueue.encryption.key": "env:Q", "deadletterqueue.encryption.key.id": "a:b"},
        ],
        "errors.deadletterqueue.encryption.old.keys": [
            {"deadletterqueue.encryption.key": "env:Q", "deadletterqueue.encryption.key.id": "k",
             "deadletterqueue.encryption.old.keys": {"k": "env:P"}},  # the writing key is not an old one
        ],
        "errors.log.include.messages": [
            {"deadletterqueue.encryption.key": "env:Q", "deadletterqueue.encryption.key.id": "k",
             "log.include.messages": True},  # the log would hold what the table keeps encrypted
        ],
    }
    for key, cases in refused.items():
        for errors in cases:
            with pytest.raises(ConfigError) as info:
                _config(tmp_path, **errors)
            assert info.value.key == key, (errors, str(info.value))


def test_the_key_ring_reads_each_key_where_it_is_kept_and_checks_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _encrypted(tmp_path)
    monkeypatch.delenv("Q_KEY_1", raising=False)
    monkeypatch.delenv("Q_KEY_2", raising=False)
    none = KeyRing.from_errors(config.errors)
    assert none.writing == "k2" and not none.keys and set(none.missing) == {"k1", "k2"} and none.configured
    with pytest.raises(ConfigError) as info:
        none.sealing()  # a run cannot write rows it cannot encrypt: refused before anything is read
    assert "Q_KEY_2 is not set" in str(info.value)
    assert "Q_KEY_1 is not set" in none.why_not("k1") and "does not name" in none.why_not("k0")
    monkeypatch.setenv("Q_KEY_2", KEY_2)
    ring = KeyRing.from_errors(config.errors)
    assert ring.sealing() == ("k2", KEY_2.encode()) and set(ring.missing) == {"k1"}
    assert KEY_2 not in repr(ring)
    assert {KEY_2, KEY_2.encode().hex(), KEY_2.encode().hex().upper()} <= set(ring.secret_spellings())
    monkeypatch.setenv("Q_KEY_1", "too short")
    with pytest.raises(ConfigError) as info:
        KeyRing.from_errors(config.errors)
    assert info.value.key == "errors.deadletterqueue.encryption.old.keys.k1"
    assert "16, 24 or 32 bytes" in str(info.value) and "9 bytes" in str(info.value)
    assert "too short" not in str(info.value)
    plain = KeyRing.from_errors(_config(tmp_path).errors)
    assert plain.sealing() is None and not plain.configured


def test_the_writer_masks_every_secret_but_the_key_its_rows_are_sealed_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 63's cost: a reference (``env:NAME``) is where a secret is, not a secret, and the writing key
    masked in a text sealed under itself hides nothing; either one in the list moved the redaction of
    every failed row into Python (about twice the write's time)."""
    monkeypatch.setenv("Q_KEY_2", KEY_2)
    monkeypatch.setenv("Q_KEY_1", KEY_1)
    config = _encrypted(tmp_path)
    assert not {"env:Q_KEY_2", "env:Q_KEY_1"} & set(config.secrets())
    ring = KeyRing.from_errors(config.errors)
    assert set(ring.secret_spellings("k2")) == {KEY_2, KEY_2.encode().hex(), KEY_2.encode().hex().upper()}
    other = "hunter2-the-kafka-password"
    writer = QuarantineWriter(spark=None, table="t", pipeline="p", retry=None,  # type: ignore[arg-type]
                              secrets=(other, KEY_2, KEY_2.encode().hex(), KEY_1), keys=ring)
    assert writer.masked() == (other, KEY_1)  # an old key stays masked: the writing key's holder may not hold it
    plain = QuarantineWriter(spark=None, table="t", pipeline="p", retry=None,  # type: ignore[arg-type]
                             secrets=(other, KEY_2), keys=KeyRing.none())
    assert plain.masked() == (other, KEY_2)


# --------------------------------------------------------------------------- what an encrypted value shows


def test_spark_s_gcm_layout_opens_in_python_with_its_key_and_shows_its_size_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("Q_KEY_1", KEY_1)
    monkeypatch.delenv("Q_KEY_2", raising=False)
    ring = KeyRing.from_errors(_encrypted(tmp_path).errors)  # k1 readable, k2 not
    value = _seal(KEY_1, SECRET_TEXT.encode())
    assert len(value) == 12 + len(SECRET_TEXT) + 16
    assert ring.open_bytes(value, "k1") == SECRET_TEXT.encode()
    assert ring.open_bytes(value, "k2") == Sealed(len(value)) and str(Sealed(41)) == "encrypted (41 bytes)"
    assert ring.open_bytes(b"stored as read", None) == b"stored as read" and ring.open_bytes(None, "k1") is None
    assert ring.open_bytes(_seal(KEY_2, b"x"), "k1") == Sealed(29)  # another key's bytes do not open
    assert ring.open_bytes(_seal(KEY_1, b""), "k1") == b""  # empty stays empty, NULL stays NULL
    text = _sealed_text("k1", KEY_1, f'expected DOUBLE, found "{SECRET_TEXT}"')
    assert sealed_text_key(text) == "k1" and sealed_text_key("encrypted: by hand") is None
    assert ring.open_text(text) == f'expected DOUBLE, found "{SECRET_TEXT}"'
    assert ring.open_text(_sealed_text("k2", KEY_2, SECRET_TEXT)) == f"encrypted ({12 + 25 + 16} bytes)"
    assert ring.open_text("a message as read") == "a message as read" and ring.open_text(None) is None


def test_inspect_and_sql_rows_show_encrypted_values_opened_with_the_key_and_as_their_size_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    row = {
        "pipeline": "p", "topic": "t", "partition": 0, "offset": 7, "status": "open", "stage": "parse",
        "last_seen_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "encryption_key_id": "k1",
        "message": _sealed_text("k1", KEY_1, f"found {SECRET_TEXT}"),
        "key": _seal(KEY_1, b"customer-42"), "value": _seal(KEY_1, SECRET_TEXT.encode()),
        "headers": [{"key": b"trace", "value": _seal(KEY_1, b"\xff\x00")}],
    }
    monkeypatch.delenv("Q_KEY_1", raising=False)
    shut = record_json(row, KeyRing.from_errors(_encrypted(tmp_path).errors))
    assert SECRET_TEXT not in json.dumps(shut) and "customer-42" not in json.dumps(shut)
    assert shut["value"] == {"text": f"encrypted ({12 + 25 + 16} bytes)", "encoding": "encrypted"}
    assert shut["message"].startswith("encrypted (") and shut["encryption_key_id"] == "k1"
    assert shut["headers"] == [{"key": "trace", "value": {"text": "encrypted (30 bytes)", "encoding": "encrypted"}}]
    monkeypatch.setenv("Q_KEY_1", KEY_1)
    opened = record_json(row, KeyRing.from_errors(_encrypted(tmp_path).errors))
    assert opened["value"] == {"text": SECRET_TEXT, "encoding": "utf-8"} and opened["message"] == f"found {SECRET_TEXT}"
    assert opened["key"]["text"] == "customer-42"
    assert opened["headers"][0]["value"] == {"text": "ff00", "encoding": "hex"}

    query = get_query("top_errors")
    cells = [["p", "parse", "SchemaMismatch", 1, 1, row["message"], None, None]]
    columns = ["pipeline", "stage", "error_class", "records", "messages", "example_message", "first", "last"]
    print_sql(query, columns, cells, 10, as_json=True, keys=KeyRing.from_errors(_encrypted(tmp_path).errors))
    assert json.loads(capsys.readouterr().out)[0]["example_message"] == f"found {SECRET_TEXT}"
    monkeypatch.delenv("Q_KEY_1")
    print_sql(query, columns, cells, 10, as_json=True, keys=KeyRing.from_errors(_encrypted(tmp_path).errors))
    out = capsys.readouterr().out
    assert SECRET_TEXT not in out and json.loads(out)[0]["example_message"].startswith("encrypted (")


def test_error_context_lines_of_an_encrypted_pipeline_carry_no_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setenv("Q_KEY_2", KEY_2)
    config = _encrypted(tmp_path, **{"log.enable": True})
    log = ErrorContextLogger.from_config(config.errors, config=config.redacted(), secrets=config.secrets())
    row = {"stage": "parse", "kind": "deserialize", "error_class": "ValueError", "attempts": 1,
           "topic": "t", "partition": 0, "offset": 3,
           "message": f"could not read {SECRET_TEXT} (a Python stage's words)"}
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        assert log.log_batch([row], pipeline="p", run_id="r", batch_id=0) == 1
    assert SECRET_TEXT not in caplog.text and "keeps it encrypted" in caplog.text
    assert "class=ValueError" in caplog.text and "offset=3" in caplog.text


# --------------------------------------------------------------------------- forget's words


def test_a_key_given_to_forget_is_its_text_or_its_bytes_in_hex() -> None:
    assert parse_key("customer-42") == b"customer-42"
    assert parse_key("hex:ff00") == b"\xff\x00" and parse_key("hex:") == b""
    assert parse_key("text:hex:ff") == b"hex:ff"
    with pytest.raises(ConfigError, match="--key"):
        parse_key("hex:f")


def test_forget_and_purge_say_what_was_erased_what_was_kept_and_when_the_bytes_are_gone() -> None:
    at = dt.datetime(2026, 12, 8, 10, 30, tzinfo=dt.UTC)
    purge = Purge(table="/q", reorganized=2, deletion_vectors=True, vacuum_hours=168.0, gone_at=at,
                  log_until=at - dt.timedelta(days=7), log_gone_at=at + dt.timedelta(days=23))
    done = Forgotten(table="/q", pipeline="orders", matched={"open": 2, "replayed": 1}, erased_before=0,
                     reason="request 113", target="/t", purge=purge)
    lines = done.render().splitlines()
    assert lines[0].startswith("forget: 3 row(s) of pipeline orders in /q matched (2 open, 1 replayed): 3 erased")
    assert "2 open closed as discarded ('forgotten: request 113')" in lines[0]
    assert "a re-run leaves these records out" in lines[1] and "target /t" in lines[2]
    assert "REORG … APPLY (PURGE): 2 file(s)" in lines[3] and "after 2026-12-08 10:30 UTC" in lines[3]
    assert "2026-12-31 10:30 UTC" in lines[4]
    now = Purge(table="/q", reorganized=0, deletion_vectors=False, vacuum_hours=0.0, gone_at=None)
    assert "gone from every data and change-data file of the table now" in now.render()
    assert len(now.render().splitlines()) == 1
    dry = Forgotten(table="/q", pipeline="orders", matched={"open": 1}, erased_before=1, reason="x", dry_run=True)
    said = dry.render()
    assert said.startswith("forget --dry-run (nothing written): 1 row(s)") and "0 would be erased" in said
