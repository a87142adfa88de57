"""Replay: fixed stages let open quarantine rows through once; discard closes rows with a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.errors import QuarantineError
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard, replay
from tests.helpers import kafka_df


def _pipe(spark: Any, d: Path, schema: str) -> Pipeline:
    cfg = {
        "pipeline": "replay_test",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": schema}},
        ],
    }
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[])


def test_replay_after_a_fix_moves_fixed_records_to_the_target_once(spark: Any, table_dir: Path) -> None:
    values = [b'{"id":"1","n":1}', b'{"id":"2","n":2.5}', b'{"id":"3","n":3.5}', b"\xff"]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    _pipe(spark, table_dir, "id STRING, n INT").run()  # 2.5 and 3.5 are not INTs
    q_path = str(table_dir / "quarantine")
    assert spark.read.format("delta").load(q_path).where("status = 'open'").count() == 3

    fixed = _pipe(spark, table_dir, "id STRING, n DOUBLE")  # the fix: n is a DOUBLE
    result = replay(fixed)
    assert (result.selected, result.replayed, result.still_failing) == (3, 2, 1)

    q = {r["offset"]: r for r in spark.read.format("delta").load(q_path).collect()}
    assert q[1]["status"] == q[2]["status"] == "replayed"
    assert q[1]["resolution"].startswith("replayed by run")
    assert q[3]["status"] == "open" and len(q[3]["error_history"]) == 1 and q[3]["error_count"] == 2
    target = spark.read.format("delta").load(str(table_dir / "target"))
    assert sorted(r[0] for r in target.select("id").collect()) == ["1", "2", "3"]

    again = replay(_pipe(spark, table_dir, "id STRING, n DOUBLE"))
    assert (again.selected, again.replayed) == (1, 0)
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 3


def test_discard_needs_a_predicate_and_keeps_the_reason(spark: Any, table_dir: Path) -> None:
    kafka_df(spark, [b"\xff", b"{"]).write.format("delta").save(str(table_dir / "source"))
    pipe = _pipe(spark, table_dir, "id STRING")
    pipe.run()
    with pytest.raises(QuarantineError, match="--where"):
        discard(pipe, " ", "x")
    assert discard(pipe, "stage = 'decode'", "garbage from a test producer") == 1
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    row = q.where(F.col("stage") == "decode").first()
    assert row is not None and row["status"] == "discarded"
    assert row["resolution"] == "discarded: garbage from a test producer"
    assert q.where("status = 'open'").count() == 1
