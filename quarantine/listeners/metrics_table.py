"""The Delta metrics table: one row per batch per metric (and per stage / per topic).

Schema :data:`~quarantine.schema.METRICS_SCHEMA`::

    pipeline, run_id, batch_id, recorded_at, metric, stage, topic, value, run_kind

A row with ``stage`` and ``topic`` both NULL is the batch total of its metric; a
row with ``stage`` (or ``topic``) set is that stage's (topic's) share. So a
run's or a day's total is a plain ``GROUP BY metric`` over the rows where
``stage IS NULL AND topic IS NULL`` (see the README, "Error metrics").
``run_kind`` says which kind of run wrote the row (:class:`~quarantine.report.RunKind`):
``run``, ``replay`` (its records counted again: leave it out of error rates) or
``discard`` (one ``records-discarded`` row). A table of an older version, without
``run_kind``, gets the column on first use (its old rows: NULL, i.e. ``run``).

Exactly once per ``(run_id, batch_id)``: each batch is one blind append carrying
``txnAppId = quarantine-metrics:<pipeline>:<run_id>`` and ``txnVersion = batch_id``.
Delta skips a transaction version it has already committed for that app id, so
a micro-batch replayed after a crash (same streaming query id, same batch id)
and a listener called twice add nothing. Blind appends never conflict with each
other, so many pipelines can share one metrics table; the write still runs
under the write retry policy (:meth:`RetryWithToleranceOperator.for_writes`).
Delta keeps one ``SetTransaction`` entry per app id in its log; set the table
property ``delta.setTransactionRetentionDuration`` to expire old runs' entries.

A run that ends on a tolerance breach (:class:`~quarantine.errors.ToleranceExceededError`)
publishes the breaching batch's report before it fails, so its rows (``tolerance-breaches``
among them) carry that batch's ``batch_id``; :meth:`MetricsTableListener.on_run_end`
writes nothing.

Listener contract (:mod:`quarantine.report`): a write that still fails after its
retries is logged with the number of rows lost and never fails the data path.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from quarantine.config import PipelineConfig
from quarantine.errors import describe_failure
from quarantine.metrics import BatchMetrics, MetricNames, MetricPoint
from quarantine.report import BatchReport, RunInfo, RunListener, RunStatus
from quarantine.retry import RetryWithToleranceOperator
from quarantine.schema import METRICS_SCHEMA
from quarantine.sinks import add_missing_columns, create_table, save

__all__ = [
    "MetricsTableListener",
    "NoMetricsTable",
    "ensure_metrics_table",
    "metric_rows",
    "metrics_listener",
    "metrics_txn_app_id",
]

log = logging.getLogger("quarantine.metrics")

Row = tuple[Any, ...]


def metrics_txn_app_id(pipeline: str, run_id: str) -> str:
    """The Delta ``txnAppId`` of one run's metrics appends."""
    return f"quarantine-metrics:{pipeline}:{run_id}"


def ensure_metrics_table(spark: SparkSession, name: str) -> None:
    """Create the metrics table if it does not exist (safe against a creation race).

    Liquid-clustered by ``(pipeline, metric)``, the columns every query filters on.
    An existing table without a column of :data:`METRICS_SCHEMA` gets it (once per process).
    """
    created = create_table(
        spark, name, METRICS_SCHEMA,
        comment="quarantine: error metrics per batch, Kafka Connect's names",
        cluster_by=("pipeline", "metric"),
    )
    if not created and name not in _checked:
        add_missing_columns(spark, name, METRICS_SCHEMA)  # a table of an older version (no run_kind)
    _checked.add(name)


#: Metrics tables known to have :data:`METRICS_SCHEMA`'s columns (checked once per process).
_checked: set[str] = set()


def metric_rows(report: BatchReport) -> list[Row]:
    """The metrics table rows of one batch report (pure).

    One row per :class:`~quarantine.metrics.MetricPoint` in ``report.metrics``;
    keys that are not metrics are skipped. ``tolerance-breaches`` is at least
    the number of breaches the report carries.
    """
    points = list(BatchMetrics.from_report(report.metrics).points)
    breaches = len(report.breaches)
    total_key = MetricNames.TOLERANCE_BREACHES.value
    if breaches:
        points = [p for p in points if p.key != total_key]
        reported = report.metrics.get(total_key, 0.0)
        points.append(MetricPoint(MetricNames.TOLERANCE_BREACHES, max(float(breaches), reported)))
    run = report.run
    at = report.finished_at
    return [
        (run.pipeline, run.run_id, report.batch_id, at, p.metric.value, p.stage, p.topic, p.value, run.kind.value)
        for p in points
    ]


class NoMetricsTable:
    """The listener used when ``metrics.table`` is not configured: does nothing."""

    def on_run_start(self, run: RunInfo) -> None:
        """Nothing to prepare."""

    def on_batch(self, report: BatchReport) -> None:
        """Nothing to write."""

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing to write."""


class MetricsTableListener:
    """Appends each batch's metrics to a Delta table, once per ``(run_id, batch_id)``.

    Args:
        spark: the session.
        table: the metrics table (path or ``catalog.schema.table``), created on first use.
        retry: the write retry operator (retries Delta commit conflicts).
        clock: the wall clock (for the run-end row).
    """

    def __init__(
        self,
        spark: SparkSession,
        table: str,
        *,
        retry: RetryWithToleranceOperator,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.spark = spark
        self.table = table
        self.retry = retry
        self.clock = clock

    def on_run_start(self, run: RunInfo) -> None:
        """Nothing: the table is created with its first rows, so a run that fails before it
        writes anything leaves no table behind."""

    def on_batch(self, report: BatchReport) -> None:
        """Append the batch's rows (idempotent per ``(run_id, batch_id)``)."""
        run = report.run
        self._append(metric_rows(report), run.pipeline, run.run_id, report.batch_id)

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing: a breach that ends a run is in its batch's report already.

        The batch that breaches tolerance publishes its report (``tolerance-breaches``
        included) before it raises (:meth:`quarantine.run.Run.process_batch`); a row
        written here as well counted one breach twice.
        """

    def _append(self, rows: Sequence[Row], pipeline: str, run_id: str, version: int) -> None:
        if not rows:
            return

        def write() -> None:
            ensure_metrics_table(self.spark, self.table)
            df = self.spark.createDataFrame(list(rows), METRICS_SCHEMA)
            writer = (
                df.write.format("delta")
                .mode("append")
                .option("txnAppId", metrics_txn_app_id(pipeline, run_id))
                .option("txnVersion", str(version))
            )
            save(writer, self.table)

        try:
            self.retry.call(write, name=f"metrics append to {self.table}")
        except Exception as exc:  # the listener contract: never fail the data path
            log.warning(
                "metrics table %s: %d row(s) of run %s (txnVersion %s) not written: %s",
                self.table, len(rows), run_id, version, describe_failure(exc),
            )


def metrics_listener(config: PipelineConfig, spark: SparkSession) -> RunListener:
    """The metrics listener a config asks for: the table's, or a no-op without ``metrics.table``."""
    if not config.metrics.table:
        return NoMetricsTable()
    return MetricsTableListener(
        spark, config.metrics.table, retry=RetryWithToleranceOperator.for_writes(config.errors)
    )
