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


def _each_in_one_place(spark: Any, raw: dict[str, Any], produced: list[ProducedRecord]) -> list[Any]:
    """Assert every produced record is in exactly one of target and quarantine, once; the quarantine rows."""
    t_path, q_path = raw["target"]["table"], raw["errors"]["deadletterqueue.table.name"]
    in_target = [(r["_source_offset"], r["order_id"], float(r["amount"]))
                 for r in spark.read.format("delta").load(t_path).collect()]
    quarantine = spark.read.format("delta").load(q_path).collect()
    in_quarantine = [(r["offset"], bytes(r["value"] or b"")) for r in quarantine]
    assert len(set(in_target)) == len(in_target) and len(set(in_quarantine)) == len(in_quarantine)
    for p in produced:
        good = _good(p)
        t = good is not None and good in in_target
        q = (p.offset, p.value or b"") in in_quarantine
        assert t != q, f"offset {p.offset} value {p.value!r}: in target {t}, in quarantine {q}"
    assert len(in_target) + len(in_quarantine) == len(produced)
    return quarantine


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
    q_path = raw["errors"]["deadletterqueue.table.name"]
    before = {(r["offset"], bytes(r["value"] or b"")): r.asDict() for r in spark.read.format("delta").load(q_path)
              .collect()}
    with pytest.raises(StreamFailedError, match=r"new checkpoint \(target\.checkpoint\)"):
        _run(spark, raw)  # the same checkpoint: Spark's Kafka source stops, and we say why

    fresh = {**raw, "target": {**raw["target"], "checkpoint": str(tmp_path / "checkpoint-after-recreate")}}
    assert _run(spark, fresh).records_in == 30

    quarantine = _each_in_one_place(spark, raw, old + new)
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


def test_a_topic_recreated_under_a_running_query_stops_it_with_what_to_do_and_a_new_checkpoint_loses_nothing(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    """The topic is deleted and recreated while the query runs (a ``processing_time`` trigger):
    Spark's Kafka source stops the query; the error says to use a new checkpoint, which then
    reads the new topic from offset 0 and every record of both generations is in one place."""
    import threading
    import time

    from quarantine.runners.streaming import run_stream

    (topic,) = new_topics("recreated-running")
    b = kafka_broker.bootstrap
    raw = kafka_pipeline_conf(b, tmp_path, topics=[topic], processing_time="1 second")
    old = produce(b, order_records([topic], 1, 40, poison_rate=0.1, seed=4))
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])
    outcome: dict[str, Any] = {}

    def stream() -> None:
        try:
            outcome["summary"] = run_stream(pipe, max_duration_s=240)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    q_path, t_path = raw["errors"]["deadletterqueue.table.name"], raw["target"]["table"]

    def settled() -> int:
        try:
            return sum(spark.read.format("delta").load(p).count() for p in (q_path, t_path))
        except Exception:
            return 0

    deadline = time.monotonic() + 120
    while settled() < len(old) and time.monotonic() < deadline:
        time.sleep(1)
    assert settled() == len(old), "the running query did not settle the first generation"
    recreate_topic(b, topic, 1)
    new = produce(b, order_records([topic], 1, 20, poison_rate=0.2, seed=5))  # offsets 0..19 again
    thread.join(timeout=200)
    assert not thread.is_alive(), "the query kept running over a recreated topic"
    assert isinstance(outcome.get("error"), StreamFailedError), outcome
    assert "new checkpoint (target.checkpoint)" in str(outcome["error"])

    fresh = {**raw, "trigger": "available_now",
             "target": {**raw["target"], "checkpoint": str(tmp_path / "checkpoint-after-recreate")}}
    assert _run(spark, fresh).records_in == len(new)
    _each_in_one_place(spark, raw, old + new)


def test_a_stream_from_a_new_checkpoint_over_a_settled_topic_writes_no_record_twice(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    """A checkpoint deleted or replaced (a reset every Databricks team does) restarts the query at
    batch 0 from the earliest offsets: records already in the target are left out, open records
    run again into their own rows, a discarded one stays discarded, and new records are written once."""
    from quarantine.runners.replay import discard

    (topic,) = new_topics("new-checkpoint")
    b = kafka_broker.bootstrap
    raw = kafka_pipeline_conf(b, tmp_path, topics=[topic])
    first = produce(b, order_records([topic], 1, 50, poison_rate=0.2, seed=6))
    assert _run(spark, raw).records_in == 50
    q_path, t_path = raw["errors"]["deadletterqueue.table.name"], raw["target"]["table"]
    target_before = spark.read.format("delta").load(t_path).count()
    quarantined = sorted(r["offset"] for r in spark.read.format("delta").load(q_path).collect())
    assert target_before + len(quarantined) == 50 and len(quarantined) >= 2
    discard(Pipeline.from_config(parse_config(raw), spark, listeners=[]), f"offset = {quarantined[0]}", reason="test")
    more = produce(b, order_records([topic], 1, 10, poison_rate=0.0, seed=7))  # offsets 50..59

    fresh = {**raw, "target": {**raw["target"], "checkpoint": str(tmp_path / "checkpoint-reset")}}
    summary = _run(spark, fresh)
    target = spark.read.format("delta").load(t_path).collect()
    offsets = [r["_source_offset"] for r in target]
    assert len(offsets) == len(set(offsets)) == target_before + len(more), "a record was written to the target twice"
    rows = spark.read.format("delta").load(q_path).collect()
    assert sorted(r["offset"] for r in rows) == quarantined  # one row each, none added
    status = {r["offset"]: (r["status"], r["error_count"]) for r in rows}
    assert status[quarantined[0]] == ("discarded", 1)
    assert all(status[o] == ("open", 2) for o in quarantined[1:])  # ran again, into their own rows
    assert summary.records_ok == len(more) and summary.records_quarantined == len(quarantined) - 1
    assert len(first) + len(more) == len(offsets) + len(rows)
