"""The secrets canary over a real broker: Kafka options, headers and payloads leave no trace.

The Kafka source carries a truststore password, a JAAS line and a PEM SSL key in
``source.options`` (the broker is PLAINTEXT, so the client holds them unused), the
Spark conf an account key; records carry a credential header, canary keys and
payload fields. After a streaming run, no log record (the stream-start line with
its options included), MLflow param, tag, metric name or artifact, metrics-table
row or quarantine column other than the raw record holds a canary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.canary import (
    CANARY_HEADERS,
    CANARY_KEYS,
    CANARY_VALUES,
    all_logs,
    assert_no_canary,
    assert_raw_bytes_kept,
    canary_config,
    log_texts,
    mlflow_texts,
    table_texts,
)
from tests.support import KafkaBroker, Record, produce


def test_secrets_canary_kafka_stream_leaves_no_trace(
    spark: Any,
    kafka_broker: KafkaBroker,
    new_topics: Callable[..., list[str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (topic,) = new_topics("canary")
    produce(kafka_broker.bootstrap, [
        Record(topic, v, key=k, partition=0, headers=tuple(h))
        for v, k, h in zip(CANARY_VALUES, CANARY_KEYS, CANARY_HEADERS, strict=True)
    ])
    d = tmp_path / "tables"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    raw = canary_config(d, tracking_uri=tracking, streaming=True)
    options = raw["source"]["options"]
    raw["source"] = {
        "format": "kafka", "bootstrap.servers": kafka_broker.bootstrap, "topics": [topic],
        "starting.offsets": "earliest", "include.headers": True, "options": options,
    }
    with all_logs(caplog):
        summary = Pipeline.from_config(parse_config(raw), spark).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)

    logs = log_texts(caplog)
    (start,) = [t for t in logs.values() if "streaming query" in t and "started on" in t]
    assert "kafka.ssl.truststore.password=[redacted]" in start
    assert "kafka.ssl.keystore.key=[redacted]" in start and f"subscribe={topic}" in start
    assert_no_canary({**logs, **mlflow_texts(tracking), **table_texts(spark, d)})
    assert_raw_bytes_kept(spark, d)
