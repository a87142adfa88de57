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
from quarantine.runner import Pipeline
from tests.helpers import kafka_df

pytestmark = pytest.mark.integration

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
    params = json.dumps(pipe.run_info().config, default=str)
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
]


def test_native_pair_masking_matches_the_python_redaction(spark: Any) -> None:
    """Without configured secrets the quarantine path masks natively; same output as Python."""
    from pyspark.sql import functions as F

    from quarantine.redaction import redact_column, redact_text

    df = spark.createDataFrame([(i, t) for i, t in enumerate(PAIR_TEXTS)], "i INT, t STRING")
    plan_col = redact_column(F.col("t"))

    def plan(c: Any) -> str:
        return str(df.select(c)._jdf.queryExecution().analyzed().toString())

    assert "_redacted" not in plan(plan_col) and "regexp_replace" in plan(plan_col)
    assert "_redacted" in plan(redact_column(F.col("t"), ["s3cret"]))  # with secrets: the UDF
    got = {r["i"]: r["m"] for r in df.select("i", plan_col.alias("m")).collect()}
    for i, t in enumerate(PAIR_TEXTS):
        assert got[i] == (None if t is None else redact_text(t)), t
    assert "[redacted]" in got[3] and "hunter2" not in got[3]


# --------------------------------------------------------------------------- the secrets canary
#
# A distinct canary in every place a secret can be configured or arrive, then every
# path run (batch, replay, a Delta stream, a tolerance breach, MLflow down, a stage
# and a handler raising, bad configs), then every place a person can read searched:
# zero hits. The raw key/value/header bytes in the quarantine table are the one
# intended copy and are checked to be there, byte for byte.

C_SPARK = "cnry-spark-conf-4a1f"  # spark.conf: a storage account key
C_KAFKA = "cnry-kafka-pw-7c2e"  # source.options: a truststore password
C_JAAS = "cnry-jaas-pw-19d0"  # source.options: inside a JAAS line
C_PEM = "cnryPEMbody0e5b"  # source.options: inside a PEM private key
C_MLFLOW = "cnry-mlflow-pw-b3c8"  # mlflow.tracking_uri: the user-info password
C_HEADER = "cnry-header-tok-5d71"  # a record header
C_KEY = "cnry-record-key-6a0c"  # a record key
C_PAYLOAD = "cnry-payload-pw-8e42"  # a payload's "password", quoted by a malformed-JSON message
C_FIELD = "cnry-payload-field-2f90"  # a payload's "password" of the wrong type
C_SECRET_VALUE = "cnry-value-under-api-key-31b7"  # a payload's "api_key" echoed by a stage exception
CANARIES = (C_SPARK, C_KAFKA, C_JAAS, C_PEM, C_MLFLOW, C_HEADER, C_KEY, C_PAYLOAD, C_FIELD, C_SECRET_VALUE)

CANARY_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="svc-canary" password="{C_JAAS}";'
)
CANARY_PEM = f"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq{C_PEM}hkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


def canary_lookup(value: str) -> str:
    """A user function that fails the way drivers do: by echoing every credential it holds."""
    if '"bad-' in value:
        api_key = value.split('"api_key":"', 1)[-1].split('"', 1)[0]
        raise ConnectionError(
            f"login as svc-canary failed: password={C_KAFKA}; sasl.jaas.config={CANARY_JAAS}; "
            f"ssl key {CANARY_PEM}; fs.azure.account.key.acct.dfs.core.windows.net={C_SPARK}; "
            f"tracking http://ann:{C_MLFLOW}@mlflow.internal/; api_key={api_key}"
        )
    return value


class CanaryHandler:
    """A custom handler that raises with credentials in its message."""

    def handle(self, context: Any) -> Any:
        raise RuntimeError(f"handler could not page on-call: token={C_KAFKA} key {C_SPARK} {CANARY_JAAS}")


def _canary_raw(d: Path, *, tracking_uri: str, streaming: bool = False, **errors: Any) -> dict[str, Any]:
    return {
        "pipeline": "orders_canary",
        "source": {
            "format": "delta",
            "path": str(d / "source"),
            "streaming": streaming,
            "options": {
                "kafka.ssl.truststore.password": C_KAFKA,
                "kafka.sasl.jaas.config": CANARY_JAAS,
                "kafka.ssl.keystore.key": CANARY_PEM,
            },
        },
        "target": {"table": str(d / "target"), **({"checkpoint": str(d / "checkpoint")} if streaming else {})},
        "errors": {
            "tolerance": "all",
            "deadletterqueue.table.name": str(d / "quarantine"),
            "deadletterqueue.context.stacktrace.enable": True,
            "log.enable": True,
            "log.include.messages": False,
            "log.include.configs": True,
            **errors,
        },
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {
                "name": "parse",
                "type": "json",
                "input": "decode",
                "options": {"schema": "order_id STRING, password INT, api_key STRING", "required": ["order_id"]},
            },
            {
                "name": "lookup",
                "type": "python",
                "input": "decode",
                "options": {"function": f"{__name__}.canary_lookup", "returns": "STRING"},
            },
        ],
        "metrics": {"table": str(d / "metrics")},
        "mlflow": {
            "enabled": True, "tracking_uri": tracking_uri, "experiment": "canary",
            "http_timeout_s": 1, "http_max_retries": 0,
        },
        "spark": {"conf": {"fs.azure.account.key.acct.dfs.core.windows.net": C_SPARK}},
    }


CANARY_VALUES = [
    b'{"order_id":"ok-1","api_key":"harmless"}',
    # malformed: the message quotes the first 64 characters, password included
    f'{{"order_id":"m-1","password":"{C_PAYLOAD}",'.encode(),
    # a wrong type under a credential-named field
    f'{{"order_id":"t-1","password":"{C_FIELD}"}}'.encode(),
    # parses, then the stage raises echoing the configured secrets and the payload's api_key
    f'{{"order_id":"bad-1","api_key":"{C_SECRET_VALUE}"}}'.encode(),
]
CANARY_HEADERS = [[("authorization", f"Bearer {C_HEADER}".encode())]] * len(CANARY_VALUES)
CANARY_KEYS = [f"{C_KEY}-{i}".encode() for i in range(len(CANARY_VALUES))]


def _write_canary_source(spark: Any, d: Path) -> None:
    df = kafka_df(spark, CANARY_VALUES, keys=CANARY_KEYS, headers=CANARY_HEADERS)
    df.write.format("delta").save(str(d / "source"))


def _hits(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


def _mlflow_texts(tracking_uri: str) -> dict[str, str]:
    """Every param, tag, metric name and artifact of every run in the store, as text."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    out: dict[str, str] = {}
    exp = client.get_experiment_by_name("canary")
    assert exp is not None, "the run was not logged to MLflow at all"
    runs = client.search_runs([exp.experiment_id])
    assert runs
    for run in runs:
        rid = run.info.run_id
        out[f"{rid} params"] = json.dumps(run.data.params)
        out[f"{rid} tags"] = json.dumps(run.data.tags)
        out[f"{rid} metric names"] = json.dumps(sorted(run.data.metrics))
        out[f"{rid} run name"] = str(run.info.run_name)
        stack = [""]
        while stack:
            for f in client.list_artifacts(rid, stack.pop() or None):
                if f.is_dir:
                    stack.append(f.path)
                else:
                    local = client.download_artifacts(rid, f.path)
                    out[f"{rid} artifact {f.path}"] = Path(local).read_text(errors="replace")
    return out


def _table_texts(spark: Any, d: Path) -> dict[str, str]:
    """The metrics table whole, and every quarantine column but the raw record."""
    out: dict[str, str] = {}
    metrics = spark.read.format("delta").load(str(d / "metrics"))
    out["metrics table"] = json.dumps([r.asDict(recursive=True) for r in metrics.collect()], default=str)
    q = spark.read.format("delta").load(str(d / "quarantine"))
    readable = [c for c in q.columns if c not in ("key", "value", "headers")]
    for r in q.select(*readable).collect():
        for c in readable:
            out[f"quarantine.{c} offset {r['offset']}"] = json.dumps(r[c], default=str) if c != "error_history" else (
                json.dumps([e.asDict() for e in r[c] or []], default=str)
            )
    return out


def _assert_no_canary(texts: dict[str, str]) -> None:
    leaks = {where: _hits(text) for where, text in texts.items() if _hits(text)}
    assert not leaks, f"canaries leaked: {leaks}"


def _raw_bytes_kept(spark: Any, d: Path) -> None:
    """The one intended copy: quarantined key, value and headers byte for byte."""
    q = spark.read.format("delta").load(str(d / "quarantine"))
    rows = {r["offset"]: r for r in q.select("offset", "key", "value", "headers").collect()}
    assert set(rows) == {1, 2, 3}
    for off, r in rows.items():
        assert bytes(r["key"]) == CANARY_KEYS[off] and bytes(r["value"]) == CANARY_VALUES[off]
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == CANARY_HEADERS[off]


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Any:
    """Every log record at DEBUG, from the root logger and the quarantine loggers."""
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="quarantine"):
        yield caplog


def _log_texts(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    out = {}
    for i, r in enumerate(caplog.records):
        text = r.getMessage()
        if r.exc_info:
            text += "\n" + logging.Formatter().formatException(r.exc_info)
        out[f"log {i} {r.name}:{r.levelname}"] = text
    return out


def test_secrets_canary_batch_and_replay_leave_no_trace(
    spark: Any, table_dir: Path, tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    from quarantine.replay import replay

    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_canary_source(spark, table_dir)
    config = parse_config(_canary_raw(table_dir, tracking_uri=tracking))
    assert {C_SPARK, C_KAFKA, C_JAAS} <= set(config.secrets())

    # no spark session passed: the pipeline applies spark.conf (the account key) itself
    summary = Pipeline.from_config(config).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)
    result = replay(Pipeline.from_config(config))
    assert result.still_failing == 3

    logs = _log_texts(all_logs)
    assert any("error context" in t and "class=ConnectionError" in t for t in logs.values())
    assert any("config=" in t for t in logs.values())
    texts = {**logs, **_mlflow_texts(tracking), **_table_texts(spark, table_dir)}
    assert any("[redacted]" in t for k, t in texts.items() if k.startswith("quarantine.message"))
    assert any("kafka.sasl.jaas.config" in t for k, t in texts.items() if k.endswith("params"))
    _assert_no_canary(texts)
    _raw_bytes_kept(spark, table_dir)


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_secrets_canary_tolerance_breach_with_mlflow_down_leaves_no_trace(
    spark: Any, table_dir: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    tracking = f"http://ann:{C_MLFLOW}@127.0.0.1:{_dead_port()}"
    _write_canary_source(spark, table_dir)
    config = parse_config(_canary_raw(table_dir, tracking_uri=tracking, tolerance="none"))
    assert C_MLFLOW in config.secrets()
    with pytest.raises(ToleranceExceededError) as info:
        Pipeline.from_config(config, spark).run()

    logs = _log_texts(all_logs)
    assert any("MLflow" in t and "unreachable" in t and "ann:[redacted]@127.0.0.1" in t for t in logs.values())
    texts = {"the error": f"{type(info.value).__name__}: {info.value}", **logs, **_table_texts(spark, table_dir)}
    _assert_no_canary(texts)
    _raw_bytes_kept(spark, table_dir)


def test_secrets_canary_handler_exception_leaves_no_trace(
    spark: Any, table_dir: Path, tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    from quarantine.errors import HandlerError

    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_canary_source(spark, table_dir)
    raw = _canary_raw(table_dir, tracking_uri=tracking, **{"handler.transform": f"{__name__}.CanaryHandler"})
    with pytest.raises(HandlerError) as info:
        Pipeline.from_config(parse_config(raw), spark).run()
    assert "RuntimeError" in str(info.value) and "[redacted]" in str(info.value)
    texts = {
        "the error": str(info.value), **_log_texts(all_logs), **_mlflow_texts(tracking),
        **_table_texts(spark, table_dir),
    }
    assert any("HandlerError" in t for k, t in texts.items() if k.endswith("tags"))
    _assert_no_canary(texts)


def test_secrets_canary_delta_stream_leaves_no_trace(
    spark: Any, table_dir: Path, tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_canary_source(spark, table_dir)
    config = parse_config(_canary_raw(table_dir, tracking_uri=tracking, streaming=True))
    summary = Pipeline.from_config(config, spark).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)

    logs = _log_texts(all_logs)
    (start,) = [t for t in logs.values() if "streaming query" in t and "started on" in t]
    assert "kafka.sasl.jaas.config=[redacted]" in start and "kafka.ssl.keystore.key=[redacted]" in start
    _assert_no_canary({**logs, **_mlflow_texts(tracking), **_table_texts(spark, table_dir)})
    _raw_bytes_kept(spark, table_dir)


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

    raw = _canary_raw(tmp_path, tracking_uri="sqlite:///x.db")
    for section, value in override.items():
        raw[section] = {**raw[section], **value} if isinstance(raw.get(section), dict) else value
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert not _hits(str(info.value)), str(info.value)

    conf = tmp_path / "bad.yml"
    conf.write_text(yaml.safe_dump(raw))
    assert main(["validate", "--conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert "bad config" in err and not _hits(err), err


def test_secrets_canary_unparseable_yaml_error_carries_no_secret(tmp_path: Path) -> None:
    from quarantine.config import load_config
    from quarantine.errors import ConfigError

    conf = tmp_path / "broken.yml"
    conf.write_text(f'pipeline: p\nsource:\n  options:\n    password: "{C_KAFKA}\n  - [unbalanced\n')
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert "valid YAML" in str(info.value) and not _hits(str(info.value)), str(info.value)
