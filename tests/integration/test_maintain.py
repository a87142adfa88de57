"""``quarantine maintain``: old closed rows go, open rows stay, then OPTIMIZE and VACUUM (issue 13, item 4).

The table is filled by a real pipeline run, a replay and a discard; time moves by
injecting ``now``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.errors import QuarantineError
from quarantine.ops.maintain import maintain
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard, replay
from tests.helpers import kafka_df, orders_config
from tests.support.crash import write_conf

#: decode fails the first, json the second (no order_id) and the fourth; the third is good
VALUES = [b"\xff", b'{"amount": 1.5}', b'{"order_id": "o-1", "amount": 2.0}', b"{"]


def _statuses(spark: Any, d: Path) -> list[str]:
    return sorted(r[0] for r in spark.read.format("delta").load(str(d / "quarantine")).select("status").collect())


def test_maintain_deletes_old_closed_rows_only_and_vacuums_no_shorter_than_delta_allows(
    spark: Any, table_dir: Path, capsys: Any
) -> None:
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    raw = orders_config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    # the fix: order_id is no longer required
    parse = {**raw["stages"][1], "options": {"schema": "order_id STRING, amount DOUBLE"}}
    fixed = {**raw, "stages": [raw["stages"][0], parse]}
    t0 = dt.datetime(2026, 1, 10, tzinfo=dt.UTC)
    assert replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]), now=t0).replayed == 1
    assert discard(Pipeline.from_config(parse_config(raw), spark, listeners=[]), "stage = 'decode'", "x", now=t0) == 1
    assert _statuses(spark, table_dir) == ["discarded", "open", "replayed"]
    config = parse_config(raw)

    young = maintain(spark, config, now=t0 + dt.timedelta(days=29))  # retention: 30 days by default
    assert (young.deleted, young.open_rows, young.vacuum_hours) == (0, 1, 168.0)
    assert _statuses(spark, table_dir) == ["discarded", "open", "replayed"]

    kept = maintain(spark, parse_config({**raw, "errors": {**raw["errors"], "deadletterqueue.retention.days": -1}}),
                    now=t0 + dt.timedelta(days=400))
    assert (kept.deleted, kept.cutoff) == (0, None)

    # the table asks for longer than the config: VACUUM keeps the table's 10 days
    q = str(table_dir / "quarantine")
    spark.sql(f"ALTER TABLE delta.`{q}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 10 days')")
    old = maintain(spark, config, now=t0 + dt.timedelta(days=31))
    assert (old.deleted, old.open_rows, old.vacuum_hours) == (2, 1, 240.0)
    assert _statuses(spark, table_dir) == ["open"]  # open rows are never deleted, however old
    lines = old.render().splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"maintain {q}: deleted 2 replayed/discarded row(s)")
    assert "VACUUM: files removed more than 240 h ago" in lines[2]
    ops = [r[0] for r in spark.sql(f"DESCRIBE HISTORY delta.`{q}`").select("operation").collect()]
    assert {"DELETE", "OPTIMIZE", "VACUUM START", "VACUUM END"} <= set(ops)

    conf = write_conf(raw, table_dir / "p.yml")
    capsys.readouterr()
    assert main(["maintain", "--conf", str(conf)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 3 and "1 open row(s) kept" in out[0]
    assert main(["maintain", "--conf", str(conf), "--set", "errors.deadletterqueue.vacuum.retention.hours=1"]) == 2


def test_maintain_of_a_table_that_does_not_exist_says_so(spark: Any, table_dir: Path) -> None:
    with pytest.raises(QuarantineError, match="does not exist"):
        maintain(spark, parse_config(orders_config(table_dir)))


PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def _tasks_of(spark: Any, group: str, call: Any) -> int:
    """Spark tasks run by ``call()`` (its jobs run in this thread, under job group ``group``)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        call()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = {s for j in tracker.getJobIdsForGroup(group) for s in (tracker.getJobInfo(j) or ()).stageIds}
    return sum(info.numTasks for s in stages if (info := tracker.getStageInfo(s)) is not None)


def test_maintain_of_a_small_table_runs_few_tasks_and_leaves_the_session_as_it_was(
    spark: Any, table_dir: Path
) -> None:
    """Delta's VACUUM lists and groups the table's files in ``parallelPartitionDiscovery.parallelism``
    tasks, 10,000 by Spark's default: ~25 s for a table of a few files on 2 cores."""
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    raw = orders_config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert spark.conf.get(PARALLELISM, None) in (None, "10000")  # the session's own (Spark's default)
    before = spark.conf.get(PARALLELISM, None)
    tasks = _tasks_of(spark, "maintain-default", lambda: maintain(spark, parse_config(raw)))
    assert tasks < 1_000, tasks
    assert spark.conf.get(PARALLELISM, None) == before
    # a session that chose its own listing parallelism keeps it, for the VACUUM and after
    spark.conf.set(PARALLELISM, "3")
    try:
        assert _tasks_of(spark, "maintain-own", lambda: maintain(spark, parse_config(raw))) < 1_000
        assert spark.conf.get(PARALLELISM) == "3"
    finally:
        spark.conf.unset(PARALLELISM)
