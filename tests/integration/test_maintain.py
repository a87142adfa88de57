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


def test_maintain_strips_old_closed_rows_only_and_vacuums_no_shorter_than_delta_allows(
    spark: Any, table_dir: Path, capsys: Any
) -> None:
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "source"))
    raw = orders_config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    # the fix: order_id is no longer required
    parse = {**raw["stages"][1], "options": {"schema": "order_id STRING, amount DOUBLE"}}
    fixed = {**raw, "stages": [raw["stages"][0], parse]}
    t0 = dt.datetime.now(dt.UTC)  # the commits' clock: maintain strips rows committed before its cutoff
    assert replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]), now=t0).replayed == 1
    assert discard(Pipeline.from_config(parse_config(raw), spark, listeners=[]), "stage = 'decode'", "x", now=t0) == 1
    assert _statuses(spark, table_dir) == ["discarded", "open", "replayed"]
    config = parse_config(raw)

    young = maintain(spark, config, now=t0 + dt.timedelta(days=29))  # retention: 30 days by default
    assert (young.stripped, young.open_rows, young.vacuum_hours) == (0, 1, 168.0)
    assert _statuses(spark, table_dir) == ["discarded", "open", "replayed"]

    kept = maintain(spark, parse_config({**raw, "errors": {**raw["errors"], "deadletterqueue.retention.days": -1}}),
                    now=t0 + dt.timedelta(days=400))
    assert (kept.stripped, kept.cutoff) == (0, None)

    # the table asks for longer than the config: VACUUM keeps the table's 10 days
    q = str(table_dir / "quarantine")
    spark.sql(f"ALTER TABLE delta.`{q}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 10 days')")
    old = maintain(spark, config, now=t0 + dt.timedelta(days=31))
    assert (old.stripped, old.open_rows, old.vacuum_hours) == (2, 1, 240.0)
    assert _statuses(spark, table_dir) == ["discarded", "open", "replayed"]  # stripped rows stay
    whole = spark.read.format("delta").load(q).where("value IS NOT NULL").select("status").collect()
    assert [r[0] for r in whole] == ["open"]  # open rows are never stripped, however old
    lines = old.render().splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"maintain {q}: stripped 2 replayed/discarded row(s)")
    assert "VACUUM: files removed more than 240 h ago" in lines[2]
    ops = [r[0] for r in spark.sql(f"DESCRIBE HISTORY delta.`{q}`").select("operation").collect()]
    assert {"MERGE", "OPTIMIZE", "VACUUM START", "VACUUM END"} <= set(ops)

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


def test_retention_keeps_what_was_settled_so_a_batch_rerun_leaves_closed_records_out(
    spark: Any, table_dir: Path, capsys: Any
) -> None:
    """Issue 52, E: ``discard`` 4 records, ``maintain`` after the retention period, run the batch again.

    The source still holds the 4 records: retention drops their bytes and messages, never
    the fact that they were settled, so the re-run leaves them out (none opens again), and
    every command and query over the table still reads the kept rows.
    """
    values = [b"\xff", b"{", b'{"amount": 1}', b"\xfe"]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    raw = {**orders_config(table_dir), "metrics": {"table": str(table_dir / "metrics")}}
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert discard(Pipeline.from_config(parse_config(raw), spark, listeners=[]), "true", "x") == 4
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=31)  # retention: 30 days by default
    assert maintain(spark, parse_config(raw), now=later).stripped == 4

    # the whole source again (a plain re-run reads only what is new): closed records are still left out
    Pipeline.from_config(parse_config(raw), spark).run(full=True)  # its listeners write the metrics table
    assert _statuses(spark, table_dir) == ["discarded"] * 4  # closed stays closed
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 0
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    kept = q.where("key IS NULL AND value IS NULL AND headers IS NULL AND message IS NULL AND stacktrace IS NULL "
                   "AND size(error_history) = 1 AND error_history[0].message IS NULL AND fingerprint IS NOT NULL")
    assert kept.count() == 4 and q.count() == 4
    assert maintain(spark, parse_config(raw), now=later).stripped == 0  # a kept row is stripped once

    conf = str(write_conf(raw, table_dir / "p.yml"))
    page = str(table_dir / "r.html")
    for args in (["inspect", "--conf", conf, "--status", "all"], ["stats", "--conf", conf],
                 ["replay", "--conf", conf, "--dry-run"], ["report", "--conf", conf, "--out", page],
                 *[["sql", name, "--conf", conf] for name in ("error_rate", "offset_ranges", "open_records",
                                                           "resolution_history", "stuck_records", "top_errors")]):
        assert main(args) == 0, args


def test_maintain_trusts_the_commit_clock_and_counts_rows_resolved_in_the_future(spark: Any, table_dir: Path) -> None:
    """Issue 52, F: two rows closed seconds ago by writers whose clocks are 10 years off.

    The one stamped 10 years back is kept (the commit that closed it is seconds old by the
    table's clock); the one stamped 10 years ahead is kept and counted in the summary.
    """
    kafka_df(spark, [b"\xff", b"{"]).write.format("delta").save(str(table_dir / "source"))
    raw = orders_config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    now = dt.datetime.now(dt.UTC)
    for offset, at in ((0, now - dt.timedelta(days=3650)), (1, now + dt.timedelta(days=3650))):
        pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])
        assert discard(pipe, f"offset = {offset}", "x", now=at) == 1
    done = maintain(spark, parse_config(raw))
    assert (done.stripped, done.recent_rows, done.future_rows) == (0, 1, 1)
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert q.where("value IS NOT NULL AND message IS NOT NULL").count() == 2
    line = done.render().splitlines()[0]
    assert "1 closed row(s) resolved in the future kept" in line
    assert "1 closed row(s) stamped before the cutoff but committed after it kept" in line
