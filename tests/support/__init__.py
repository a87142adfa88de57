"""Test and demo support: a real local Kafka broker and helpers to produce to it.

Nothing here is imported by the pipeline code; it exists so tests, the soak
script, the benchmark and the local demo run against a real broker (KRaft,
single node, loopback only) started from the jars that ``scripts/resolve_jars.sh``
resolved from Maven Central.
"""

from __future__ import annotations

from tests.support.kafka import (
    BrokerError,
    KafkaBroker,
    Ledger,
    ProducedRecord,
    Record,
    create_topics,
    kafka_pipeline_conf,
    ledger,
    order_records,
    produce,
    recreate_topic,
)

__all__ = [
    "BrokerError",
    "KafkaBroker",
    "Ledger",
    "ProducedRecord",
    "Record",
    "create_topics",
    "kafka_pipeline_conf",
    "ledger",
    "order_records",
    "produce",
    "recreate_topic",
]
