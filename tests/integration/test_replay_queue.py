"""A declarative pipeline's replay queue (issue 38): the command queues each open record once,
also when it stops between queueing and closing; run and replay refuse the pipeline's tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.declarative.replay_queue import QUEUE_SCHEMA, queue_replay, queue_table
from quarantine.errors import ConfigError, QuarantineError
from quarantine.ops.rebuild import rebuild_target
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from tests.helpers import kafka_df

VALUES = [b'{"id":"1","n":1}', b'{"id":"2","n":2.5}', b'{"id":"3","n":3.5}', b"\xff", None]


def _pipe(spark: Any, d: Path, written_by: str, **errors: Any) -> Pipeline:
    cfg = {
        "pipeline": "queue_test",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target"), "written_by": written_by},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": "id STRING, n INT"}},
        ],
    }
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[])


def test_a_replay_queues_each_open_record_once_also_after_stopping_between_queue_and_close(
    spark: Any, table_dir: Path
) -> None:
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    _pipe(spark, table_dir, "job").run()  # the quarantine table a pipeline would have written
    pipe = _pipe(spark, table_dir, "pipeline")
    q_path, queue = str(table_dir / "quarantine"), queue_table(pipe.config)
    assert queue == q_path + "_replay"

    first = queue_replay(pipe, "stage = 'parse'")
    assert (first.selected, first.queued) == (2, 2)
    queued = spark.read.format("delta").load(queue)
    assert queued.schema.names == QUEUE_SCHEMA.names
    source = spark.read.format("delta").load(str(table_dir / "source"))
    joined = queued.alias("r").join(source.alias("s"), ["topic", "partition", "offset"])
    assert joined.where("r.key <=> s.key AND r.value <=> s.value AND r.headers <=> s.headers").count() == 2
    q = spark.read.format("delta").load(q_path)
    assert q.where("status = 'replayed' AND resolution LIKE 'queued for the pipeline%'").count() == 2
    assert q.where("status = 'open'").count() == 2  # decode's two (\xff and NULL): not selected

    # as if the command had stopped after queueing, before closing: the rows are open again
    spark.sql(f"UPDATE delta.`{q_path}` SET status = 'open', resolved_at = NULL, resolution = NULL "
              "WHERE status = 'replayed'")
    again = queue_replay(pipe, "stage = 'parse'")
    assert (again.selected, again.queued) == (2, 0)  # queued already: nothing added, closed now
    assert spark.read.format("delta").load(queue).count() == 2
    assert spark.read.format("delta").load(q_path).where("status = 'open'").count() == 2

    nothing = queue_replay(pipe, "stage = 'parse'")
    assert (nothing.selected, nothing.queued) == (0, 0)
    everything = queue_replay(pipe)
    assert (everything.selected, everything.queued) == (2, 2)
    assert spark.read.format("delta").load(queue).where(F.col("value").isNull()).count() == 1  # NULL kept


def test_run_replay_and_rebuild_refuse_a_declarative_pipelines_tables(spark: Any, table_dir: Path) -> None:
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    pipe = _pipe(spark, table_dir, "pipeline")
    for call in (pipe.run, lambda: replay(pipe), lambda: rebuild_target(pipe)):
        with pytest.raises(ConfigError, match=r"'target\.written_by'.*declarative pipeline's"):
            call()
    assert not (table_dir / "target").exists() and not (table_dir / "quarantine").exists()  # nothing written


def test_a_replay_queue_refuses_records_kept_encrypted_before_it_writes(
    spark: Any, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline's replay flow reads its queue as the source's bytes: encrypted ones would fail every stage."""
    monkeypatch.setenv("QUEUE_KEY", "q" * 32)
    encrypted = {"deadletterqueue.encryption.key": "env:QUEUE_KEY", "deadletterqueue.encryption.key.id": "q1"}
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    _pipe(spark, table_dir, "job", **encrypted).run()
    q_path = str(table_dir / "quarantine")
    before = spark.read.format("delta").load(q_path).where("status = 'open'").count()
    with pytest.raises(QuarantineError, match="refused, nothing was written: 2 of the 2 selected record"):
        queue_replay(_pipe(spark, table_dir, "pipeline", **encrypted), "stage = 'parse'")
    assert spark.read.format("delta").load(q_path).where("status = 'open'").count() == before
    assert not (table_dir / "quarantine_replay").exists()
