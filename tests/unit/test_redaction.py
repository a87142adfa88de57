"""Secrets are found in configs and masked in text and in error-context log lines."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarantine.listeners.error_log import SAMPLE_PER_BATCH, ErrorContextLogger
from quarantine.redaction import (
    GUARD_FRAGMENTS,
    JAVA_GUARD,
    REDACTED,
    collect_secrets,
    is_secret_key,
    redact,
    redact_text,
)

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
        # storage account keys given as Spark conf (the account name sits after `key`)
        "fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net",
        # *.key, *_key, *-key, camelCase ...Key, and everything of a keystore
        "kafka.ssl.keystore.key", "ssl.key", "fs.s3a.secret.key", "aws_access_key", "signing-key",
        "sslKey", "apiKey", "kafka.ssl.keystore.location", "kafka.ssl.keystore.certificate.chain",
        # user-info and HTTP authorization
        "schema.registry.basic.auth.user.info", "Authorization", "client_secret",
        # a nested YAML path judged as a whole
        "source.options.kafka.ssl.key",
        # an alert channel's webhook URL: whoever holds it may post to the channel
        "alerts.channels.webhook", "slack_webhook", "webhook_url",
    ],
)
def test_secret_keys_are_recognised(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "bootstrap.servers", "topics", "table", "pipeline",
        # the record key and Kafka's (de)serializer settings are not credentials
        "key", "kafka.key.deserializer", "key.serializer", "stages.0.input",
        "partition.key.column", "spark.io.encryption.keySizeBits", "monkey", "keyword",
        "fs.azure.account.keyprovider.acct.dfs.core.windows.net",
        # `auth` alone is a mode or a switch, not a credential
        "spark.authenticate", "fs.azure.account.auth.type", "kafka.sasl.mechanism",
        "kafka.ssl.truststore.type",
    ],
)
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
        f"retry with api_key={REDACTED} and secret: '{REDACTED}'"
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
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
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
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        log = ErrorContextLogger(include_messages=True)
        log.log_batch(rows, pipeline="p", run_id="r", batch_id=0)
    line = caplog.records[0].getMessage()
    assert "key='k0'" in line and "(+744 chars)" in line


def test_include_configs_logs_the_redacted_config_once_per_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = ErrorContextLogger(include_configs=True, config=redact(RAW), secrets=collect_secrets(RAW))
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        log.log_batch(_rows(3), pipeline="p", run_id="r", batch_id=0)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("config=" in ln for ln in lines) == 1
    assert '"format": "kafka"' in lines[0]
    for s in ALL:
        assert all(s not in ln for ln in lines)


def test_sample_bound_is_stated(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
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
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        log.log_batch(rows, pipeline="p", run_id="r", batch_id=0)
    line = caplog.records[0].getMessage()
    for s in ALL:
        assert s not in line
    assert "svc-orders" in line


# --------------------------------------------------------------------------- the forms of issue 13/14

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7canaryPEMbody\n"
    "q1w2e3r4t5y6u7i8o9p0canaryPEMtail==\n"
    "-----END PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        # JSON, as a JSON parse error quotes a payload (issue 13)
        ('{"user": "ann", "password": "hunter2"}', "hunter2", '"user": "ann", "password": "[redacted]"'),
        ('{"user":"ann","password":"hunter2","amount":1}', "hunter2", '"password":"[redacted]","amount":1'),
        # a payload cut by the message's snippet: the value never closes
        ('found {"order_id":"A1","password":"hunt…', "hunt", '{"order_id":"A1","password":"[redacted]"'),
        ("{'token': 'abc123'}", "abc123", "{'token': '[redacted]'}"),
        ('{"api_key": "k-1", "n": 2}', "k-1", '"n": 2'),
        # JSON inside a JSON string (a logged config, a message quoting a payload)
        ('"{\\"password\\": \\"hunter2\\"}"', "hunter2", '\\"password\\": \\"[redacted]\\"'),
        # YAML / properties / JAAS
        ("password: hunter2\nuser: ann", "hunter2", "user: ann"),
        ('PlainLoginModule required username="svc" password="p w";', "p w", 'username="svc"'),
        ("fs.azure.account.key.acct.dfs.core.windows.net=AZkey==", "AZkey", "fs.azure.account.key"),
        ("kafka.ssl.keystore.key = abc", "abc", "kafka.ssl.keystore.key = [redacted]"),
        ("Authorization: Bearer eyJhbGciOi.x.y\nnext", "eyJ", "Authorization: [redacted]\nnext"),
        # URIs with user-info
        ("MLflow (http://ann:s3cr3t@mlflow.example:5000) unreachable", "s3cr3t",
         "http://ann:[redacted]@mlflow.example:5000) unreachable"),
        ("https://ann:p@ss@host/x", "p@ss", "https://ann:[redacted]@host/x"),
        ("clone https://ghp_tok3n@github.com/o/r", "ghp_tok3n", "https://[redacted]@github.com/o/r"),
        # PEM blocks, whole, escaped in JSON, or cut short
        (f"ssl key {PEM} loaded", "canaryPEM", "-----BEGIN PRIVATE KEY-----[redacted]-----END PRIVATE KEY----- loaded"),
        (PEM.replace("\n", "\\n"), "canaryPEM", "-----BEGIN PRIVATE KEY-----[redacted]"),
        (PEM[:90], "canaryPEM", "-----BEGIN PRIVATE KEY-----[redacted]"),
    ],
)
def test_redact_text_masks_json_uri_and_pem_forms(text: str, hidden: str, kept: str) -> None:
    out = redact_text(text)
    assert hidden not in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "no secret here: amount=12, currency: EUR",
        "key=k-17 value=v topic=orders",  # the record's key is data, not a credential
        "kafka.key.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
        "bootstrap kafka://broker-1:9093, sqlite:///mlflow.db, http://host:5000/api?a=b",
        "field 'amount': expected DOUBLE, found \"12,50\"",
        "monkey: banana; keyword=select",
    ],
)
def test_redact_text_leaves_ordinary_text_alone(text: str) -> None:
    assert redact_text(text) == text


def test_configured_secret_values_are_masked_also_when_escaped() -> None:
    secret = 'pa"ss\\wörd\nline2'
    text = f"config={json.dumps({'x': secret})} repr={secret!r} raw={secret}"
    out = redact_text(text, (secret,))
    assert "ss\\\\w" not in out and 'pa\\"ss' not in out and "pa\"ss" not in out
    assert out.count(REDACTED) == 3


RAW_12: dict[str, Any] = {
    "pipeline": "orders",
    "source": {
        "format": "kafka",
        "options": {
            "kafka.ssl.keystore.key": PEM,
            "kafka.ssl.keystore.type": "PEM",
            "kafka.key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
        },
        "topics": ["orders"],
    },
    "stages": [
        {"name": "cast", "type": "cast", "options": {"columns": {"api_key": "STRING", "amount": "DOUBLE"}}},
        {"name": "raw_key", "type": "decode_utf8", "input": "key"},
    ],
    "mlflow": {"tracking_uri": "https://ann:MlfL0w-pw@mlflow.example/"},
    "spark": {"conf": {
        "fs.azure.account.key.acct.dfs.core.windows.net": "AZ-acct-key==", "spark.authenticate": "true",
    }},
}


def test_spark_conf_keys_uri_passwords_and_pem_values_are_collected() -> None:
    found = set(collect_secrets(RAW_12))
    assert {"AZ-acct-key==", "MlfL0w-pw", PEM} <= found
    # never collected: settings that are not credentials, column types, short or boolean values
    for benign in ("STRING", "DOUBLE", "key", "true", "PEM", "orders",
                   "org.apache.kafka.common.serialization.StringDeserializer"):
        assert benign not in found


def test_redacted_config_masks_spark_conf_uri_and_pem_but_keeps_ordinary_settings() -> None:
    out = redact(RAW_12)
    assert out["spark"]["conf"]["fs.azure.account.key.acct.dfs.core.windows.net"] == REDACTED
    assert out["spark"]["conf"]["spark.authenticate"] == "true"
    assert out["mlflow"]["tracking_uri"] == f"https://ann:{REDACTED}@mlflow.example/"
    assert out["source"]["options"]["kafka.ssl.keystore.key"] == REDACTED
    assert out["source"]["options"]["kafka.key.deserializer"].endswith("StringDeserializer")
    assert out["stages"][0]["options"]["columns"] == {"api_key": "STRING", "amount": "DOUBLE"}
    assert out["stages"][1]["input"] == "key"
    text = json.dumps(out)
    for s in ("AZ-acct-key==", "MlfL0w-pw", "canaryPEM"):
        assert s not in text


_FRAGMENTS = st.sampled_from([
    "password", "token", "api_key", "key", "secret", '"', "'", ":", "=", " ", "\n", "\\", "{", "}",
    "http://", "u", "@", "host", "/", ":5000", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
    "abc", "ü", REDACTED, ";", ",", "&", "fs.azure.account.key.a", ".", "_", "-",
])


# Fragments of every rule's words cut short, in other cases and with the characters Unicode
# case-folds onto ASCII ones (long s onto s, the Kelvin sign onto k), for the guard below.
_GUARD_EDGES = st.sampled_from([
    "pass", "passw", "PASSWD", "pa\u017fsword", "\u212aey", "k", "ey", "KEY", "_", ".", "-", "=", ": ", '"',
    "user", "USER_INFO", "info", "jaa", "sasl.JAAS.config", "secre", "ToKeN", "authoriz", "credential", "x",
    "webho", "WebHook", "hook",
    "http", ":/", "//", "://", "@", "-----BEGIN ", "-----begin ", "-----BEGIN", "RSA", "-----", "\n", " ",
])


def _guard_py() -> Any:
    import re

    return re.compile("|".join(GUARD_FRAGMENTS), re.IGNORECASE)


@settings(deadline=None, max_examples=400)
@given(st.lists(st.one_of(_FRAGMENTS, _GUARD_EDGES), max_size=16).map("".join))
def test_text_the_guard_finds_nothing_in_is_left_unchanged_by_every_rule(text: str) -> None:
    """``redact_column`` skips the rules where its guard finds none of ``GUARD_FRAGMENTS``: safe only if so."""
    if not _guard_py().search(text):
        assert redact_text(text) == text


def test_the_guard_is_plain_text_with_the_pair_rules_flags() -> None:
    assert all(not set(f) & set(".^$*+?{}[]\\|()") for f in GUARD_FRAGMENTS)
    assert "(?iU)" + "|".join(GUARD_FRAGMENTS) == JAVA_GUARD
    # one text per alternative of every rule: each is masked, and the guard finds it
    words = ["password", "passwd", "secret", "token", "credential", "sasl.jaas.config", "keystore",
             "authorization", "userinfo", "user.info", "privatekey", "private_key", "apikey", "api-key",
             "accesskey", "access.key", "account.key", "a_key", "b.key", "c-key", "webhook"]
    texts = [f"{w}=v" for w in words] + [f"{w.upper()}: 'v'" for w in words] + [
        "pa\u017fsword=x", "api_\u212aey: y", "https://u:p@h", "https://tok@h", "-----BEGIN X-----\nA",
    ]
    for text in texts:
        assert redact_text(text) != text and _guard_py().search(text), text


@settings(deadline=None)  # a shared, loaded CI machine: time is not the property
@given(st.lists(_FRAGMENTS, max_size=14).map("".join), st.lists(st.sampled_from(["abc", "hunter2", "u:p"])))
def test_redaction_is_idempotent(text: str, secrets: list[str]) -> None:
    once = redact_text(text, tuple(secrets))
    assert redact_text(once, tuple(secrets)) == once


def test_error_context_lines_quote_no_payload_without_include_messages(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 13: stage messages quote what they found; the log leaves it out unless asked."""
    msg = (
        'field \'amount\': expected DOUBLE, found "12,50"; field \'note\': expected INT, found "call me"; '
        "required field 'order_id': expected a value, found no such field"
    )
    rows = _rows(2, message=msg)
    rows[1]["message"] = 'malformed JSON (48 chars); expected a JSON object, found {"order_id":"A1","ssn":"078-05'
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        ErrorContextLogger().log_batch(rows, pipeline="p", run_id="r", batch_id=0)
        ErrorContextLogger(include_messages=True).log_batch(rows[1:], pipeline="p", run_id="r", batch_id=1)
    quiet, malformed, full = (r.getMessage() for r in caplog.records)
    for payload in ("12,50", "call me"):
        assert payload not in quiet
    assert "field 'amount': expected DOUBLE, found <omitted" in quiet
    assert "found no such field" in quiet  # not payload: kept
    assert "078-05" not in malformed and "malformed JSON (48 chars)" in malformed
    assert "078-05" in full  # errors.log.include.messages: true shows it


def test_py4j_debug_lines_are_dropped_while_secrets_are_handed_to_spark(caplog: pytest.LogCaptureFixture) -> None:
    """Py4J logs every JVM command at DEBUG, conf values included; not inside the context."""
    from quarantine.redaction import unlogged_jvm_calls

    py4j = logging.getLogger("py4j.clientserver")
    before = py4j.level
    # the logger's own level too: a Spark session started earlier in the run quiets py4j
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="py4j.clientserver"):
        with unlogged_jvm_calls():
            py4j.debug("Command to send: c\nset\nsfs.azure.account.key.a\nsAZ-secret\ne")
            py4j.warning("a warning still gets through")
        py4j.debug("after the context: heard again")
    lines = [r.getMessage() for r in caplog.records]
    assert not any("AZ-secret" in ln for ln in lines)
    assert "a warning still gets through" in lines and "after the context: heard again" in lines
    assert py4j.level == before


@pytest.mark.parametrize(
    "text",
    ["x" * 20_000 + " password=abc", "password" * 2_500, '"password": "' * 1_500, "a." * 10_000 + "token"],
)
def test_redaction_time_is_linear_in_long_texts(text: str) -> None:
    """A stack trace or an echoed payload can be long: no quadratic backtracking (was minutes)."""
    import time

    start = time.monotonic()
    redact_text(text, ("s3cret",))
    assert time.monotonic() - start < 10  # about 0.1 s; generous for a loaded machine
