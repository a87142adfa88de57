"""Table writes under the retry policy.

Concurrent writers to one quarantine table lose nothing; a quarantine table
that cannot be written fails the batch. The target write is made at the same
time as the quarantine write (quarantine.batch.run): it may commit, once, and a re-run
adds nothing to it.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable

from quarantine.config import parse_config
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import ConfigError, QuarantineWriteError
from quarantine.pipeline import Pipeline
from quarantine.sinks.quarantine import ensure_quarantine_table
from quarantine.tables import table_exists
from tests.helpers import kafka_df
from tests.support.drivers import DriverPool, Job

SCHEMA = "order_id STRING, amount DOUBLE"
GOOD = b'{"order_id":"a","amount":1.5}'
BAD = b'{"order_id":"c"'


class RetryLog:
    """Counts write retries (the operator's on_retry hook)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.retries: list[tuple[str, int, str]] = []  # (operation, retry number, error text)

    def __call__(self, name: str, n: int, exc: BaseException, delay_ms: float) -> None:
        with self.lock:
            self.retries.append((name, n, f"{type(exc).__name__}: {exc}"))


def _pipeline(
    spark: Any, d: Path, name: str, retry_log: RetryLog | None = None, **errors: Any
) -> Pipeline:
    raw = {
        "pipeline": name,
        "source": {"format": "delta", "path": str(d / f"{name}_source")},
        "target": {"table": str(d / f"{name}_target")},
        "errors": {
            "tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"),
            "retry.initial.backoff.ms": 50, "retry.delay.max.ms": 500, **errors,
        },
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": SCHEMA}},
        ],
    }
    cfg = parse_config(raw)
    pipe = Pipeline.from_config(cfg, spark, listeners=[])
    pipe.write_retry = RetryWithToleranceOperator.for_writes(cfg.errors, on_retry=retry_log)
    return pipe


# Each writer is its own process (its own Spark driver), as two pipeline jobs are: the
# child drivers of tests.support.drivers, started once per test worker and reused.
# (Threads sharing one local session are not used: Py4J threads fail to load
# Delta's classes from spark.jars — NoClassDefFoundError — see the report.)
_WRITER = """
import json, sys, time
from pathlib import Path
from quarantine.spark.session import get_spark
from tests.helpers import kafka_df
from tests.integration.test_retry_writes import BAD, GOOD, RetryLog, _pipeline

d, name, other, batches = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
spark = get_spark(name, {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g",
                          "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2"})
retry_log = RetryLog()
pipe = _pipeline(spark, d, name, retry_log)
run = pipe.start_run()
frames = [kafka_df(spark, [BAD, GOOD, BAD, BAD, GOOD], start_offset=100 * b) for b in range(batches)]
(d / f"{name}.ready").touch()
deadline = time.monotonic() + 600
while not (d / f"{other}.ready").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
for b, df in enumerate(frames):
    run.process_batch(df, b)
print("RESULT " + json.dumps([text[:4000] for _, _, text in retry_log.retries]))
"""


def _root_cause(stderr: str) -> str:
    """The Python frames and exception lines of a writer's stderr, not the JVM frames that bury them."""
    lines = [ln for ln in stderr.splitlines() if not ln.lstrip().startswith("at ")]
    return "\n".join(lines[-80:])


def test_two_pipelines_writing_one_quarantine_table_at_once_lose_nothing(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    batches = 4
    names = (("p1", "p2"), ("p2", "p1"))
    done = child_drivers.run_at_once(
        [Job(_WRITER, (table_dir, name, other, batches)) for name, other in names], timeout_s=1200
    )
    retries: list[str] = []
    for (name, _), result in zip(names, done, strict=True):
        assert result.returncode == 0, f"writer {name} failed:\n{_root_cause(result.stderr)}"
        line = next(ln for ln in result.stdout.splitlines() if ln.startswith("RESULT "))
        retries += json.loads(line[len("RESULT "):])

    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    got = {(r["pipeline"], r["offset"]) for r in q.select("pipeline", "offset").collect()}
    expected = {(f"p{i}", 100 * b + o) for i in (1, 2) for b in range(batches) for o in (0, 2, 3)}
    assert got == expected
    assert q.count() == len(expected)  # one row per record per pipeline, none twice
    for i in (1, 2):
        t = spark.read.format("delta").load(str(table_dir / f"p{i}_target"))
        offsets = {r[0] for r in t.select("_source_offset").collect()}
        assert offsets == {100 * b + o for b in range(batches) for o in (1, 4)}
    # every retry (the writers collide: a MERGE reads the whole table) was a Delta
    # commit conflict or one of the two first-creation races
    # (quarantine.errorhandling.retriable.is_table_creation_race), never anything else
    expected_kinds = (
        "Concurrent", "Protocol", "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", "TABLE_OR_VIEW_ALREADY_EXISTS",
    )
    other = [text for text in retries if not any(m in text for m in expected_kinds)]
    assert not other, other
    print(f"write retries observed: {len(retries)}")


def _commit_elsewhere_into(src: Path, dest: Path) -> None:
    """Another writer's first commit landing in ``dest`` (its log and data files, copied)."""
    for f in (src / "_delta_log").iterdir():
        if f.is_file():
            shutil.copy(f, dest / "_delta_log")
    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, dest)


def test_a_table_another_writer_created_while_this_process_watched_is_seen_and_not_recreated(
    spark: Any, table_dir: Path
) -> None:
    # The creation race, made deterministic: this process looks at the location while the
    # other writer has made its _delta_log but not committed; then the commit lands.
    name = table_dir / "quarantine"
    (name / "_delta_log").mkdir(parents=True)
    assert not table_exists(spark, str(name))
    other = table_dir / "other_writer"
    assert ensure_quarantine_table(spark, str(other)) is True
    _commit_elsewhere_into(other, name)
    # Delta's isDeltaTable still answers from the snapshot cached mid-creation ...
    assert DeltaTable.isDeltaTable(spark, str(name)) is False
    # ... table_exists does not, and the table is not "created" a second time: a True here
    # would let the first write append without its MERGE.
    assert table_exists(spark, str(name))
    assert ensure_quarantine_table(spark, str(name)) is False
    assert ensure_quarantine_table(spark, str(other)) is False


def _unwritable_quarantine_table(spark: Any, path: Path) -> None:
    """A Delta table with the quarantine key, whose ``value`` column a quarantine row cannot fill."""
    spark.createDataFrame(
        [("other", "t", 0, 0, "open", 1)],
        "pipeline STRING, topic STRING, partition INT, offset BIGINT, status STRING, value INT",
    ).write.format("delta").save(str(path))


def test_a_quarantine_write_that_still_fails_after_retries_fails_the_batch(
    spark: Any, table_dir: Path
) -> None:
    # the quarantine table has the key (so the batch reads it) but a `value` MERGE cannot write
    _unwritable_quarantine_table(spark, table_dir / "quarantine")
    retry_log = RetryLog()
    pipe = _pipeline(
        spark, table_dir, "p1", retry_log,
        # treat every JVM-side failure as retriable (how PySpark surfaces the MERGE's
        # analysis error depends on the session: AnalysisException or Py4JJavaError)
        **{
            "retry.timeout": 20000,
            "retry.retriable.exceptions": ["AnalysisException", "Py4JJavaError"],
        },
    )
    run = pipe.start_run()
    with pytest.raises(QuarantineWriteError) as info:
        run.process_batch(kafka_df(spark, [GOOD, BAD, GOOD]), 0)
    msg = str(info.value)
    # names the write, the table and the batch; the advice follows Delta's reason (a schema here)
    assert f"quarantine MERGE into {table_dir / 'quarantine'} failed in batch 0" in msg and "ALTER TABLE" in msg
    # retried (one attempt takes seconds on a busy local Spark) until the 20 s budget ran out
    assert len(retry_log.retries) >= 1, msg
    assert f"{len(retry_log.retries) + 1} attempt(s)" in msg
    assert spark.read.format("delta").load(str(table_dir / "quarantine")).count() == 1
    # the target write, made at the same time, committed the good rows once
    assert spark.read.format("delta").load(str(table_dir / "p1_target")).count() == 2


def test_a_non_retriable_quarantine_failure_fails_at_once(spark: Any, table_dir: Path) -> None:
    _unwritable_quarantine_table(spark, table_dir / "quarantine")
    retry_log = RetryLog()
    pipe = _pipeline(spark, table_dir, "p1", retry_log, **{"retry.timeout": 5000})
    run = pipe.start_run()
    with pytest.raises(QuarantineWriteError, match="cannot cast") as info:
        run.process_batch(kafka_df(spark, [GOOD, BAD]), 0)
    assert info.value.attempts == 1 and retry_log.retries == []
    # the target write, made at the same time, committed the good row once; running the
    # batch again fails the same way and adds nothing to the target
    target = str(table_dir / "p1_target")
    assert spark.read.format("delta").load(target).count() == 1
    with pytest.raises(QuarantineWriteError, match="cannot cast"):
        pipe.start_run().process_batch(kafka_df(spark, [GOOD, BAD]), 0)
    assert spark.read.format("delta").load(target).count() == 1


def test_a_quarantine_table_name_that_is_not_a_quarantine_table_is_named_before_any_write(
    spark: Any, table_dir: Path
) -> None:
    spark.createDataFrame([(1,)], "x INT").write.format("delta").save(str(table_dir / "quarantine"))
    pipe = _pipeline(spark, table_dir, "p1")
    run = pipe.start_run()
    with pytest.raises(ConfigError) as info:
        run.process_batch(kafka_df(spark, [GOOD, BAD]), 0)
    msg = str(info.value)
    assert "errors.deadletterqueue.table.name" in msg and "without pipeline, topic, partition, offset, status" in msg
    assert "(its columns: x)" in msg
    assert not table_exists(spark, str(table_dir / "p1_target"))
    assert spark.read.format("delta").load(str(table_dir / "quarantine")).columns == ["x"]
