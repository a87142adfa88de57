"""The Delta metrics table: one row per batch per metric (and per stage / per topic).

Schema :data:`~quarantine.schema.METRICS_SCHEMA`::

    pipeline, run_id, batch_id, recorded_at, metric, stage, topic, value, run_kind

A row with ``stage`` and ``topic`` both NULL is the batch total of its metric; a
row with ``stage`` (or ``topic``) set is that stage's (topic's) share. So a
run's or a day's total is a plain ``GROUP BY metric`` over the rows where
``stage IS NULL AND topic IS NULL`` (see the README, "Error metrics").
``run_kind`` says which kind of run wrote the row (:class:`~quarantine.columns.RunKind`):
``run``, ``replay`` (its records counted again: leave it out of error rates) or
``discard`` (one ``records-discarded`` row). A table of an older version, without
``run_kind``, gets the column on first use (its old rows: NULL, i.e. ``run``).

Exactly once per ``(run_id, batch_id)``, by the rows' own ids: each batch is one plain
append (one commit: all of its rows or none), made only when the table holds no row of
that ``(pipeline, run_id, batch_id)``. No ``txnAppId``/``txnVersion``: Delta 4.1 computes
the snapshot's whole state to check a transaction id, on every commit that carries one.
The table is not read on every batch either (a read after a commit computes that state
too): :meth:`MetricsTableListener.on_run_start` reads, while the run's first batch runs,
the highest ``batch_id`` the table holds of the run (none for a new run); a batch above
the highest one known, this process's own appends included, is appended without a read.
Only a batch at or below it (a listener called twice, a stream's replayed micro-batch)
and a retried append are checked with a read filtered on ``pipeline``, ``run_id``
(Delta skips every file of other runs by its min/max statistics: one append, one file,
one run) and, in the same aggregate, ``batch_id``.

Why no duplicate arises: one run id is one run of one process: a batch run's id is new,
and a streaming query's id is its checkpoint's, which one driver runs at a time. A query
restarted after a crash has the same run id and replays the batch it had not committed,
with the same batch id, and its first batch is checked against the table: rows written
before the crash are found and nothing is added. A re-run of a batch job is a new run
id, so its rows are written (the metrics of a run, not of the data). A listener called
twice for a batch checks the table. The residual risk is two drivers running one run id
at the same time (a driver left running after the job was restarted elsewhere): the read
and the append are not one transaction, so both may append the batch. Blind appends
never conflict with each other, so many pipelines can share one metrics table; the
write still runs under the write retry policy
(:meth:`RetryWithToleranceOperator.for_writes`), and a retried attempt checks the table
first, in case the earlier attempt had committed.

The rows reach Spark as one Arrow table, one partition (one file per append), with
exactly the values and types a list of :func:`metric_rows` tuples gives
(``recorded_at`` as the same instant, naive or aware).

A run that ends on a tolerance breach (:class:`~quarantine.errors.ToleranceExceededError`)
publishes the breaching batch's report before it fails, so its rows (``tolerance-breaches``
among them) carry that batch's ``batch_id``; :meth:`MetricsTableListener.on_run_end`
writes nothing.

Listener contract (:mod:`quarantine.listeners.events`): a write that still fails after its
retries is logged with the number of rows lost and never fails the data path.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StringType, TimestampType

from quarantine.columns import BATCH_ID, PIPELINE, RUN_ID
from quarantine.config import PipelineConfig
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import describe_failure
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.metrics.cells import BatchMetrics, MetricNames, MetricPoint
from quarantine.schema import METRICS_SCHEMA
from quarantine.tables import add_missing_columns, create_table, read_table, save, table_exists

__all__ = [
    "MetricsTableListener",
    "NoMetricsTable",
    "ensure_metrics_table",
    "metric_rows",
    "metrics_frame",
    "metrics_listener",
]

log = logging.getLogger("quarantine.metrics.cells")

Row = tuple[Any, ...]


def ensure_metrics_table(spark: SparkSession, name: str) -> bool:
    """Create the metrics table if it does not exist (safe against a creation race).

    Liquid-clustered by ``(pipeline, metric)``, the columns every query filters on.
    An existing table without a column of :data:`METRICS_SCHEMA` gets it (once per process).

    Returns:
        Whether this call created the table (so it holds no rows yet).
    """
    created = create_table(
        spark, name, METRICS_SCHEMA,
        comment="quarantine: error metrics per batch, Kafka Connect's names",
        cluster_by=("pipeline", "metric"),
    )
    if not created and name not in _checked:
        add_missing_columns(spark, name, METRICS_SCHEMA)  # a table of an older version (no run_kind)
    _checked.add(name)
    return created


#: Metrics tables known to have :data:`METRICS_SCHEMA`'s columns (checked once per process).
_checked: set[str] = set()


def metric_rows(report: BatchReport) -> list[Row]:
    """The metrics table rows of one batch report (pure).

    One row per :class:`~quarantine.metrics.cells.MetricPoint` in ``report.metrics``;
    keys that are not metrics are skipped. ``tolerance-breaches`` adds up to at least
    the number of breaches the report carries: its cells (a judging stage's, the error
    limit's) as reported, and breaches beyond them in the batch's own cell.
    """
    metric = MetricNames.TOLERANCE_BREACHES
    points = list(BatchMetrics.from_report(report.metrics).points)
    reported = sum(p.value for p in points if p.metric is metric)
    missing = len(report.breaches) - reported
    if missing > 0:
        batch_cell = next((p for p in points if p.metric is metric and p.stage is None), None)
        points = [p for p in points if p is not batch_cell and not (p.metric is metric and p.value == 0)]
        points.append(MetricPoint(metric, missing + (batch_cell.value if batch_cell else 0.0)))
    run = report.run
    at = report.finished_at
    return [
        (run.pipeline, run.run_id, report.batch_id, at, p.metric.value, p.stage, p.topic, p.value, run.kind.value)
        for p in points
    ]


#: The Arrow type of each Spark type in :data:`METRICS_SCHEMA`.
_ARROW_TYPES: dict[DataType, pa.DataType] = {
    StringType(): pa.string(),
    LongType(): pa.int64(),
    DoubleType(): pa.float64(),
    TimestampType(): pa.timestamp("us", tz="UTC"),
}


def metrics_frame(spark: SparkSession, rows: Sequence[Row]) -> DataFrame:
    """:func:`metric_rows`' rows as a DataFrame of :data:`METRICS_SCHEMA`, built from Arrow.

    One partition. A timestamp is converted as ``createDataFrame`` converts it from a
    tuple (:meth:`TimestampType.toInternal`: an aware one is its instant, a naive one
    local time), so the values are the same either way.
    """
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(METRICS_SCHEMA.fields)
    arrays = []
    for field, values in zip(METRICS_SCHEMA.fields, columns, strict=True):
        if isinstance(field.dataType, TimestampType):
            values = tuple(field.dataType.toInternal(v) for v in values)
        arrays.append(pa.array(values, type=_ARROW_TYPES[field.dataType]))
    table = pa.Table.from_arrays(arrays, names=METRICS_SCHEMA.names)
    # one file per append: Spark slices a local Arrow table by its default parallelism
    return spark.createDataFrame(table, METRICS_SCHEMA).coalesce(1)


class NoMetricsTable:
    """The listener used when ``metrics.table`` is not configured: does nothing."""

    def append_run_rows(self, run: RunInfo, values: Sequence[tuple[MetricNames, float]]) -> None:
        """Nothing to write."""

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
        #: per (pipeline, run_id): the highest batch id of the run the table holds (-1: none),
        #: known to have none of the run above it. Each run's events come from one thread.
        self._latest: dict[tuple[str, str], int] = {}

    def on_run_start(self, run: RunInfo) -> None:
        """Read the highest batch id the table holds of this run (while the first batch runs).

        Creates nothing: the table is created with its first rows, so a run that fails
        before it writes anything leaves no table behind. A read that fails is logged;
        the run's first batch then checks the table itself.
        """
        try:
            self._latest[(run.pipeline, run.run_id)], _ = self._held(run.pipeline, run.run_id, -1)
        except Exception as exc:  # the listener contract: never fail the data path
            log.warning(
                "metrics table %s: run %s's batches not read: %s", self.table, run.run_id, describe_failure(exc)
            )

    def on_batch(self, report: BatchReport) -> None:
        """Append the batch's rows unless the table holds the batch (see the module)."""
        run = report.run
        self._append(metric_rows(report), run.pipeline, run.run_id, report.batch_id)

    def append_run_rows(self, run: RunInfo, values: Sequence[tuple[MetricNames, float]]) -> None:
        """Append rows of the run itself, not of a batch: ``batch_id`` NULL, ``stage`` and ``topic`` NULL.

        What another listener counts about the run (alert deliveries: :mod:`quarantine.alerts`),
        one plain append under the write retry policy, never checked against the table (each
        call is a new fact: a round of deliveries). Never raises (the listener contract).

        Args:
            run: the run.
            values: ``(metric, value)`` pairs; none: nothing is written.
        """
        if not values:
            return
        at = self.clock()
        rows = [
            (run.pipeline, run.run_id, None, at, metric.value, None, None, float(value), run.kind.value)
            for metric, value in values
        ]

        def write() -> None:
            ensure_metrics_table(self.spark, self.table)
            save(metrics_frame(self.spark, rows).write.format("delta").mode("append"), self.table)

        try:
            self.retry.call(write, name=f"metrics append to {self.table}")
        except Exception as exc:  # the listener contract: never fail the data path
            log.warning(
                "metrics table %s: %d row(s) of run %s not written: %s",
                self.table, len(rows), run.run_id, describe_failure(exc, {"metrics": self.table}),
            )

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing: a breach that ends a run is in its batch's report already.

        The batch that breaches tolerance publishes its report (``tolerance-breaches``
        included) before it raises (:meth:`quarantine.batch.run.Run.process_batch`); a row
        written here as well counted one breach twice.
        """

    def _held(self, pipeline: str, run_id: str, batch_id: int) -> tuple[int, bool]:
        """The run's highest batch id in the table (-1: none), and whether it holds ``batch_id``'s rows."""
        if not table_exists(self.spark, self.table):
            return -1, False
        row = (
            read_table(self.spark, self.table)
            .where((F.col(PIPELINE) == pipeline) & (F.col(RUN_ID) == run_id))
            .agg(F.max(BATCH_ID), F.bool_or(F.col(BATCH_ID) == batch_id))
            .first()
        )
        assert row is not None  # an aggregate without grouping has one row
        latest, held = row
        return (-1 if latest is None else int(latest)), bool(held)

    def _append(self, rows: Sequence[Row], pipeline: str, run_id: str, batch_id: int) -> None:
        if not rows:
            return
        key = (pipeline, run_id)
        attempts = 0

        def write() -> None:
            nonlocal attempts
            attempts += 1
            created = ensure_metrics_table(self.spark, self.table)
            latest = self._latest.get(key)
            # a retry checks too: the failed attempt may have committed before it failed
            if not created and (latest is None or batch_id <= latest or attempts > 1):
                latest, held = self._held(pipeline, run_id, batch_id)
                self._latest[key] = latest
                if held:
                    log.info("metrics table %s: run %s batch %s is there already", self.table, run_id, batch_id)
                    return
            save(metrics_frame(self.spark, rows).write.format("delta").mode("append"), self.table)
            self._latest[key] = max(batch_id, -1 if latest is None else latest)

        try:
            self.retry.call(write, name=f"metrics append to {self.table}")
        except Exception as exc:  # the listener contract: never fail the data path
            log.warning(
                "metrics table %s: %d row(s) of run %s batch %s not written: %s",
                self.table, len(rows), run_id, batch_id, describe_failure(exc, {"metrics": self.table}),
            )


def metrics_listener(config: PipelineConfig, spark: SparkSession) -> MetricsTableListener | NoMetricsTable:
    """The metrics listener a config asks for: the table's, or a no-op without ``metrics.table``."""
    if not config.metrics.table:
        return NoMetricsTable()
    return MetricsTableListener(
        spark, config.metrics.table, retry=RetryWithToleranceOperator.for_writes(config.errors)
    )
