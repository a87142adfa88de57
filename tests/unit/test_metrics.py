"""Metric names, keys and the arithmetic from an observed row to batch and run metrics (no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pytest

from quarantine.columns import ErrorKind
from quarantine.config import BreachAction
from quarantine.errorhandling.breach import Breach
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus, RunSummary
from quarantine.listeners.metrics_table import metric_rows
from quarantine.metrics.cells import (
    BatchMetrics,
    MetricNames,
    MetricPoint,
    RunMetrics,
    metric_key,
    parse_metric_key,
)
from quarantine.metrics.observed import OTHER_TOPIC, batch_metrics, schema_drift

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
SEP = "\x1f"


@dataclass(frozen=True)
class _Stage:
    name: str
    kind: ErrorKind = ErrorKind.DESERIALIZE


STAGES = [_Stage("decode"), _Stage("parse"), _Stage("rules", ErrorKind.EXPECTATION)]


def _row(**over: Any) -> dict[str, Any]:
    """An observed row: 10 records over 2 topics; decode 1, parse 2 (one after 3 attempts), rules 1."""
    row: dict[str, Any] = {
        "records_in": 10,
        "records_quarantined": 4,
        "failed_attempts": 6,
        "retries": 2,
        "retriable": 1,
        "expectation_failures": 1,
        "last_error_ts": 1_767_225_605_000,
        "topics_in": [("orders", 7), ("refunds", 3)],
        "stage_topic_failed": [
            (None, 6),
            (f"decode{SEP}orders", 1),
            (f"parse{SEP}orders", 1),
            (f"parse{SEP}refunds", 1),
            (f"rules{SEP}refunds", 1),
        ],
        "stage:decode": 1,
        "attempts:decode": 1,
        "retries:decode": 0,
        "stage:parse": 2,
        "attempts:parse": 4,
        "retries:parse": 2,
        "stage:rules": 1,
        "attempts:rules": 1,
        "retries:rules": 0,
    }
    row.update(over)
    return row


def test_the_kafka_connect_names_are_kept_verbatim() -> None:
    kafka = {
        "total-record-failures",
        "total-record-errors",
        "total-records-skipped",
        "total-retries",
        "total-errors-logged",
        "deadletterqueue-produce-requests",
        "deadletterqueue-produce-failures",
        "last-error-timestamp",
    }
    ours = {"records-in", "records-ok", "records-quarantined", "tolerance-breaches", "expectation-failures",
            "records-discarded", "schema-drift-records", "alerts-sent", "alerts-undelivered", "alerts-held"}
    assert {m.value for m in MetricNames} == kafka | ours


def test_every_metric_is_documented_for_sql_users() -> None:
    from tests.support.readme import manual_text

    doc = manual_text()
    for m in MetricNames:
        assert f"| `{m.value}` |" in doc, m


@pytest.mark.parametrize(
    ("stage", "topic", "key"),
    [
        (None, None, "total-record-errors"),
        ("parse", None, "total-record-errors/stage/parse"),
        (None, "orders.v1", "total-record-errors/topic/orders.v1"),
        ("parse", "orders-eu_1", "total-record-errors/stage/parse/topic/orders-eu_1"),
    ],
)
def test_metric_keys_round_trip(stage: str | None, topic: str | None, key: str) -> None:
    assert metric_key(MetricNames.TOTAL_RECORD_ERRORS, stage=stage, topic=topic) == key
    assert parse_metric_key(key) == MetricPoint(MetricNames.TOTAL_RECORD_ERRORS, 0.0, stage, topic)


@pytest.mark.parametrize("key", ["records_in", "total-retries/partition/3", "total-retries/stage/", "x/stage/a"])
def test_a_malformed_metric_key_is_rejected_with_what_was_expected(key: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_metric_key(key)


def test_batch_totals_follow_kafka_semantics() -> None:
    m = batch_metrics(_row(), stages=STAGES, now=NOW, errors_logged=3, dlq_attempts=2, breaches={None: 1})
    n = MetricNames
    assert m.total(n.RECORDS_IN) == 10
    assert m.total(n.RECORDS_OK) == 6
    assert m.total(n.RECORDS_QUARANTINED) == 4
    assert m.total(n.TOTAL_RECORD_ERRORS) == 4  # records that failed for good
    assert m.total(n.TOTAL_RECORDS_SKIPPED) == 4
    assert m.total(n.TOTAL_RECORD_FAILURES) == 6  # every failed attempt
    assert m.total(n.TOTAL_RETRIES) == 2
    assert m.total(n.TOTAL_ERRORS_LOGGED) == 3
    assert m.total(n.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 8  # 4 records x 2 MERGE attempts
    assert m.total(n.DEADLETTERQUEUE_PRODUCE_FAILURES) == 4  # the first attempt failed
    assert m.total(n.LAST_ERROR_TIMESTAMP) == 1_767_225_605_000
    assert m.total(n.TOLERANCE_BREACHES) == 1
    assert m.total(n.EXPECTATION_FAILURES) == 1


def test_a_dlq_topic_adds_its_produce_to_the_dlq_counts() -> None:
    """The table's write, then the topic's: each attempt sends every failed record (4 here)."""
    n = MetricNames
    ok = batch_metrics(_row(), stages=STAGES, now=NOW, dlq_attempts=1, topic_attempts=2, topic_failed_attempts=1)
    assert ok.total(n.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 4 * (1 + 2)
    assert ok.total(n.DEADLETTERQUEUE_PRODUCE_FAILURES) == 4 * 1  # the topic's first attempt
    gave_up = batch_metrics(_row(), stages=STAGES, now=NOW, dlq_attempts=1, topic_attempts=4, topic_failed_attempts=4)
    assert gave_up.total(n.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 4 * 5
    assert gave_up.total(n.DEADLETTERQUEUE_PRODUCE_FAILURES) == 4 * 4  # every topic attempt failed
    none = batch_metrics(_row(), stages=STAGES, now=NOW, dlq_attempts=1)
    assert none.total(n.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 4 and none.total(n.DEADLETTERQUEUE_PRODUCE_FAILURES) == 0


def test_cells_partition_each_metric_by_its_grain() -> None:
    m = batch_metrics(_row(), stages=STAGES, now=NOW)
    n = MetricNames
    assert m.by_stage(n.RECORDS_QUARANTINED) == {"decode": 1, "parse": 2, "rules": 1}
    assert m.by_topic(n.RECORDS_QUARANTINED) == {"orders": 2, "refunds": 2}
    assert m.value(n.RECORDS_QUARANTINED, stage="parse", topic="refunds") == 1
    assert m.by_topic(n.RECORDS_IN) == {"orders": 7, "refunds": 3}
    assert m.by_topic(n.RECORDS_OK) == {"orders": 5, "refunds": 1}
    assert m.by_stage(n.TOTAL_RECORD_FAILURES) == {"decode": 1, "parse": 4, "rules": 1}
    assert m.by_stage(n.TOTAL_RETRIES) == {"parse": 2}
    assert m.by_stage(n.EXPECTATION_FAILURES) == {"rules": 1}
    # every metric's cells add up to its total: a plain SQL sum never double counts
    for metric in MetricNames:
        cells = [p.value for p in m.points if p.metric is metric]
        if metric is not n.LAST_ERROR_TIMESTAMP:
            assert sum(cells) == m.total(metric), metric
    assert all(p.stage is None for p in m.points if p.metric is n.RECORDS_IN)
    assert all(p.topic is None for p in m.points if p.metric is n.TOTAL_RETRIES)


def test_a_clean_batch_has_every_metric_once_with_zero_errors() -> None:
    row = _row(
        records_quarantined=0,
        failed_attempts=0,
        retries=0,
        retriable=0,
        expectation_failures=0,
        last_error_ts=None,
        stage_topic_failed=[(None, 10)],
        **{
            "stage:decode": 0,
            "attempts:decode": 0,
            "stage:parse": 0,
            "attempts:parse": 0,
            "retries:parse": 0,
            "stage:rules": 0,
            "attempts:rules": 0,
        },
    )
    m = batch_metrics(row, stages=STAGES, now=NOW)
    # records-discarded is a discard's (quarantine discard), never a batch's; alerts-* are the run's rows
    runs = {MetricNames.ALERTS_SENT, MetricNames.ALERTS_UNDELIVERED, MetricNames.ALERTS_HELD}
    assert {p.metric for p in m.points} == set(MetricNames) - {MetricNames.RECORDS_DISCARDED} - runs
    assert m.total(MetricNames.RECORDS_OK) == 10
    assert m.total(MetricNames.LAST_ERROR_TIMESTAMP) == 0
    assert m.total(MetricNames.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 0
    assert [p for p in m.points if p.metric is MetricNames.TOTAL_RECORD_ERRORS] == [
        MetricPoint(MetricNames.TOTAL_RECORD_ERRORS, 0.0)
    ]


def test_failed_records_without_a_source_timestamp_use_the_write_time() -> None:
    m = batch_metrics(_row(last_error_ts=None), stages=STAGES, now=NOW)
    assert m.total(MetricNames.LAST_ERROR_TIMESTAMP) == NOW.timestamp() * 1000


def test_counts_the_sketch_could_not_attribute_go_to_the_other_topic(caplog: pytest.LogCaptureFixture) -> None:
    row = _row(topics_in=[("orders", 7)], stage_topic_failed=[(f"decode{SEP}orders", 1)])
    m = batch_metrics(row, stages=STAGES, now=NOW)
    assert m.by_topic(MetricNames.RECORDS_IN) == {"orders": 7, OTHER_TOPIC: 3}
    assert m.value(MetricNames.RECORDS_QUARANTINED, stage="parse", topic=OTHER_TOPIC) == 2
    assert m.total(MetricNames.RECORDS_QUARANTINED) == 4  # totals stay exact
    assert "expected the per-topic counts to add up to 10, found 7" in caplog.text


def test_retried_successes_count_as_failures_and_retries() -> None:
    stages = [_Stage("call", ErrorKind.TRANSFORM)]
    row = {
        "records_in": 5,
        "records_quarantined": 2,
        "failed_attempts": 2,
        "retries": 0,
        "topics_in": [("t", 5)],
        "stage_topic_failed": [(f"call{SEP}t", 2)],
        "stage:call": 2,
        "attempts:call": 2,
        "retries:call": 0,
        "retried_ok:call": 1,
    }
    m = batch_metrics(row, stages=stages, now=NOW)
    # Kafka's example: 3 failures (2 for good + 1 retried), 1 retry, 2 skipped
    assert m.total(MetricNames.TOTAL_RECORD_FAILURES) == 3
    assert m.total(MetricNames.TOTAL_RETRIES) == 1
    assert m.total(MetricNames.TOTAL_RECORDS_SKIPPED) == 2
    assert m.total(MetricNames.TOTAL_RECORD_ERRORS) == 2


def test_the_report_mapping_carries_totals_and_cells_and_reads_back() -> None:
    m = batch_metrics(_row(), stages=STAGES, now=NOW)
    flat = m.as_report()
    assert flat["total-record-errors"] == 4
    assert flat["total-record-errors/stage/parse/topic/orders"] == 1
    assert flat["records-in/topic/refunds"] == 3
    back = BatchMetrics.from_report({**flat, "not-a-metric": 1.0})
    assert sorted(back.points, key=lambda p: p.key) == sorted(m.points, key=lambda p: p.key)


def test_run_metrics_sum_batches_and_keep_the_latest_error_time() -> None:
    run = RunMetrics(run_id="r1")
    run.add(batch_metrics(_row(), stages=STAGES, now=NOW))
    run.add(batch_metrics(_row(last_error_ts=1_000), stages=STAGES, now=NOW).as_report())
    assert run.batches == 2
    assert run.value(MetricNames.RECORDS_IN) == 20
    assert run.value(MetricNames.RECORDS_QUARANTINED, stage="parse") == 4
    assert run.value(MetricNames.RECORDS_IN, topic="orders") == 14
    assert run.value(MetricNames.LAST_ERROR_TIMESTAMP) == 1_767_225_605_000
    assert run.value(MetricNames.TOTAL_ERRORS_LOGGED) == 0


def test_metric_rows_are_one_row_per_cell_with_the_breaches_the_report_carries() -> None:
    info = RunInfo(pipeline="p", run_id="r1", source="s", config={}, started_at=NOW)
    m = batch_metrics(_row(), stages=STAGES, now=NOW)
    breach = Breach(name="expect_column_values_to_not_be_null(id)", action=BreachAction.FAIL, message="m")
    report = BatchReport(
        run=info,
        batch_id=7,
        records_in=10,
        records_ok=6,
        records_quarantined=4,
        metrics=m.as_report(),
        breaches=(breach,),
        finished_at=NOW,
    )
    rows = metric_rows(report)
    assert len(rows) == len(m.points)
    assert {r[:4] for r in rows} == {("p", "r1", 7, NOW)}
    by_metric: dict[str, float] = {}
    for r in rows:
        by_metric[r[4]] = by_metric.get(r[4], 0.0) + r[7]
    assert by_metric["records-quarantined"] == 4
    assert by_metric["tolerance-breaches"] == 1
    assert ("p", "r1", 7, NOW, "records-quarantined", "parse", "refunds", 1.0, "run") in rows


@dataclass(frozen=True)
class _Drifting:
    """A stage that :class:`quarantine.stage.ReportsDrift` (only its shape matters here)."""

    name: str
    kind: ErrorKind = ErrorKind.DESERIALIZE

    def undeclared(self, column: Any) -> Any:
        return column


def test_schema_drift_counts_the_records_per_undeclared_field_and_the_summary_names_them() -> None:
    stages = [_Stage("decode"), _Drifting("parse")]
    # as observed: the sets of undeclared fields with their counts, the NULL item (no drift) without one
    sets = json.dumps([{"item": f"coupon{SEP}gift", "count": 1}, {"item": "coupon", "count": 2}, {"count": 7}])
    row = {"records_in": 10, "records_quarantined": 0, "drift:parse": 3, "drift_fields:parse": sets}
    assert schema_drift(stages, row) == {"parse": {"coupon": 3, "gift": 1}}
    assert schema_drift(stages, {**row, "drift:parse": 0}) == {}
    metrics = batch_metrics(row, stages=stages, now=NOW)
    assert metrics.by_stage(MetricNames.SCHEMA_DRIFT_RECORDS) == {"parse": 3.0}
    run = RunInfo(pipeline="orders", run_id="r1", source="orders", config={}, started_at=NOW)
    report = BatchReport(run=run, batch_id=0, records_in=10, records_ok=10, records_quarantined=0,
                         schema_drift=schema_drift(stages, row), metrics=metrics.as_report())
    shown = RunSummary(run, (report, report), RunStatus.SUCCEEDED).render()
    assert "  schema drift at parse: 6 record(s) with undeclared fields: coupon (6), gift (2)" in shown.splitlines()


def test_tolerance_breaches_say_which_are_an_error_limits_and_which_an_expectation_stages() -> None:
    """An aggregate expectation's breaches are cells of its stage; an error limit's (or a handler's) is the
    batch's own cell (stage NULL): the report can tell a GX warning from a tolerance breach."""
    m = batch_metrics(_row(), stages=STAGES, now=NOW, breaches={"rules": 2, None: 1})
    n = MetricNames
    assert m.by_stage(n.TOLERANCE_BREACHES) == {"rules": 2}
    assert [(p.stage, p.value) for p in m.points if p.metric is n.TOLERANCE_BREACHES] == [(None, 1), ("rules", 2)]
    assert m.total(n.TOLERANCE_BREACHES) == 3
    info = RunInfo(pipeline="p", run_id="r1", source="s", config={}, started_at=NOW)
    warn = Breach(name="expect_column_mean_to_be_between(amount)", action=BreachAction.WARN, message="m")
    report = BatchReport(run=info, batch_id=0, records_in=10, records_ok=6, records_quarantined=4,
                         metrics=batch_metrics(_row(), stages=STAGES, now=NOW, breaches={"rules": 2}).as_report(),
                         breaches=(warn, warn), finished_at=NOW)
    rows = [(r[5], r[7]) for r in metric_rows(report) if r[4] == "tolerance-breaches"]
    assert rows == [("rules", 2.0)]
