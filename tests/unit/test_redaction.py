"""Secrets are found in configs and masked in text and in error-context log lines."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from quarantine.errorlog import SAMPLE_PER_BATCH, ErrorContextLogger
from quarantine.redaction import REDACTED, collect_secrets, is_secret_key, redact, redact_text

PASSWORD = "hunter2-Pa55word"
JAAS_PW = "jaas-S3cret-99"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="svc-orders" password="{JAAS_PW}";'
)
TOKEN = "dapi0123456789abcdef"
JDBC_PW = "jdbcPw-77"

RAW: dict[str, Any] = {
    "pipeline": "orders",
    "source": {
        "format": "kafka",
        "options": {
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.password": PASSWORD,
        },
    },
    "sink": {"url": f"jdbc:postgresql://db:5432/x?user=a&password={JDBC_PW}"},
    "mlflow": {"token": TOKEN},
}
ALL = (PASSWORD, JAAS, JAAS_PW, TOKEN, JDBC_PW)


@pytest.mark.parametrize(
    "key",
    [
        "password", "kafka.sasl.jaas.config", "api_key", "aws.secret.access.key", "TOKEN",
        "credentials",
    ],
)
def test_secret_keys_are_recognised(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["bootstrap.servers", "topics", "table", "pipeline"])
def test_ordinary_keys_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_collect_secrets_finds_values_and_passwords_inside_jaas_and_urls() -> None:
    found = set(collect_secrets(RAW))
    assert set(ALL) <= found
    assert "orders" not in found and "kafka" not in found


def test_redacted_config_holds_no_secret_value() -> None:
    text = repr(redact(RAW))
    for s in ALL:
        assert s not in text
    assert redact(RAW)["source"]["options"]["kafka.sasl.jaas.config"] == REDACTED
    assert redact(RAW)["source"]["format"] == "kafka"


@pytest.mark.parametrize(
    "text",
    [
        f"auth failed: {JAAS_PW} rejected",
        f"bad option kafka.sasl.jaas.config={JAAS}",
        f"connect(password={PASSWORD}) failed",
        f'{{"token": "{TOKEN}"}}',
        f"Authorization: Bearer {TOKEN}",
        f"jdbc url jdbc:postgresql://db/x?password={JDBC_PW}&ssl=true",
    ],
)
def test_redact_text_masks_every_secret(text: str) -> None:
    out = redact_text(text, collect_secrets(RAW))
    for s in ALL:
        assert s not in out
    assert REDACTED in out


def test_redact_text_masks_unknown_pairs_by_key() -> None:
    assert redact_text("retry with api_key=abc123 and secret: 'xyz'") == (
        f"retry with api_key={REDACTED} and secret: {REDACTED}"
    )


def _rows(n: int, message: str = "boom") -> list[dict[str, Any]]:
    return [
        {
            "stage": "parse", "kind": "deserialize", "error_class": "JSONDecodeError",
            "message": message, "attempts": 1, "topic": "orders", "partition": 0, "offset": i,
            "key": f"k{i}".encode(), "value": b"\xff{bad json",
        }
        for i in range(n)
    ]


def test_error_context_lines_have_context_but_no_payload_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ErrorContextLogger()
    with caplog.at_level(logging.WARNING, logger="quarantine.errors"):
        n = log.log_batch(_rows(2), pipeline="orders", run_id="r1", batch_id=7)
    assert n == 2 and log.lines_logged == 2
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "stage=parse kind=deserialize class=JSONDecodeError" in lines[0]
    assert "topic=orders partition=0 offset=0" in lines[0]
    assert "batch=7" in lines[0]
    assert "key=" not in lines[0] and "value=" not in lines[0]


def test_include_messages_adds_key_and_value_truncated(caplog: pytest.LogCaptureFixture) -> None:
    rows = _rows(1)
    rows[0]["value"] = b"x" * 1000
    with caplog.at_level(logging.WARNING, logger="quarantine.errors"):
        log = ErrorContextLogger(include_messages=True)
        log.log_batch(rows, pipeline="p", run_id="r", batch_id=0)
    line = caplog.records[0].getMessage()
    assert "key='k0'" in line and "(+744 chars)" in line


def test_include_configs_logs_the_redacted_config_once_per_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ErrorContextLogger(include_configs=True, config=redact(RAW), secrets=collect_secrets(RAW))
    with caplog.at_level(logging.WARNING, logger="quarantine.errors"):
        log.log_batch(_rows(3), pipeline="p", run_id="r", batch_id=0)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("config=" in ln for ln in lines) == 1
    assert '"format": "kafka"' in lines[0]
    for s in ALL:
        assert all(s not in ln for ln in lines)


def test_sample_bound_is_stated(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="quarantine.errors"):
        ErrorContextLogger().log_batch(
            _rows(SAMPLE_PER_BATCH), pipeline="p", run_id="r", batch_id=0, total=105
        )
    last = caplog.records[-1].getMessage()
    assert f"{105 - SAMPLE_PER_BATCH} more failed record(s) not logged" in last


def test_log_lines_never_carry_a_secret_from_an_exception_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    msg = f"login as svc-orders failed: password {JAAS_PW}; token={TOKEN}; {PASSWORD}"
    log = ErrorContextLogger(include_messages=True, secrets=collect_secrets(RAW))
    rows = _rows(1, message=msg)
    rows[0]["value"] = f'{{"password": "{PASSWORD}"}}'.encode()
    with caplog.at_level(logging.WARNING, logger="quarantine.errors"):
        log.log_batch(rows, pipeline="p", run_id="r", batch_id=0)
    line = caplog.records[0].getMessage()
    for s in ALL:
        assert s not in line
    assert "svc-orders" in line
