"""The streaming runner over a real broker: good + poison, headers and keys, patterns, restarts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.support import (
    KafkaBroker,
    Record,
    kafka_pipeline_conf,
    ledger,
    order_records,
    produce,
)


def _pipeline(spark: Any, raw: dict[str, Any]) -> Pipeline:
    return Pipeline.from_config(parse_config(raw), spark, listeners=[])


def test_available_now_puts_every_record_in_exactly_one_table_with_raw_bytes(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    topics = new_topics("orders", "payments", partitions=2)
    produced = produce(kafka_broker.bootstrap, order_records(topics, 2, 2_000, poison_rate=0.05))
    # the awkward ones, by hand: NULL / empty values, bad UTF-8, binary key and headers
    produced += produce(kafka_broker.bootstrap, [
        Record(topics[0], None, key=b"\x00\xff", partition=0, headers=(("bin", b"\x00\xfe"),)),
        Record(topics[0], b"", key=None, partition=1),
        Record(topics[1], b"\xc3\x28{not utf8", key=b"\xff" * 3, partition=0,
               headers=(("a", b"1"), ("a", None))),
    ])
    raw = kafka_pipeline_conf(
        kafka_broker.bootstrap, tmp_path, topics=topics, max_offsets_per_trigger=700
    )
    summary = _pipeline(spark, raw).run()

    book = ledger(spark, produced, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()
    assert summary.records_in == len(produced)
    assert len(summary.batches) >= 3  # max.offsets.per.trigger split the backlog
    assert book.in_quarantine == summary.records_quarantined > 3
    # the run id is the query id, the same in every quarantine row
    run_ids = {r[0] for r in spark.read.format("delta")
               .load(raw["errors"]["deadletterqueue.table.name"]).select("run_id").distinct().collect()}
    assert run_ids == {summary.run.run_id}


def test_restart_from_checkpoint_reads_only_new_records_and_keeps_the_run_id(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("again", partitions=2)
    raw = kafka_pipeline_conf(kafka_broker.bootstrap, tmp_path, topics=[topic])
    b = kafka_broker.bootstrap
    first = produce(b, order_records([topic], 2, 500, poison_rate=0.1, seed=1))
    s1 = _pipeline(spark, raw).run()
    second = produce(b, order_records([topic], 2, 300, poison_rate=0.1, seed=2))
    s2 = _pipeline(spark, raw).run()
    s3 = _pipeline(spark, raw).run()  # nothing new: no batch, nothing written

    assert (s1.records_in, s2.records_in, s3.records_in) == (500, 300, 0)
    assert s1.run.run_id == s2.run.run_id == s3.run.run_id
    book = ledger(spark, first + second, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()


def test_topic_pattern_subscription_reads_every_matching_topic(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    topics = new_topics("pat-orders-eu", "pat-orders-us", "pat-other", partitions=2)
    suffix = topics[0].rsplit("-", 1)[1]
    produced = produce(kafka_broker.bootstrap, order_records(topics, 2, 900, poison_rate=0.05))
    wanted = [p for p in produced if p.topic != topics[2]]
    raw = kafka_pipeline_conf(
        kafka_broker.bootstrap, tmp_path, topic_pattern=f"pat-orders-[a-z]+-{suffix}"
    )
    summary = _pipeline(spark, raw).run()

    assert summary.records_in == len(wanted) == 600
    book = ledger(spark, wanted, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()


def test_a_new_checkpoint_over_the_same_tables_is_a_new_run_whose_batches_are_written(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    first_topic, second_topic = new_topics("ckpt-a", "ckpt-b")
    b = kafka_broker.bootstrap
    first = produce(b, order_records([first_topic], 1, 300, poison_rate=0.1, seed=3))
    second = produce(b, order_records([second_topic], 1, 200, poison_rate=0.1, seed=4))
    raw = kafka_pipeline_conf(b, tmp_path, topics=[first_topic])
    s1 = _pipeline(spark, raw).run()
    # same target and quarantine, another topic, a fresh checkpoint: batch ids start at 0 again
    raw2 = {**raw, "source": {**raw["source"], "topics": [second_topic]},
            "target": {**raw["target"], "checkpoint": str(tmp_path / "checkpoint-2")}}
    s2 = _pipeline(spark, raw2).run()

    assert s1.run.run_id != s2.run.run_id
    assert [r.batch_id for r in s2.batches] == [0]
    book = ledger(spark, first + second, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()


def _operations(spark: Any, table: str) -> list[str]:
    """The table's commit operations, oldest first."""
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").select("operation").collect()
    return [r[0] for r in hist]


def test_a_stream_appends_quarantine_rows_past_the_tables_offsets_and_merges_before(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("append", partitions=2)
    raw = kafka_pipeline_conf(kafka_broker.bootstrap, tmp_path, topics=[topic], max_offsets_per_trigger=300)
    quarantine = raw["errors"]["deadletterqueue.table.name"]
    first = produce(kafka_broker.bootstrap, order_records([topic], 2, 900, poison_rate=0.1, seed=3))
    s1 = _pipeline(spark, raw).run()
    ops1 = _operations(spark, quarantine)
    # an empty table: every micro-batch's failed rows are new keys, appended without a join
    assert len(s1.batches) >= 3 and "MERGE" not in ops1 and ops1.count("WRITE") >= 2, ops1

    second = produce(kafka_broker.bootstrap, order_records([topic], 2, 900, poison_rate=0.1, seed=4))
    s2 = _pipeline(spark, raw).run()
    ops2 = _operations(spark, quarantine)[len(ops1):]
    # a restarted query MERGEs until it has read past the offsets the table held (its first
    # batch could be one replayed after a crash), then appends again
    assert len(s2.batches) >= 3 and ops2.count("MERGE") <= 1 and "WRITE" in ops2, ops2
    book = ledger(spark, first + second, target=raw["target"]["table"], quarantine=quarantine,
                  pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()
