"""The DLQ topic from a real broker: quarantined records also produced to Kafka, as Kafka Connect does.

A Kafka source with poison runs with ``errors.deadletterqueue.topic.name``; a
``confluent-kafka`` consumer reads the DLQ topic back: every quarantined record once
per run, its key, value and headers byte for byte, then Kafka Connect's
``__connect.errors.*`` headers. A DLQ topic that cannot be reached loses nothing: the
Delta rows are there, the run succeeds, the failures are counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.support import KafkaBroker, Record, kafka_pipeline_conf, ledger, order_records, produce


def _consume_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        # from the first offset: no committed offset to fetch, so no group coordinator to wait for
        # (a broker just started answered that fetch with NOT_COORDINATOR and failed the test)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Any] = []
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                if len(out) >= expected:
                    break
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
        return out
    finally:
        consumer.close()


def test_quarantined_records_reach_the_dlq_topic_with_their_bytes_and_connects_headers(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    source, dlq = new_topics("dlq-src", "dlq-out", partitions=1)
    b = kafka_broker.bootstrap
    produced = produce(b, order_records([source], 1, 300, poison_rate=0.1, seed=5))
    produced += produce(b, [Record(source, b"\xc3\x28", key=b"\x00\xff", partition=0,
                                   headers=(("trace", b"\x01\x02"), ("empty", None)))])
    raw = kafka_pipeline_conf(b, tmp_path, topics=[source], pipeline="orders_dlq_topic")
    raw["errors"]["deadletterqueue.topic.name"] = dlq
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()

    book = ledger(spark, produced, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once and book.in_quarantine == summary.records_quarantined > 5, book.describe()
    messages = _consume_all(b, dlq, book.in_quarantine)
    assert len(messages) == book.in_quarantine  # each once (one run, no retry)
    by_offset = {p.offset: p for p in produced}
    rows = {r.offset: r for r in spark.read.format("delta").load(raw["errors"]["deadletterqueue.table.name"])
            .collect()}
    for msg in messages:
        headers = msg.headers() or []
        connect = {k: v for k, v in headers if k.startswith("__connect.errors.")}
        offset = int(connect["__connect.errors.offset"])
        original, row = by_offset[offset], rows[offset]
        assert (msg.key(), msg.value()) == (original.key, original.value)  # byte for byte
        assert [h for h in headers if not h[0].startswith("__connect.errors.")] == list(original.headers or [])
        assert connect == {
            "__connect.errors.topic": source.encode(),
            "__connect.errors.partition": b"0",
            "__connect.errors.offset": str(offset).encode(),
            "__connect.errors.connector.name": b"orders_dlq_topic",
            "__connect.errors.stage": row.stage.encode(),
            "__connect.errors.class.name": row.kind.encode(),
            "__connect.errors.exception.class.name": row.error_class.encode(),
            "__connect.errors.exception.message": row.message.encode(),
        }  # no stack trace: deadletterqueue.context.stacktrace.enable is off
    metrics = summary.batches[0].metrics
    n = summary.batches[0].records_quarantined
    assert metrics["deadletterqueue-produce-requests"] == 2 * n  # the table's write, then the topic's
    assert metrics["deadletterqueue-produce-failures"] == 0


def test_an_unreachable_dlq_topic_loses_nothing_and_is_counted(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (source,) = new_topics("dlq-down", partitions=1)
    produced = produce(kafka_broker.bootstrap, order_records([source], 1, 200, poison_rate=0.1, seed=6))
    raw = kafka_pipeline_conf(kafka_broker.bootstrap, tmp_path, topics=[source], pipeline="orders_dlq_down")
    raw["errors"].update({
        "deadletterqueue.topic.name": "nowhere",
        "deadletterqueue.topic.bootstrap.servers": "127.0.0.1:1",  # nothing listens
        "deadletterqueue.topic.options": {"kafka.max.block.ms": "1000"},
        "retry.timeout": 500,
    })
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()

    book = ledger(spark, produced, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once and book.in_quarantine > 5, book.describe()  # the table has every failed record
    (batch,) = summary.batches
    n = batch.records_quarantined
    attempts = (batch.metrics["deadletterqueue-produce-requests"] - n) / n  # the topic's attempts
    assert attempts >= 4  # WRITE_MIN_ATTEMPTS, even when one attempt used the budget
    assert batch.metrics["deadletterqueue-produce-failures"] == n * attempts
