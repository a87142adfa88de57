"""A batch run over a Parquet directory reads the files the last run did not read, and all of them when it must.

Real batch runs over real Parquet directories into real Delta tables; each test checks what the
run read (its summary's ``source:`` line and records in) and that every record still lands in
exactly one table, once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quarantine.batch.increment import MARK_PREFIX, decode_files
from quarantine.config import parse_config
from quarantine.listeners.events import RunSummary
from quarantine.pipeline import Pipeline
from tests.helpers import kafka_df, orders_config

GOOD = b'{"order_id":"%d","amount":1.5}'


def _write(spark: Any, d: Path, values: list[bytes | None], start: int, *, mode: str = "append", **kw: Any) -> None:
    kafka_df(spark, values, start_offset=start, **kw).coalesce(1).write.mode(mode).parquet(str(d / "source"))


def _run(spark: Any, d: Path, *, full: bool = False) -> RunSummary:
    cfg = orders_config(d)
    cfg["source"] = {"format": "parquet", "path": str(d / "source")}
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[]).run(full=full)


def _source_line(summary: RunSummary) -> str:
    return next(n for n in summary.notes if n.startswith("source:"))


def _settled(spark: Any, d: Path) -> list[tuple[int, int]]:
    """Every (partition, offset) the target and the quarantine table hold, duplicates kept."""
    target = spark.read.format("delta").load(str(d / "target"))
    held = [(r[0], r[1]) for r in target.select("_source_partition", "_source_offset").collect()]
    if (d / "quarantine" / "_delta_log").exists():
        q = spark.read.format("delta").load(str(d / "quarantine"))
        held += [(r[0], r[1]) for r in q.select("partition", "offset").collect()]
    return sorted(held)


def test_a_second_run_reads_only_the_files_not_read_before(spark: Any, table_dir: Path) -> None:
    _write(spark, table_dir, [GOOD % i for i in range(5)] + [b"\xff"], 0)
    first = _run(spark, table_dir)
    assert first.records_in == 6 and "read whole (1 file(s))" in _source_line(first)
    assert "no earlier run's read is recorded" in _source_line(first)

    _write(spark, table_dir, [GOOD % i for i in range(6, 9)] + [b"{"], 6)
    second = _run(spark, table_dir)
    assert (second.records_in, second.records_ok, second.records_quarantined) == (4, 3, 1)
    assert second.reopened == 0, "the record open since the first run is not run again"
    assert _source_line(second) == (
        "source: read the 1 file(s) not read before (of 2); records before were settled by earlier runs")
    assert _settled(spark, table_dir) == [(0, o) for o in range(10)]

    third = _run(spark, table_dir)
    assert third.batches == () and third.records_in == 0
    assert _source_line(third) == "source: nothing new (2 file(s), each read by an earlier run)"
    assert _settled(spark, table_dir) == [(0, o) for o in range(10)]


def test_the_mark_names_the_files_read(spark: Any, table_dir: Path) -> None:
    _write(spark, table_dir, [GOOD % i for i in range(3)], 0)
    _run(spark, table_dir)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{table_dir / 'target'}`").collect()}
    mark = json.loads(props[MARK_PREFIX + "orders_test"])
    files = decode_files(mark["files"])
    assert mark["version"] == 1 and len(files) == 1
    (name,) = files
    assert name.endswith(".parquet") and str(table_dir / "source") in name


def test_a_file_gone_from_the_directory_reads_it_whole(spark: Any, table_dir: Path) -> None:
    _write(spark, table_dir, [GOOD % i for i in range(4)], 0)
    _run(spark, table_dir)
    # rewritten: the same records and one more, in files of other names
    _write(spark, table_dir, [GOOD % i for i in range(5)], 0, mode="overwrite")
    after = _run(spark, table_dir)
    assert "1 file(s) the last run read are gone from the directory" in _source_line(after)
    assert (after.records_in, after.records_ok) == (1, 1), "read whole; what the tables hold is left out"
    assert _settled(spark, table_dir) == [(0, o) for o in range(5)]


def test_a_partitioned_directory_reads_its_new_files_with_their_partition_values(
    spark: Any, table_dir: Path
) -> None:
    src = str(table_dir / "source")
    kafka_df(spark, [GOOD % i for i in range(3)]).coalesce(1).write.partitionBy("partition").parquet(src)
    _run(spark, table_dir)
    kafka_df(spark, [GOOD % 3], start_offset=3).write.mode("append").partitionBy("partition").parquet(src)
    kafka_df(spark, [GOOD % 9], partition=1).write.mode("append").partitionBy("partition").parquet(src)
    after = _run(spark, table_dir)
    assert after.records_in == 2 and "not read before" in _source_line(after)
    assert _settled(spark, table_dir) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]


def test_full_reads_every_file_and_runs_open_records_again(spark: Any, table_dir: Path) -> None:
    _write(spark, table_dir, [GOOD % 0, b"{"], 0)
    _run(spark, table_dir)
    again = _run(spark, table_dir, full=True)
    assert _source_line(again) == "source: read whole (1 file(s)): quarantine run --full"
    assert again.reopened == 1 and again.records_quarantined == 1
    assert _settled(spark, table_dir) == [(0, 0), (0, 1)]
