"""Storage faults end a ``quarantine run`` with one line in words, not Spark's stack (issue 52, G).

A job's principal without write access to a table's folder, and a commit file cut
mid-JSON, are faults of storage, not of records. The ``run`` command (a process, as users
start it, without ``--verbose`` and without ``QUARANTINE_SPARK_LOG_LEVEL``) must end with
one line naming the cause, the table and the path, print no Java stack (Spark's own ERROR
lines included), commit no offsets, and leave the tables so that the re-run after the
fault is fixed reconciles: every record in exactly one table.

The tests run as root, which ignores permission bits; a folder is made unwritable with
``chattr +i`` (the immutable attribute: even root may not create a file in it, and the
JVM's ``open`` fails as it does for a principal without write access). Three faults,
one ``run`` process each: the target folder, the quarantine table's ``_delta_log``, the
quarantine table's last commit file torn.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.helpers import kafka_df, orders_config
from tests.support.crash import write_conf
from tests.support.quiet import OWN_LOG_LINE

#: A Java stack, or Py4J's exception, anywhere in a command's output.
_STACK = ("at org.apache", "Py4JJavaError", "\tat ", "Caused by:", "py4j.protocol")


@contextlib.contextmanager
def _immutable(folder: Path) -> Iterator[None]:
    """``folder`` unwritable, for root too (``chattr +i``), until the block ends."""
    subprocess.run(["chattr", "+i", str(folder)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def _run(conf: Path) -> subprocess.CompletedProcess[str]:
    """``quarantine run --conf`` as a user runs it: no ``--verbose``, no log level set."""
    env = {k: v for k, v in os.environ.items() if k != "QUARANTINE_SPARK_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", "quarantine.cli", "run", "--conf", str(conf)],
                          capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The command's last line (its error goes to stderr, after everything it printed)."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    stack = [s for s in _STACK if s in proc.stdout or s in proc.stderr]
    assert not stack, (stack, proc.stderr[-3000:])
    *before, last = proc.stderr.strip().splitlines()
    foreign = [line for line in before if not OWN_LOG_LINE.match(line)]  # the progress lines are ours
    assert not foreign, foreign[:20]
    return last


def _versions(spark: Any, *tables: Path) -> list[int]:
    return [spark.sql(f"DESCRIBE HISTORY delta.`{t}` LIMIT 1").first()["version"] for t in tables]


def test_storage_faults_end_with_one_line_naming_the_cause_table_and_path_and_commit_nothing(
    spark: Any, tmp_path: Path
) -> None:
    d = tmp_path
    good = [b'{"order_id": "o-%d", "amount": 1.0}' % i for i in range(6)]
    kafka_df(spark, [*good, b"\xff", b'{"amount": 2}']).write.format("delta").save(str(d / "source"))
    raw = orders_config(d, "storage_faults")
    first = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert (first.records_ok, first.records_quarantined) == (6, 2)
    more = [b'{"order_id": "n-%d", "amount": 3.0}' % i for i in range(4)] + [b"\xfe", b"{"]
    kafka_df(spark, more, start_offset=8).write.format("delta").mode("append").save(str(d / "source"))
    conf = write_conf(raw, d / "faults.yml")
    target, quarantine = d / "target", d / "quarantine"

    # The faulty table gets no commit; the batch's offsets are not committed either, so a
    # table written before the fault (the target, before the quarantine) is written again
    # by the re-run without a duplicate (its MERGE is idempotent): checked at the end.
    before = _versions(spark, target)
    with _immutable(target):  # the target's folder: the MERGE's data files cannot be created
        ran = _run(conf)
    line = _last_line(ran)
    assert f"permission denied writing table target at {target}/" in line, line
    assert _versions(spark, target) == before

    before = _versions(spark, quarantine)
    with _immutable(quarantine / "_delta_log"):  # the quarantine table's log: no commit can be made
        ran = _run(conf)
    line = _last_line(ran)
    assert f"permission denied writing table quarantine at {quarantine}/_delta_log" in line, line
    assert _versions(spark, quarantine) == before

    before = _versions(spark, target, quarantine)
    version = before[1]
    commit = quarantine / "_delta_log" / f"{version:020d}.json"
    whole = commit.read_bytes()
    commit.write_bytes(whole[: len(whole) // 2])  # a commit file cut mid-JSON
    try:
        ran = _run(conf)
    finally:
        commit.write_bytes(whole)
    line = _last_line(ran)
    assert (f"the commit file {commit} of the quarantine table at {quarantine} (version {version}) is damaged"
            in line), line
    assert _versions(spark, target, quarantine) == before

    # the faults fixed, the re-run reconciles: every record in exactly one table
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    coords = ("topic", "partition", "offset")
    in_target = [tuple(r) for r in spark.read.format("delta").load(str(target))
                 .select("_source_topic", "_source_partition", "_source_offset").collect()]
    in_quarantine = [tuple(r) for r in spark.read.format("delta").load(str(quarantine)).select(*coords).collect()]
    source = {tuple(r) for r in spark.read.format("delta").load(str(d / "source")).select(*coords).collect()}
    assert len(in_target) == len(set(in_target)) == 10 and len(in_quarantine) == len(set(in_quarantine)) == 4
    assert set(in_target).isdisjoint(in_quarantine) and set(in_target) | set(in_quarantine) == source
