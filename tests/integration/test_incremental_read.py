"""A batch run reads what its Delta source committed since the last run, and the whole source when it must.

Each test runs real batch runs on real Delta tables and checks both what the run read (its
summary's ``source:`` line and records in) and that every record still lands in exactly one
table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from quarantine.batch.increment import MARK_PREFIX
from quarantine.config import parse_config
from quarantine.listeners.events import RunSummary
from quarantine.pipeline import Pipeline
from tests.helpers import kafka_df, orders_config

GOOD = b'{"order_id":"%d","amount":1.5}'


def _append(spark: Any, d: Path, values: list[bytes | None], start: int, **kw: Any) -> None:
    kafka_df(spark, values, start_offset=start, **kw).write.format("delta").mode("append").save(str(d / "source"))


def _run(spark: Any, d: Path, *, full: bool = False, **config: Any) -> RunSummary:
    cfg = orders_config(d)
    cfg.update(config)
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[]).run(full=full)


def _source_line(summary: RunSummary) -> str:
    return next(n for n in summary.notes if n.startswith("source:"))


def _settled_once(spark: Any, d: Path, offsets: int) -> None:
    target = [r[0] for r in spark.read.format("delta").load(str(d / "target")).select("_source_offset").collect()]
    q_path = d / "quarantine"
    held = (
        [r[0] for r in spark.read.format("delta").load(str(q_path)).select("offset").collect()]
        if (q_path / "_delta_log").exists() else []
    )
    assert sorted(target + held) == list(range(offsets)), "each record in exactly one table, once"


def test_a_second_run_reads_only_what_was_committed_since_the_first(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % i for i in range(5)] + [b"\xff"], 0)
    first = _run(spark, table_dir)
    assert first.records_in == 6 and "read whole" in _source_line(first)
    assert "no earlier run's read is recorded" in _source_line(first)

    _append(spark, table_dir, [GOOD % i for i in range(6, 9)] + [b"{"], 6)
    second = _run(spark, table_dir)
    assert (second.records_in, second.records_ok, second.records_quarantined) == (4, 3, 1)
    assert second.reopened == 0, "the record open since the first run is not run again"
    assert "read what versions" in _source_line(second)
    _settled_once(spark, table_dir, 10)

    third = _run(spark, table_dir)
    assert third.batches == () and third.records_in == 0
    assert _source_line(third).startswith("source: nothing new since version")
    _settled_once(spark, table_dir, 10)


def test_the_mark_is_a_target_property_naming_the_source_version(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % i for i in range(3)], 0)
    _run(spark, table_dir)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{table_dir / 'target'}`").collect()}
    mark = json.loads(props[MARK_PREFIX + "orders_test"])
    assert mark["version"] == 0 and mark["source"] == str(table_dir / "source")


def test_an_overwrite_or_delete_of_the_source_reads_it_whole(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % i for i in range(4)], 0)
    _run(spark, table_dir)
    spark.sql(f"DELETE FROM delta.`{table_dir / 'source'}` WHERE offset = 3")
    _append(spark, table_dir, [GOOD % 4], 4)
    after = _run(spark, table_dir)
    assert "removed or rewrote records" in _source_line(after) and "DELETE" in _source_line(after)
    assert after.records_in == 1, "the whole source is read, and what the tables hold is left out"


def test_a_changed_stage_runs_the_open_records_again(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % 0, b'{"amount":2}'], 0)
    first = _run(spark, table_dir)
    assert first.records_quarantined == 1
    stages = orders_config(table_dir)["stages"]
    stages[1]["options"]["required"] = []
    fixed = _run(spark, table_dir, stages=stages)
    assert "the stages changed" in _source_line(fixed)
    assert fixed.reopened == 1 and fixed.records_ok == 1
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert q.where(F.col("status") == "open").count() == 0


def test_full_reads_the_whole_source_and_runs_open_records_again(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % 0, b"{"], 0)
    _run(spark, table_dir)
    again = _run(spark, table_dir, full=True)
    assert "quarantine run --full" in _source_line(again)
    assert again.reopened == 1 and again.records_quarantined == 1


def test_a_target_row_deleted_since_is_delivered_again_by_a_whole_read(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % i for i in range(3)], 0)
    _run(spark, table_dir)
    spark.sql(f"DELETE FROM delta.`{table_dir / 'target'}` WHERE _source_offset = 1")
    after = _run(spark, table_dir)
    assert "the target changed since the last run" in _source_line(after)
    _settled_once(spark, table_dir, 3)


def test_a_dropped_quarantine_table_reads_the_source_whole(spark: Any, table_dir: Path) -> None:
    import shutil

    _append(spark, table_dir, [GOOD % 0, b"{"], 0)
    _run(spark, table_dir)
    shutil.rmtree(table_dir / "quarantine")
    after = _run(spark, table_dir)
    assert "is not the one the last run wrote" in _source_line(after)
    _settled_once(spark, table_dir, 2)


def test_a_partitioned_source_reads_its_new_files_with_their_partition_values(spark: Any, table_dir: Path) -> None:
    src = str(table_dir / "source")
    kafka_df(spark, [GOOD % i for i in range(3)]).write.format("delta").partitionBy("topic", "partition").save(src)
    _run(spark, table_dir)
    kafka_df(spark, [GOOD % 3], start_offset=3).write.format("delta").mode("append").save(src)
    kafka_df(spark, [GOOD % 9], partition=1).write.format("delta").mode("append").save(src)
    after = _run(spark, table_dir)
    assert after.records_in == 2 and "read what versions" in _source_line(after)
    target = spark.read.format("delta").load(str(table_dir / "target"))
    got = {(r[0], r[1], r[2]) for r in target.select("_source_topic", "_source_partition", "_source_offset").collect()}
    assert got == {("orders", 0, 0), ("orders", 0, 1), ("orders", 0, 2), ("orders", 0, 3), ("orders", 1, 0)}


def test_a_recreated_topics_records_below_what_was_read_are_still_compared(spark: Any, table_dir: Path) -> None:
    _append(spark, table_dir, [GOOD % i for i in range(5)], 0)
    _run(spark, table_dir)
    # the topic recreated: offsets 0 and 1 again, other content; and a copy of offset 4 delivered again
    _append(spark, table_dir, [GOOD % 100, GOOD % 101], 0)
    src = str(table_dir / "source")
    copy = spark.read.format("delta").load(src).where("offset = 4").collect()
    spark.createDataFrame(copy, spark.read.format("delta").load(src).schema).write.format("delta").mode(
        "append").save(src)
    after = _run(spark, table_dir)
    assert "read what versions" in _source_line(after)
    assert after.records_in == 2, "the copy of offset 4 is settled in the target: left out"
    assert after.quarantined_by_stage() == {"source": 2}
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert {r["error_class"] for r in q.collect()} == {"CoordinatesReused"}



def _conf(d: Path, **config: Any) -> Any:
    cfg = orders_config(d)
    cfg.update(config)
    return parse_config(cfg)


def test_quarantine_run_with_nothing_new_answers_from_the_delta_logs_without_a_jvm(spark: Any, table_dir: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    from tests.support.crash import write_conf

    _append(spark, table_dir, [GOOD % 0, b"{"], 0)
    _run(spark, table_dir)
    conf = write_conf(orders_config(table_dir), table_dir / "p.yml")
    java = shutil.which("java")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not java or Path(java).parent != Path(p))
    # no java anywhere: a run that started Spark would fail
    env = {**os.environ, "JAVA_HOME": str(table_dir / "no-java"), "PATH": path}
    done = subprocess.run([sys.executable, "-m", "quarantine", "run", "--conf", str(conf)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "source: nothing new since version 0 (answered from the Delta logs, without Spark)" in done.stdout
    assert "records in                      0" in done.stdout


def test_the_jvm_free_answer_is_spark_s_or_none(spark: Any, table_dir: Path) -> None:
    from quarantine.ops.nothing_new import nothing_new

    _append(spark, table_dir, [GOOD % 0, b"{"], 0)
    _run(spark, table_dir)
    assert nothing_new(_conf(table_dir)) is not None
    assert nothing_new(_conf(table_dir, mlflow={"enabled": True})) is None, "a listener that hears every run"
    stages = orders_config(table_dir)["stages"]
    stages[1]["options"]["required"] = []
    assert nothing_new(_conf(table_dir, stages=stages)) is None, "the stages changed"
    _append(spark, table_dir, [GOOD % 2], 2)
    assert nothing_new(_conf(table_dir)) is None, "new records"
    _run(spark, table_dir)
    assert nothing_new(_conf(table_dir)) is not None
    spark.sql(f"DELETE FROM delta.`{table_dir / 'target'}` WHERE _source_offset = 2")
    assert nothing_new(_conf(table_dir)) is None, "the target changed: Spark reads the source whole"
    _run(spark, table_dir)
    spark.sql(f"UPDATE delta.`{table_dir / 'quarantine'}` SET retriable = true")
    assert nothing_new(_conf(table_dir)) is None, "an open record failed with a retriable error"


def test_a_catalog_table_source_is_read_whole_and_compared_but_nothing_new_runs_no_batch(
    spark: Any, table_dir: Path
) -> None:
    import uuid

    db = f"incr_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    try:
        name = f"{db}.orders_raw"
        kafka_df(spark, [GOOD % 0, b"{"]).write.format("delta").saveAsTable(name)
        source = {"format": "delta", "table": name}
        _run(spark, table_dir, source=source)
        kafka_df(spark, [GOOD % 2], start_offset=2).write.format("delta").mode("append").saveAsTable(name)
        after = _run(spark, table_dir, source=source)
        assert "a catalog table is read whole" in _source_line(after)
        # the delivered record is left out by the comparison; the open one runs again, as before
        assert (after.records_in, after.reopened) == (2, 1)
        again = _run(spark, table_dir, source=source)
        assert again.batches == () and "nothing new" in _source_line(again)
    finally:
        spark.sql(f"DROP DATABASE {db} CASCADE")


def test_a_wide_target_keeps_statistics_of_its_coordinates_so_day_two_can_skip_settled_files(
    spark: Any, table_dir: Path
) -> None:
    # 40 fields before the coordinates: past the 32 leaf columns Delta keeps statistics of by default
    fields = [f"f{i}" for i in range(40)]
    stages = orders_config(table_dir)["stages"]
    stages[1]["options"] = {"schema": ", ".join(f"{f} STRING" for f in fields), "required": ["f0"]}
    record = json.dumps({f: "x" for f in fields}).encode()
    _append(spark, table_dir, [record] * 4, 0)
    _run(spark, table_dir, stages=stages)
    target = table_dir / "target"
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{target}`").collect()}
    assert props.get("delta.dataSkippingNumIndexedCols") == "-1"
    first = (target / "_delta_log" / f"{0:020d}.json").read_text(encoding="utf-8").splitlines()
    stats = [json.loads(json.loads(line)["add"]["stats"]) for line in first if '"add"' in line]
    assert stats and all("_source_offset" in s["minValues"] for s in stats), (
        "Delta skips a file below a batch's floors by its offsets' statistics")

    _append(spark, table_dir, [record] * 2, 4)
    second = _run(spark, table_dir, stages=stages)
    assert second.records_in == 2 and "read what versions" in _source_line(second)
    _settled_once(spark, table_dir, 6)
