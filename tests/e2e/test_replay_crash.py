"""A replay killed (SIGKILL) between its target write and its quarantine close, then run again.

The replay runs as ``python -c`` (the ``quarantine replay`` command) in its own process
group, the Python driver and its Spark JVM. The child is stopped at one exact point:
its ``close_records`` (the quarantine close, the replay's last write) is replaced, in
the child only, by a function that says "target written" in a marker file and waits;
the test then kills the whole group, which is what a lost driver looks like there.
The next replay, in this process, must finish the job: no duplicate target row, every
record closed exactly once (the quarantine table's change feed shows one transition
to ``replayed`` per record), the still-failing records still open.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from tests.helpers import kafka_df, orders_config
from tests.support.crash import write_conf

FIXABLE = 20  # no order_id: fail while it is required, pass once it is not
BROKEN = 5  # not UTF-8: fail for ever
GOOD = 30

#: the child: the replay command, stopped for the kill where its quarantine close would start
CHILD = """
import sys, time
import quarantine.batch.writes as writes
conf, marker = sys.argv[1], sys.argv[2]
def stop_here(*args, **kwargs):
    with open(marker, "w") as f:
        f.write("target written, quarantine not closed")
    time.sleep(3600)
writes.close_records = stop_here
from quarantine.cli import main
sys.exit(main(["replay", "--conf", conf]))
"""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


def test_a_replay_killed_between_its_target_write_and_the_close_is_finished_by_the_next(
    spark: Any, tmp_path: Path
) -> None:
    d = tmp_path / "tables"
    d.mkdir()
    values = ([b'{"order_id": "o-%d", "amount": 1.0}' % i for i in range(GOOD)]
              + [b'{"amount": %d}' % i for i in range(FIXABLE)] + [b"\xff"] * BROKEN)
    kafka_df(spark, values).write.format("delta").save(str(d / "source"))
    raw = orders_config(d)
    first = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert (first.records_ok, first.records_quarantined) == (GOOD, FIXABLE + BROKEN)
    # the fix: order_id is no longer required
    parse = {**raw["stages"][1], "options": {"schema": "order_id STRING, amount DOUBLE"}}
    fixed = {**raw, "stages": [raw["stages"][0], parse]}
    conf = write_conf(fixed, tmp_path / "fixed.yml")

    marker, log = tmp_path / "marker", tmp_path / "child.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "QUARANTINE_SPARK_LOG_LEVEL": "ERROR"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(conf), str(marker)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 600
        while not marker.exists():
            assert proc.poll() is None, f"the replay exited by itself ({proc.returncode}):\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the replay never reached its close:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
    finally:
        _kill_group(proc)

    q_path, t_path = str(d / "quarantine"), str(d / "target")
    quarantine = spark.read.format("delta").load(q_path)
    target = spark.read.format("delta").load(t_path)
    # the kill point: the fixed records are in the target, their quarantine rows still open
    assert target.count() == GOOD + FIXABLE
    assert quarantine.where("status = 'open'").count() == FIXABLE + BROKEN

    again = replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]))
    assert (again.selected, again.replayed, again.still_failing) == (FIXABLE + BROKEN, FIXABLE, BROKEN)

    target = spark.read.format("delta").load(t_path)
    key = ["_source_topic", "_source_partition", "_source_offset"]
    assert target.count() == target.select(*key).distinct().count() == GOOD + FIXABLE  # no duplicate
    quarantine = spark.read.format("delta").load(q_path)
    assert {(r["status"], r["count"]) for r in quarantine.groupBy("status").count().collect()} == {
        ("replayed", FIXABLE), ("open", BROKEN)
    }
    assert {r[0] for r in quarantine.where("status = 'replayed'").select("resolution").collect()} == {
        f"replayed by run {again.report.run.run_id}"
    }
    changes = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(q_path)
        .where((F.col("_change_type") == "update_postimage") & (F.col("status") == "replayed")
               & (F.col("resolved_at").isNotNull()))
    )
    closes = changes.groupBy("topic", "partition", "offset").count().collect()
    # closed exactly once each: one update to replayed per record, by whichever replay, never twice
    assert len(closes) == FIXABLE and {r["count"] for r in closes} == {1}
