"""A Kafka topic deleted and recreated under a pipeline, on the real broker (issue 34, defect 1).

The recreated topic's offsets start at 0 again with other records. Restarted from
its checkpoint, Spark's Kafka source stops (``failOnDataLoss``): the error says
what happened and what to do. From a new checkpoint the new records are read from
the start: each lands in a row of its own (its content's fingerprint tells it from
the old record at the same offset), and nothing the first topic settled changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.streaming import StreamFailedError
from tests.support import KafkaBroker, ProducedRecord, kafka_pipeline_conf, order_records, produce, recreate_topic


def _run(spark: Any, raw: dict[str, Any]) -> Any:
    return Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()


def _good(p: ProducedRecord) -> tuple[int, str, float] | None:
    """(offset, order_id, amount) of a record the stages pass, else None."""
    try:
        doc = json.loads((p.value or b"").decode("utf-8"))
        return (p.offset, doc["order_id"], float(doc["amount"]))
    except Exception:
        return None


def test_a_recreated_topic_loses_nothing_and_a_stale_checkpoint_says_what_to_do(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("recreated")
    b = kafka_broker.bootstrap
    raw = kafka_pipeline_conf(b, tmp_path, topics=[topic])
    old = produce(b, order_records([topic], 1, 60, poison_rate=0.1, seed=1))
    assert _run(spark, raw).records_in == 60

    recreate_topic(b, topic, 1)
    new = produce(b, order_records([topic], 1, 30, poison_rate=0.2, seed=2))  # offsets 0..29 again
    q_path, t_path = raw["errors"]["deadletterqueue.table.name"], raw["target"]["table"]
    before = {(r["offset"], bytes(r["value"] or b"")): r.asDict() for r in spark.read.format("delta").load(q_path)
              .collect()}
    with pytest.raises(StreamFailedError, match=r"new checkpoint \(target\.checkpoint\)"):
        _run(spark, raw)  # the same checkpoint: Spark's Kafka source stops, and we say why

    fresh = {**raw, "target": {**raw["target"], "checkpoint": str(tmp_path / "checkpoint-after-recreate")}}
    assert _run(spark, fresh).records_in == 30

    target = spark.read.format("delta").load(t_path)
    in_target = [(r["_source_offset"], r["order_id"], float(r["amount"])) for r in target.collect()]
    quarantine = spark.read.format("delta").load(q_path).collect()
    in_quarantine = [(r["offset"], bytes(r["value"] or b"")) for r in quarantine]
    assert len(set(in_target)) == len(in_target) and len(set(in_quarantine)) == len(in_quarantine)
    for p in old + new:
        good = _good(p)
        t = good is not None and good in in_target
        q = (p.offset, p.value or b"") in in_quarantine
        assert t != q, f"offset {p.offset} value {p.value!r}: in target {t}, in quarantine {q}"
    assert len(in_target) + len(in_quarantine) == len(old) + len(new)
    # the old topic's quarantine rows are as they were
    for r in quarantine:
        key = (r["offset"], bytes(r["value"] or b""))
        if key in before:
            assert (r["error_class"], r["status"], r["error_count"]) == (
                before[key]["error_class"], before[key]["status"], before[key]["error_count"])


def test_a_second_stream_writing_a_topic_another_pipeline_writes_into_one_target_is_refused_at_start(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    from quarantine.errors import TablesDisagreeError

    (topic,) = new_topics("owned")
    b = kafka_broker.bootstrap
    produce(b, order_records([topic], 1, 20, poison_rate=0.1, seed=3))
    first = kafka_pipeline_conf(b, tmp_path, topics=[topic], pipeline="stream_a")
    assert _run(spark, first).records_in == 20  # creates the target and records stream_a as the topic's writer
    second = kafka_pipeline_conf(b, tmp_path, topics=[topic], pipeline="stream_b")
    second["target"]["checkpoint"] = str(tmp_path / "checkpoint-b")
    versions = len(spark.sql(f"DESCRIBE HISTORY delta.`{first['target']['table']}`").collect())
    with pytest.raises(TablesDisagreeError, match=f"pipeline stream_b would write topic {topic} .* stream_a"):
        _run(spark, second)
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{first['target']['table']}`").collect()) == versions
