"""The Delta metrics table: rows per batch, exactly once per (run, batch), plain SQL sums."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from quarantine.batch.writes import BatchMode
from quarantine.columns import RunKind
from quarantine.config import ErrorsConfig, parse_config
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import ToleranceExceededError
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.listeners.metrics_table import MetricsTableListener, NoMetricsTable, metric_rows
from quarantine.metrics.cells import MetricNames, metric_key
from quarantine.pipeline import Pipeline, default_listeners
from quarantine.schema import METRICS_SCHEMA
from tests.helpers import kafka_df

GOOD = b'{"order_id":"a","amount":1}'


def _config(d: Path, *, metrics: bool = True) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pipeline": "metrics_table_test",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": "order_id STRING, amount DOUBLE"}},
        ],
    }
    if metrics:
        raw["metrics"] = {"table": str(d / "metrics")}
    return raw


def _sql_totals(spark: Any, table: Path, where: str = "") -> dict[str, float]:
    rows = spark.sql(f"SELECT metric, sum(value) AS v FROM delta.`{table}` {where} GROUP BY metric").collect()
    return {r["metric"]: r["v"] for r in rows}


def test_a_run_writes_its_batch_metrics_and_sql_sums_give_the_totals(spark: Any, table_dir: Path) -> None:
    source = kafka_df(spark, [GOOD, b"\xff", b"{", GOOD], topic="orders").unionByName(
        kafka_df(spark, [GOOD, b"\xfe"], topic="refunds")
    )
    source.write.format("delta").save(str(table_dir / "source"))
    pipe = Pipeline.from_config(parse_config(_config(table_dir)), spark)
    assert sum(isinstance(x, MetricsTableListener) for x in pipe.listeners) == 1

    summary = pipe.run()

    metrics = table_dir / "metrics"
    table = spark.read.format("delta").load(str(metrics))
    assert [(f.name, f.dataType) for f in table.schema.fields] == [(f.name, f.dataType) for f in METRICS_SCHEMA.fields]
    assert {(r["pipeline"], r["run_id"], r["batch_id"]) for r in table.collect()} == {
        ("metrics_table_test", summary.run.run_id, 0)
    }
    totals = _sql_totals(spark, metrics)
    report = summary.batches[0]
    assert totals["records-in"] == 6
    assert totals["records-ok"] == 3
    assert totals["records-quarantined"] == totals["total-record-errors"] == 3
    assert totals["deadletterqueue-produce-requests"] == 3
    assert totals == pytest.approx({k: v for k, v in report.metrics.items() if "/" not in k})
    by_topic = spark.sql(
        f"SELECT topic, sum(value) AS v FROM delta.`{metrics}` WHERE metric = 'records-quarantined' GROUP BY topic"
    ).collect()
    assert {r["topic"]: r["v"] for r in by_topic} == {"orders": 2, "refunds": 1}
    by_stage = spark.sql(
        f"SELECT stage, sum(value) AS v FROM delta.`{metrics}` WHERE metric = 'records-quarantined' GROUP BY stage"
    ).collect()
    assert {r["stage"]: r["v"] for r in by_stage} == {"decode": 2, "parse": 1}


def test_metrics_are_appended_exactly_once_per_run_and_batch(spark: Any, table_dir: Path) -> None:
    cfg = parse_config(_config(table_dir))
    (listener,) = [x for x in default_listeners(cfg, spark) if isinstance(x, MetricsTableListener)]
    pipe = Pipeline.from_config(cfg, spark, listeners=[listener])
    run = pipe.start_run("run-1")
    metrics = str(table_dir / "metrics")

    first = run.process_batch(kafka_df(spark, [GOOD, b"\xff"]), 0, BatchMode.micro_batch())
    n0 = spark.read.format("delta").load(metrics).count()
    listener.on_batch(first)  # a replayed micro-batch reports again: nothing is added
    assert spark.read.format("delta").load(metrics).count() == n0

    run.process_batch(kafka_df(spark, [GOOD, GOOD, b"{"], start_offset=10), 1, BatchMode.micro_batch())
    assert _sql_totals(spark, table_dir / "metrics")["records-in"] == 5
    per_batch = spark.sql(
        f"SELECT batch_id, sum(value) AS v FROM delta.`{metrics}` WHERE metric = 'records-in' GROUP BY batch_id"
    ).collect()
    assert {r["batch_id"]: r["v"] for r in per_batch} == {0: 2, 1: 3}

    # a new run (a fresh checkpoint: batch ids restart at 0) is written, not deduplicated away
    other = Pipeline.from_config(cfg, spark, listeners=[listener])
    other_run = other.start_run("run-2")
    other_run.process_batch(kafka_df(spark, [GOOD], start_offset=20), 0, BatchMode.micro_batch())
    by_run = _sql_totals(spark, table_dir / "metrics", "WHERE run_id = 'run-2'")
    assert by_run["records-in"] == 1

    # the end of a run that failed on a breach adds nothing: the breaching batch reported it
    # (test_a_run_that_breaches_tolerance_counts_one_breach_in_the_metrics_table)
    breach = ToleranceExceededError("errors.tolerance.limit: 6 > 5", limit="errors.tolerance.limit", count=6)
    n = spark.read.format("delta").load(metrics).count()
    listener.on_run_end(other_run.info, RunStatus.FAILED, breach)
    assert spark.read.format("delta").load(metrics).count() == n


def test_without_a_metrics_table_the_listener_does_nothing(spark: Any, table_dir: Path) -> None:
    cfg = parse_config(_config(table_dir, metrics=False))
    listeners = default_listeners(cfg, spark)
    assert sum(isinstance(x, NoMetricsTable) for x in listeners) == 1
    assert not any(isinstance(x, MetricsTableListener) for x in listeners)
    pipe = Pipeline.from_config(cfg, spark)
    run = pipe.start_run()
    report = run.process_batch(kafka_df(spark, [GOOD, b"\xff"]), 0)
    assert report.records_quarantined == 1
    assert not (table_dir / "metrics").exists()


def test_a_run_that_breaches_tolerance_counts_one_breach_in_the_metrics_table(spark: Any, table_dir: Path) -> None:
    """The breaching batch publishes its report (with the breach) before it raises; the run's
    end must not add the same breach again (the report page showed 2 for one breach)."""
    raw = _config(table_dir)
    raw["errors"]["tolerance"] = "none"
    kafka_df(spark, [GOOD, b"\xff", GOOD]).write.format("delta").save(str(table_dir / "source"))
    pipe = Pipeline.from_config(parse_config(raw), spark)
    with pytest.raises(ToleranceExceededError):
        pipe.run()
    totals = _sql_totals(spark, table_dir / "metrics")
    assert totals["tolerance-breaches"] == 1, totals
    assert totals["records-in"] == 3 and totals["records-quarantined"] == 1


def test_a_run_that_fails_before_writing_leaves_no_table_behind(spark: Any, table_dir: Path) -> None:
    """The source cannot be read: the run fails before any write, and creates no table (issue 34)."""
    from quarantine.errors import SourceError

    raw = _config(table_dir)  # no source written
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=default_listeners(parse_config(raw), spark))
    with pytest.raises(SourceError):
        pipe.run()
    assert [p.name for p in table_dir.iterdir()] == []


_AT = dt.datetime(2026, 11, 27, 21, 5, 3, 123456, tzinfo=dt.UTC)


def _listener(spark: Any, table: Path) -> MetricsTableListener:
    """A listener as a new process builds it (nothing remembered from an earlier one)."""
    return MetricsTableListener(
        spark, str(table), retry=RetryWithToleranceOperator.for_writes(ErrorsConfig(dlq_table_name=str(table) + "_q"))
    )


def _report(run: RunInfo, batch_id: int, records_in: float, *, at: dt.datetime = _AT) -> BatchReport:
    metrics = {
        metric_key(MetricNames.RECORDS_IN): records_in,
        metric_key(MetricNames.RECORDS_QUARANTINED, stage="parse", topic="orders"): 1.0,
    }
    return BatchReport(
        run=run, batch_id=batch_id, records_in=int(records_in), records_ok=0, records_quarantined=1,
        metrics=metrics, finished_at=at,
    )


def _commits(table: Path) -> list[list[dict[str, Any]]]:
    """Each commit's actions, in version order, from the table's ``_delta_log``."""
    files = sorted((table / "_delta_log").glob("*.json"))
    return [[json.loads(line) for line in f.read_text().splitlines() if line] for f in files]


def test_a_republished_batch_adds_nothing_and_every_append_is_a_plain_commit(spark: Any, table_dir: Path) -> None:
    """Idempotent by the rows' own (run_id, batch_id), not by Delta transaction ids: a batch
    reported twice, by the same listener or by a new process after a crash (the stream's
    replayed micro-batch: same run and batch id), adds nothing; every append commits no
    ``txn`` action (Delta 4.1 computes the whole snapshot's state for one)."""
    metrics = table_dir / "metrics"
    run = RunInfo(pipeline="p", run_id="query-1", source="s", config={}, started_at=_AT)

    def records_in() -> dict[int, float]:
        rows = spark.sql(
            f"SELECT batch_id, sum(value) AS v FROM delta.`{metrics}` WHERE metric = 'records-in' GROUP BY batch_id"
        ).collect()
        return {r["batch_id"]: r["v"] for r in rows}

    first = _listener(spark, metrics)
    first.on_run_start(run)
    first.on_batch(_report(run, 0, 5))
    first.on_batch(_report(run, 1, 7))
    first.on_batch(_report(run, 1, 7, at=_AT + dt.timedelta(seconds=1)))  # reported again: nothing added
    assert records_in() == {0: 5, 1: 7}

    after_crash = _listener(spark, metrics)  # the restarted query: same run id, batch 1 replayed
    after_crash.on_run_start(run)
    after_crash.on_batch(_report(run, 1, 7, at=_AT + dt.timedelta(seconds=2)))
    after_crash.on_batch(_report(run, 2, 3))
    assert records_in() == {0: 5, 1: 7, 2: 3}

    unannounced = _listener(spark, metrics)  # no on_run_start: it checks the table itself
    unannounced.on_batch(_report(run, 2, 3))
    unannounced.on_batch(_report(run, 0, 5))
    assert records_in() == {0: 5, 1: 7, 2: 3}

    other_run = RunInfo(pipeline="p", run_id="query-2", source="s", config={}, started_at=_AT)
    unannounced.on_batch(_report(other_run, 1, 4))  # another run's batch 1 is its own
    assert records_in() == {0: 5, 1: 11, 2: 3}

    commits = _commits(metrics)
    assert len(commits) == 1 + 4  # the table's creation, then one append per batch written
    for actions in commits[1:]:
        kinds = {kind for action in actions for kind in action}
        assert "txn" not in kinds, actions
        assert kinds == {"commitInfo", "add"}, kinds
        (info,) = [a["commitInfo"] for a in actions if "commitInfo" in a]
        assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "Append"
        assert sum("add" in action for action in actions) == 1  # one file per batch's append


def test_rows_are_written_exactly_as_metric_rows_makes_them_nulls_and_zeros_included(
    spark: Any, table_dir: Path
) -> None:
    """The table holds :func:`metric_rows`' values and types: NULL stage and topic for a batch
    total, one of them for a share, zeros, an epoch-ms timestamp metric, the microseconds of
    ``recorded_at`` (an instant), a run id with a quote in it, the run's kind."""
    metrics = table_dir / "metrics"
    run = RunInfo(pipeline="p", run_id="it's-1", source="s", config={}, started_at=_AT, kind=RunKind.REPLAY)
    report = BatchReport(
        run=run, batch_id=3, records_in=4, records_ok=0, records_quarantined=4,
        metrics={
            metric_key(MetricNames.RECORDS_IN): 4.0,
            metric_key(MetricNames.RECORDS_OK): 0.0,
            metric_key(MetricNames.RECORDS_QUARANTINED, stage="parse"): 3.0,
            metric_key(MetricNames.RECORDS_QUARANTINED, stage="cast"): 1.0,
            metric_key(MetricNames.TOTAL_RECORD_ERRORS, topic="orders"): 4.0,
            metric_key(MetricNames.TOTAL_RECORD_FAILURES, stage="parse", topic="orders"): 3.5,
            metric_key(MetricNames.LAST_ERROR_TIMESTAMP): 1_795_813_503_123.0,
            "not-a-metric": 9.0,
        },
        finished_at=_AT,
    )
    listener = _listener(spark, metrics)
    listener.on_run_start(run)
    listener.on_batch(report)

    got = spark.read.format("delta").load(str(metrics)).selectExpr(
        "pipeline", "run_id", "batch_id", "unix_micros(recorded_at) AS at", "metric", "stage", "topic", "value",
        "run_kind",
    ).collect()
    micros = (_AT - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    expected = [(p, r, b, micros, *rest) for p, r, b, _, *rest in metric_rows(report)]
    assert sorted((tuple(row) for row in got), key=repr) == sorted(expected, key=repr)
    assert {row["stage"] for row in got} == {None, "parse", "cast"}

    empty = BatchReport(run=run, batch_id=4, records_in=0, records_ok=0, records_quarantined=0, metrics={})
    versions = len(_commits(metrics))
    listener.on_batch(empty)  # no rows: no commit
    assert len(_commits(metrics)) == versions
