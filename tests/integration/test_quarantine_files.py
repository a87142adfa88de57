"""How many files a batch's failed records make in the quarantine table (quarantine.sinks.quarantine).

A micro-batch's few failed records are spread over every partition of the batch
(a Kafka micro-batch has one per topic-partition). Written as they lie, each
batch adds one tiny file per partition to the quarantine table, and the SQL
users run over it lists and opens them all. The writer sizes the files by the
count the runner already has: at most one file per ``ROWS_PER_FILE`` records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import quarantine.sinks.quarantine as sink
from quarantine.batch.writes import BatchMode
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.helpers import kafka_df
from tests.support import kafka_pipeline_conf

POISON = [b"\xff", b"{", b'{"order_id":"x"}', b""]


def _pipeline(spark: Any, d: Path) -> Pipeline:
    conf = kafka_pipeline_conf("localhost:9", d, topics=["orders"], pipeline="files")
    conf["errors"]["tolerance"] = "all"
    return Pipeline.from_config(parse_config(conf), spark, listeners=[])


def _files_added(spark: Any, table: Path) -> list[int]:
    """Files each write of ``table`` (an append or a MERGE) added, oldest first."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").collect()
    return [
        int(m.get("numFiles") or m["numTargetFilesAdded"])
        for h in history
        if h["operation"] in ("WRITE", "MERGE")
        for m in [h["operationMetrics"]]
    ]


def _batch(spark: Any, n: int, start: int) -> Any:
    """``n`` records, one in four good, spread over four partitions (as four topic-partitions would be)."""
    values = [b'{"order_id":"o","amount":1,"currency":"EUR"}' if i % 4 == 0 else POISON[i % 4] for i in range(n)]
    return kafka_df(spark, values, start_offset=start).repartition(4)


def test_a_micro_batch_s_failed_records_make_one_file_not_one_per_partition(spark: Any, tmp_path: Path) -> None:
    run = _pipeline(spark, tmp_path).start_run("query")
    first = run.process_batch(_batch(spark, 40, 0), 0, BatchMode.micro_batch())
    second = run.process_batch(_batch(spark, 40, 40), 1, BatchMode.micro_batch())  # the way after a dirty batch
    assert (first.records_quarantined, second.records_quarantined) == (30, 30)
    assert _files_added(spark, tmp_path / "quarantine") == [1, 1]
    rows = spark.read.format("delta").load(str(tmp_path / "quarantine"))
    assert sorted(r.offset for r in rows.collect()) == [i for i in range(80) if i % 4]  # every one, once


def test_many_failed_records_make_one_file_per_rows_per_file(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink, "ROWS_PER_FILE", 10)
    run = _pipeline(spark, tmp_path).start_run("query")
    report = run.process_batch(_batch(spark, 40, 0), 0, BatchMode.micro_batch())
    assert report.records_quarantined == 30
    assert _files_added(spark, tmp_path / "quarantine") == [3]
    table = spark.read.format("delta").load(str(tmp_path / "quarantine"))
    assert table.count() == table.select("offset").distinct().count() == 30
    assert table.where(F.col("value").isNull()).count() == 0  # the bytes of each, whichever file
