"""The runner's two ways through a batch give the same tables and reports (quarantine.run).

A policy that may stop a batch counts it first (a noop pass builds the cache),
then writes; one that goes on whatever the counts (``errors.tolerance=all``, no
limits) writes the target while counting, with no extra pass. Both must split,
count, close and report alike, on new records, re-runs and re-sent micro-batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine import run as run_module
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.report import BatchReport
from quarantine.run import Run
from tests.helpers import kafka_df

SCHEMA = "order_id STRING, amount DOUBLE"
GOOD = [b'{"order_id":"a","amount":1.5}', b'{"order_id":"b","amount":2}']
POISON = [b"\xff\xfe", b'{"order_id":"c"', b'{"order_id":"d","amount":"x"}', b"", None]


def _pipeline(spark: Any, d: Path, **errors: Any) -> Pipeline:
    cfg = {
        "pipeline": "paths",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": SCHEMA, "required": ["order_id"]}},
        ],
    }
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[])


def _append(spark: Any, d: Path, values: list[bytes | None], start: int = 0) -> None:
    kafka_df(spark, values, start_offset=start).write.format("delta").mode("append").save(str(d / "source"))


def _tables(spark: Any, d: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    target = spark.read.format("delta").load(str(d / "target"))
    q = spark.read.format("delta").load(str(d / "quarantine"))
    return (
        sorted(tuple(r) for r in target.select("_source_offset", "order_id", "amount").collect()),
        sorted(tuple(r) for r in q.select("offset", "stage", "error_class", "status", "value").collect()),
    )


def _figures(report: BatchReport) -> tuple[Any, ...]:
    metrics = {k: v for k, v in report.metrics.items() if "time" not in k and "last" not in k}
    return (report.records_in, report.records_ok, report.records_quarantined,
            report.quarantined_by_stage, report.quarantined_by_topic, metrics)


@pytest.fixture
def count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many noop counting passes ran (one entry per pass)."""
    calls: list[int] = []
    real = Run._count_pass

    def spy(self: Run, split: Any, observed: Any) -> Any:
        calls.append(1)
        return real(self, split, observed)

    monkeypatch.setattr(Run, "_count_pass", spy)
    return calls


def test_both_ways_split_count_and_report_a_run_and_its_re_run_alike(
    spark: Any, tmp_path: Path, count_passes: list[int]
) -> None:
    reports: dict[str, list[BatchReport]] = {}
    tables = {}
    for way, errors in (("write_then_count", {}), ("count_then_write", {"tolerance.limit": "1000000000"})):
        d = tmp_path / way
        _append(spark, d, GOOD + POISON)
        before = len(count_passes)
        first = _pipeline(spark, d, **errors).run().batches[0]
        _append(spark, d, [b'{"order_id":"e","amount":5}', b"\xc3"], start=len(GOOD + POISON))
        # the re-run runs the new records and those still open in quarantine, not the delivered ones
        second = _pipeline(spark, d, **errors).run().batches[0]
        reports[way] = [first, second]
        tables[way] = _tables(spark, d)
        # no counting pass where the policy cannot stop the batch; one per batch where it can
        assert len(count_passes) - before == (0 if way == "write_then_count" else 2)
    assert [_figures(r) for r in reports["write_then_count"]] == [_figures(r) for r in reports["count_then_write"]]
    assert tables["write_then_count"] == tables["count_then_write"]
    target, quarantine = tables["write_then_count"]
    assert [t[0] for t in target] == [0, 1, 7]
    assert [q[0] for q in quarantine] == [2, 3, 4, 5, 6, 8]
    assert (reports["write_then_count"][1].records_in, reports["write_then_count"][1].records_quarantined) == (7, 6)


def test_a_re_sent_micro_batch_that_delta_skips_is_still_counted(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_passes: list[int]
) -> None:
    """A micro-batch sent again under the same txnVersion appends nothing, so the target write
    runs no job and observes nothing: the batch is counted over its cache instead (the stream
    runner counts first the first batch after a start, which is where this happens)."""
    monkeypatch.setattr(run_module, "_collected", lambda obs, timeout_s=0.5: _real_collected(obs, 0.5))
    _append(spark, tmp_path, GOOD + POISON)
    pipeline = _pipeline(spark, tmp_path)
    run = pipeline.start_run("query-1")
    source = spark.read.format("delta").load(str(tmp_path / "source"))
    first = run.process_batch(source, 7, streaming=True)
    assert count_passes == []  # written while counted
    again = run.process_batch(source, 7, streaming=True)  # as if the offsets were not committed
    assert count_passes == [1]  # the skipped append observed nothing; counted over the cache
    resumed = run.process_batch(source, 7, streaming=True, resumed=True)
    assert count_passes == [1, 1]  # counted first: the way a stream's first batch goes
    assert _figures(first) == _figures(again) == _figures(resumed)
    target, quarantine = _tables(spark, tmp_path)
    assert [t[0] for t in target] == [0, 1]  # appended once
    assert [q[0] for q in quarantine] == [2, 3, 4, 5, 6]  # quarantined once
    assert spark.read.format("delta").load(str(tmp_path / "target")).where(F.col("_source_offset") == 0).count() == 1


_real_collected = run_module._collected
