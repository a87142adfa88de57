"""No configured secret ever appears in logs, the quarantine table or the params logged for a run.

A pipeline is configured with a password, a SASL JAAS line and a token, and a
real Python stage raises exceptions whose messages echo them (a typical
"auth failed for …" error). Error-context logging is fully on (messages and
configs included) and stack traces are kept in the quarantine table.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.errors import ToleranceExceededError
from quarantine.pipeline import Pipeline
from tests.canary import (
    C_JAAS,
    C_KAFKA,
    C_MLFLOW,
    C_SPARK,
    CANARY_JAAS,
    all_logs,
    assert_no_canary,
    assert_raw_bytes_kept,
    canary_config,
    hits,
    log_texts,
    mlflow_texts,
    table_texts,
    write_canary_source,
)
from tests.helpers import kafka_df

PASSWORD = "Tru5tst0re-Pa55"
JAAS_PW = "sasl-Pl41n-S3cret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="svc-orders" password="{JAAS_PW}";'
)
TOKEN = "dapi-7f3e9c1b2a4d"
SECRETS = (PASSWORD, JAAS, JAAS_PW, TOKEN)


def leaky_lookup(value: str) -> str:
    """A user function whose failures echo credentials (as drivers' errors often do)."""
    if value.startswith("bad"):
        raise ConnectionError(
            f"login as svc-orders failed (password={PASSWORD}); sasl.jaas.config={JAAS}; "
            f"retry with token {TOKEN} or {JAAS_PW}"
        )
    return value.upper()


def _raw(d: Path, **errors: Any) -> dict[str, Any]:
    return {
        "pipeline": "orders_secrets",
        "source": {
            "format": "delta",
            "path": str(d / "source"),
            "options": {
                "kafka.ssl.truststore.password": PASSWORD,
                "kafka.sasl.jaas.config": JAAS,
                "kafka.sasl.oauthbearer.token": TOKEN,
            },
        },
        "target": {"table": str(d / "target")},
        "errors": {
            "tolerance": "all",
            "deadletterqueue.table.name": str(d / "quarantine"),
            "deadletterqueue.context.stacktrace.enable": True,
            "log.enable": True,
            "log.include.messages": True,
            "log.include.configs": True,
            **errors,
        },
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {
                "name": "lookup",
                "type": "python",
                "options": {"function": f"{__name__}.leaky_lookup", "returns": "STRING"},
            },
        ],
    }


def _assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"secret {s[:4]}… leaked into {where}"


def test_no_secret_in_logs_quarantine_rows_or_run_params(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    values = [b"good-1", b"bad-1", b"good-2", b"bad-2"]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    config = parse_config(_raw(table_dir))
    assert set(SECRETS) <= set(config.secrets())
    pipe = Pipeline.from_config(config, spark, listeners=[])

    with caplog.at_level(logging.DEBUG):
        summary = pipe.run()
    assert (summary.records_ok, summary.records_quarantined) == (2, 2)

    # logs: error-context lines were written (with messages and configs) and are clean
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert "error context" in logs and "class=ConnectionError" in logs and "config=" in logs
    _assert_clean(logs, "logs")

    # quarantine rows: the message, the stack trace and the history are clean
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    rows = q.select("message", "stacktrace", "error_history", "error_class").collect()
    assert len(rows) == 2
    for r in rows:
        assert r["error_class"] == "ConnectionError"
        assert "[redacted]" in r["message"] and "svc-orders" in r["message"]
        assert r["stacktrace"] and "ConnectionError" in r["stacktrace"]
        _assert_clean(r["message"], "quarantine.message")
        _assert_clean(r["stacktrace"], "quarantine.stacktrace")
        _assert_clean(json.dumps([e.asDict() for e in r["error_history"]], default=str), "history")

    # run params (what MLflow logs as params): the redacted config
    params = json.dumps(pipe.start_run().info.config, default=str)
    assert "kafka.sasl.jaas.config" in params and "[redacted]" in params
    _assert_clean(params, "run params")


def test_tolerance_failure_message_carries_no_secret(spark: Any, table_dir: Path) -> None:
    kafka_df(spark, [b"bad-1"]).write.format("delta").save(str(table_dir / "source"))
    pipe = Pipeline.from_config(parse_config(_raw(table_dir, tolerance="none")), spark, listeners=[])
    with pytest.raises(ToleranceExceededError) as info:
        pipe.run()
    _assert_clean(str(info.value), "the tolerance error")
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    (row,) = q.select("message").collect()
    _assert_clean(row["message"], "quarantine.message")


def test_messages_are_redacted_with_stack_traces_off(spark: Any, table_dir: Path) -> None:
    """With stack traces off the runner skips that field's redaction; messages stay clean."""
    kafka_df(spark, [b"good-1", b"bad-1"]).write.format("delta").save(str(table_dir / "source"))
    raw = _raw(table_dir, **{"deadletterqueue.context.stacktrace.enable": False})
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 1)
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    (row,) = q.select("message", "stacktrace", "error_history").collect()
    assert row["stacktrace"] is None
    assert "[redacted]" in row["message"] and "svc-orders" in row["message"]
    _assert_clean(row["message"], "quarantine.message")
    _assert_clean(json.dumps([e.asDict() for e in row["error_history"]], default=str), "history")


PAIR_TEXTS = [
    None,
    "",
    "no secret here: amount=12, currency: EUR",
    "login failed (password=hunter2); retry",
    'kafka.ssl.truststore.password = "with spaces inside"',
    "api-key: 'q1 w2'; apiKey=abc&token=xyz,next",
    "PASSWORD=Upper;Secret: s3 AccessKey=AKIA123",
    "pässwört=x und db.password=ünïcödé-wert fertig",
    "jdbc:postgresql://db/x?user=a&password=p%40ss&ssl=true",
    "sasl.jaas.config=org.X required username=\"u\" password=\"p w\";",
    "private_key:\n-----BEGIN",
    "token=",
    # JSON, YAML, JSON-in-JSON, cut-short values (issue 13)
    '{"user": "ann", "password": "hunter2", "n": 1}',
    '{"order_id":"A1","password":"hunt',
    "{'token': 'abc', 'api_key': 'k'}",
    '"{\\"password\\": \\"x\\"}"',
    "password: hunter2\nuser: ann",
    "Authorization: Bearer eyJ.x.y",
    "fs.azure.account.key.acct.dfs.core.windows.net=AZ==; kafka.key.deserializer=S",
    # URIs with user-info, and ones without
    "MLflow (http://ann:s3cr3t@mlflow:5000) down; https://ann:p@ss@h/x; https://tok@github.com/o",
    "abfss://container@acct.dfs.core.windows.net/p sqlite:///mlflow.db kafka://b:9092",
    # PEM blocks, whole, escaped and cut short
    "key -----BEGIN PRIVATE KEY-----\nMIIEv\nQIB==\n-----END PRIVATE KEY----- ok",
    "-----BEGIN RSA PRIVATE KEY-----\\nMIIEv\\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIC",
    "ünïcödé pässwört: wert; sécret=ü",
    # the guard before the rules (JAVA_GUARD): letters Unicode case-folds onto its words
    "pa\u017fsword=long-s; api_\u212aey: kelvin; USER_INFO=u; x.JAAS.config=j",
    "field 'amount': expected between 0 and 10000, found 12001",
]


def _fuzz_texts(n: int, seed: int = 7) -> list[str]:
    """Texts built from the fragments the rules care about, in every order (deterministic)."""
    import random

    parts = [
        "password", "token", "api_key", "key", "secret", '"', "'", ":", "=", " ", "\n", "\\", "{", "}",
        "http://", "u", "@", "host", "/", ":5000", "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----", "abc", "ü", "[redacted]", ";", ",", "&", "fs.azure.account.key.a",
        ".", "_", "-", "Bearer ", ")", "]", "\t",
    ]
    rnd = random.Random(seed)
    return ["".join(rnd.choice(parts) for _ in range(rnd.randint(1, 16))) for _ in range(n)]


def test_native_pair_masking_matches_the_python_redaction(spark: Any) -> None:
    """Without configured secrets the quarantine path masks natively (JSON, URI, PEM forms too); same as Python."""
    from pyspark.sql import functions as F

    from quarantine.redaction import redact_text
    from quarantine.sinks.redacted_error import redact_column

    texts = PAIR_TEXTS + _fuzz_texts(1500)
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i INT, t STRING")
    plan_col = redact_column(F.col("t"))

    def plan(c: Any) -> str:
        return str(df.select(c)._jdf.queryExecution().analyzed().toString())

    assert "_redacted" not in plan(plan_col) and "regexp_replace" in plan(plan_col) and "RLIKE" in plan(plan_col)
    assert "_redacted" in plan(redact_column(F.col("t"), ["s3cret"]))  # with secrets: the UDF
    got = {r["i"]: r["m"] for r in df.select("i", plan_col.alias("m")).collect()}
    differ = [(t, got[i]) for i, t in enumerate(texts) if got[i] != (None if t is None else redact_text(t))]
    assert not differ, differ[:5]
    assert "[redacted]" in got[3] and "hunter2" not in got[3]
    long_s = PAIR_TEXTS.index(next(t for t in PAIR_TEXTS if t and "long-s" in t))
    assert "long-s" not in got[long_s] and "kelvin" not in got[long_s], got[long_s]
    for i, t in enumerate(PAIR_TEXTS):
        for secret in ("hunter2", "hunt", "abc", "s3cr3t", "p@ss", "tok@", "AZ==", "MIIEv", "MIIC", "eyJ"):
            if t and secret in t:
                assert secret not in got[i], (t, got[i])


# --------------------------------------------------------------------------- the secrets canary
# (tests.canary: a canary in every place a secret can be configured, readers for every
# place a person can read; zero hits allowed)


def test_secrets_canary_batch_and_replay_leave_no_trace(
    spark: Any, table_dir: Path, mlflow_store: str, caplog: pytest.LogCaptureFixture
) -> None:
    from quarantine.runners.replay import replay

    tracking = mlflow_store
    write_canary_source(spark, table_dir)
    config = parse_config(canary_config(table_dir, tracking_uri=tracking))
    assert {C_SPARK, C_KAFKA, C_JAAS} <= set(config.secrets())

    # no spark session passed: the pipeline applies spark.conf (the account key) itself
    with all_logs(caplog):
        summary = Pipeline.from_config(config).run()
        result = replay(Pipeline.from_config(config))
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)
    assert result.still_failing == 3

    logs = log_texts(caplog)
    assert any("error context" in t and "class=ConnectionError" in t for t in logs.values())
    assert any("config=" in t for t in logs.values())
    texts = {**logs, **mlflow_texts(tracking), **table_texts(spark, table_dir)}
    assert any("[redacted]" in t for k, t in texts.items() if k.startswith("quarantine.message"))
    assert any("kafka.sasl.jaas.config" in t for k, t in texts.items() if k.endswith("params"))
    assert_no_canary(texts)
    assert_raw_bytes_kept(spark, table_dir)


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_secrets_canary_tolerance_breach_with_mlflow_down_leaves_no_trace(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tracking = f"http://ann:{C_MLFLOW}@127.0.0.1:{_dead_port()}"
    write_canary_source(spark, table_dir)
    config = parse_config(canary_config(table_dir, tracking_uri=tracking, tolerance="none"))
    assert C_MLFLOW in config.secrets()
    with all_logs(caplog), pytest.raises(ToleranceExceededError) as info:
        Pipeline.from_config(config, spark).run()

    logs = log_texts(caplog)
    assert any("MLflow" in t and "unreachable" in t and "ann:[redacted]@127.0.0.1" in t for t in logs.values())
    texts = {"the error": f"{type(info.value).__name__}: {info.value}", **logs, **table_texts(spark, table_dir)}
    assert_no_canary(texts)
    assert_raw_bytes_kept(spark, table_dir)


def test_secrets_canary_handler_exception_leaves_no_trace(
    spark: Any, table_dir: Path, mlflow_store: str, caplog: pytest.LogCaptureFixture
) -> None:
    from quarantine.errors import HandlerError

    tracking = mlflow_store
    write_canary_source(spark, table_dir)
    raw = canary_config(table_dir, tracking_uri=tracking, **{"handler.transform": "tests.canary.CanaryHandler"})
    with all_logs(caplog), pytest.raises(HandlerError) as info:
        Pipeline.from_config(parse_config(raw), spark).run()
    assert "RuntimeError" in str(info.value) and "[redacted]" in str(info.value)
    texts = {
        "the error": str(info.value), **log_texts(caplog), **mlflow_texts(tracking),
        **table_texts(spark, table_dir),
    }
    assert any("HandlerError" in t for k, t in texts.items() if k.endswith("tags"))
    assert_no_canary(texts)


def test_secrets_canary_delta_stream_leaves_no_trace(
    spark: Any, table_dir: Path, mlflow_store: str, caplog: pytest.LogCaptureFixture
) -> None:
    tracking = mlflow_store
    write_canary_source(spark, table_dir)
    config = parse_config(canary_config(table_dir, tracking_uri=tracking, streaming=True))
    with all_logs(caplog):
        summary = Pipeline.from_config(config, spark).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)

    logs = log_texts(caplog)
    (start,) = [t for t in logs.values() if "streaming query" in t and "started on" in t]
    assert "kafka.sasl.jaas.config=[redacted]" in start and "kafka.ssl.keystore.key=[redacted]" in start
    assert_no_canary({**logs, **mlflow_texts(tracking), **table_texts(spark, table_dir)})
    assert_raw_bytes_kept(spark, table_dir)


BAD_CONFIGS = [
    # a credential under a key the config does not know: the error names the key only
    pytest.param({"mlflow": {"enabled": True, "token": C_MLFLOW}}, id="unknown-secret-key"),
    pytest.param({"spark": {"hadoop": {"fs.azure.account.key.acct.dfs.core.windows.net": C_SPARK}}},
                 id="unknown-section-holding-a-secret"),
    pytest.param({"mlflow": {"enabled": "maybe", "tracking_uri": f"http://ann:{C_MLFLOW}@h/"}},
                 id="bad-value-next-to-a-secret-uri"),
    pytest.param({"source": {"format": "kafka", "options": {"kafka.sasl.jaas.config": CANARY_JAAS}}},
                 id="kafka-source-without-servers"),
]


@pytest.mark.parametrize("override", BAD_CONFIGS)
def test_secrets_canary_bad_config_errors_carry_no_secret(
    override: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from quarantine.cli import main
    from quarantine.errors import ConfigError

    raw = canary_config(tmp_path, tracking_uri="sqlite:///x.db")
    for section, value in override.items():
        raw[section] = {**raw[section], **value} if isinstance(raw.get(section), dict) else value
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert not hits(str(info.value)), str(info.value)

    conf = tmp_path / "bad.yml"
    conf.write_text(yaml.safe_dump(raw))
    assert main(["validate", "--conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert "bad config" in err and not hits(err), err


def test_secrets_canary_unparseable_yaml_error_carries_no_secret(tmp_path: Path) -> None:
    from quarantine.config import load_config
    from quarantine.errors import ConfigError

    conf = tmp_path / "broken.yml"
    conf.write_text(f'pipeline: p\nsource:\n  options:\n    password: "{C_KAFKA}\n  - [unbalanced\n')
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert "valid YAML" in str(info.value) and not hits(str(info.value)), str(info.value)
