"""Spark's Kafka source, with the project's jars, reads a real broker byte for byte."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tests.support import KafkaBroker, Record, produce

FIVE_MB = os.urandom(5 * 1024 * 1024)

AWKWARD: list[Record] = [
    Record("", b'{"id": 1}', key=b"\x00\xff\xfe binary key", headers=(("h-bin", b"\x00\x01\xff"),)),
    Record("", b"\xff\xfe\xfd not utf-8 \xc3\x28", key=b"k2"),
    Record("", b"", key=b"k-empty"),
    Record("", None, key=b"k-null"),
    Record("", b'{"id": 5}', key=None, headers=(("a", b"1"), ("a", b"2"), ("nullh", None))),
    Record("", b'{"id": 6', key=b"k6", headers=()),
    Record("", FIVE_MB, key=b"k-5mb", headers=(("size", b"5MB"),)),
]


def _read(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
        .orderBy("partition", "offset")
        .collect()
    )


def test_spark_kafka_source_reads_every_record_byte_for_byte(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]]
) -> None:
    (topic,) = new_topics("awkward")
    produced = produce(
        kafka_broker.bootstrap,
        [Record(topic, r.value, key=r.key, partition=0, headers=r.headers) for r in AWKWARD],
    )
    rows = _read(spark, kafka_broker.bootstrap, topic)

    assert [r["offset"] for r in rows] == list(range(len(AWKWARD)))
    by_offset = {p.offset: p for p in produced}
    for row in rows:
        p = by_offset[row["offset"]]
        assert row["topic"] == topic and row["partition"] == 0
        assert (None if row["key"] is None else bytes(row["key"])) == p.key
        assert (None if row["value"] is None else bytes(row["value"])) == p.value
        got_headers = (
            None if not row["headers"]
            else tuple(
                (h["key"], None if h["value"] is None else bytes(h["value"]))
                for h in row["headers"]
            )
        )
        assert got_headers == p.headers
    # the awkward cases are really there, not normalised away
    assert rows[3]["value"] is None and bytes(rows[2]["value"]) == b""
    assert rows[0]["headers"] is not None and rows[1]["headers"] is None
    assert len(bytes(rows[6]["value"])) == 5 * 1024 * 1024
    assert bytes(rows[6]["value"]) == FIVE_MB


def test_spark_kafka_source_reads_both_partitions_of_a_pattern(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]]
) -> None:
    topics = new_topics("pat-a", "pat-b", partitions=2)
    produce(
        kafka_broker.bootstrap,
        [Record(t, f"{t}-{i}".encode(), partition=i % 2) for t in topics for i in range(10)],
    )
    suffix = topics[0].rsplit("-", 1)[1]
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribePattern", f"pat-[ab]-{suffix}")
        .load()
        .select("topic", "partition", "offset")
        .collect()
    )
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
        (t, p, o) for t in topics for p in (0, 1) for o in range(5)
    )
