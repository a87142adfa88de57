"""The secrets canary (shared by the integration and e2e tests).

A distinct canary string in every place a secret can be configured or arrive —
Spark conf, source options (a password, a JAAS line, a PEM key), the MLflow
tracking URI, record headers, keys and payload fields — and readers for every
place a person can read: log records, MLflow params, tags, metric names and
artifacts, the metrics table, and the quarantine table's columns other than the
raw record (``key``/``value``/``headers``, the one intended copy).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import kafka_df

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


def canary_config(d: Path, *, tracking_uri: str, streaming: bool = False, **errors: Any) -> dict[str, Any]:
    """A pipeline config (as YAML loads it) with a canary in every place a secret can be configured.

    A Kafka-shaped Delta source under ``d``; ``errors`` override ``errors.*`` keys.
    """
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
                "options": {"function": "tests.canary.canary_lookup", "returns": "STRING"},
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


def write_canary_source(spark: Any, d: Path) -> None:
    df = kafka_df(spark, CANARY_VALUES, keys=CANARY_KEYS, headers=CANARY_HEADERS)
    df.write.format("delta").save(str(d / "source"))


def hits(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


def mlflow_texts(tracking_uri: str) -> dict[str, str]:
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


def table_texts(spark: Any, d: Path) -> dict[str, str]:
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


def assert_no_canary(texts: dict[str, str]) -> None:
    leaks = {where: hits(text) for where, text in texts.items() if hits(text)}
    assert not leaks, f"canaries leaked: {leaks}"


def assert_raw_bytes_kept(spark: Any, d: Path) -> None:
    """The one intended copy: quarantined key, value and headers byte for byte."""
    q = spark.read.format("delta").load(str(d / "quarantine"))
    rows = {r["offset"]: r for r in q.select("offset", "key", "value", "headers").collect()}
    assert set(rows) == {1, 2, 3}
    for off, r in rows.items():
        assert bytes(r["key"]) == CANARY_KEYS[off] and bytes(r["value"]) == CANARY_VALUES[off]
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]] == CANARY_HEADERS[off]


@contextlib.contextmanager
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record at DEBUG, from the root logger, the quarantine loggers and Py4J."""
    with (
        caplog.at_level(logging.DEBUG),
        caplog.at_level(logging.DEBUG, logger="quarantine"),
        caplog.at_level(logging.DEBUG, logger="py4j"),  # quarantine.cli quiets it; hear it here
    ):
        yield caplog


def log_texts(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    out = {}
    for i, r in enumerate(caplog.records):
        text = r.getMessage()
        if r.exc_info:
            text += "\n" + logging.Formatter().formatException(r.exc_info)
        out[f"log {i} {r.name}:{r.levelname}"] = text
    return out


