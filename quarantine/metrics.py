"""Error metrics with Kafka Connect's names, counted in the same pass as the data.

Kafka Connect keeps one set of counters per task (KIP-298's
``task-error-metrics`` MBean); this module keeps the same counters per batch,
per run, per stage and per topic. The vocabulary is :class:`MetricNames`; its
values are the strings that appear in the Delta metrics table's ``metric``
column, in MLflow and in logs.

How counts are made — one pass, no extra scans:

1. :func:`observed_counts` returns aggregate Columns for
   ``DataFrame.observe``. The runner observes them on the one noop write that
   also builds the persisted batch, so every count comes out of the pass that
   reads the source; nothing here runs an action.
2. :func:`batch_metrics` turns the observed row (plus what only the driver
   knows: lines logged, quarantine write attempts, breaches) into a frozen
   :class:`BatchMetrics`.
3. :class:`RunMetrics` adds batches up into per-run totals.

Transport: :meth:`BatchMetrics.as_report` flattens everything into the
``BatchReport.metrics`` mapping with keys from :func:`metric_key`
(``total-record-errors``, ``total-record-errors/stage/parse``,
``records-in/topic/orders``). Kafka topic names (``[A-Za-z0-9._-]``) and stage
names (identifiers) never contain ``/``, so :func:`parse_metric_key` inverts
it exactly, and the keys are valid MLflow metric names as they are.

Per-topic counts — the design choice. Topics are not known in advance (a
``topic.pattern`` subscription, a Kafka-shaped Delta table), so per-topic
counts cannot be a fixed list of ``count(CASE WHEN topic = …)`` columns.
Ruled out: ``collect_list`` (memory grows with the batch), ``count_min_sketch``
and ``histogram_numeric`` (approximate for every batch, and not readable
without the JVM). Chosen: Spark's ``approx_top_k(topic, k, maxItemsTracked)``
aggregate (Spark ≥ 4.1), which is a DataSketches *frequent items* sketch. Its
memory is bounded by ``maxItemsTracked`` whatever the batch size, it merges
across partitions (so ``observe`` accepts it), and its counts are **exact** as
long as the number of distinct items stays well under ``maxItemsTracked`` — the
sketch only starts estimating once its map must purge. We ask for
``k = MAX_TOPICS`` items with ``maxItemsTracked = 8 x MAX_TOPICS``, so any batch
with at most :data:`MAX_TOPICS` topics gets exact counts. That is also checked
on the driver: the per-topic counts must add up to the exact ``count`` of the
same pass; if they do not (a batch with thousands of topics), the rest is
reported under the topic :data:`OTHER_TOPIC` and a warning is logged, so totals
stay exact and nothing is silently lost.

Retries of records that finally *succeeded* leave no trace in the error
struct. A stage that retries (a Python stage) can report them by implementing
:class:`ReportsRetries`; :func:`observed_counts` sums its per-row retry column
in the same pass.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.schema import ErrorKind

__all__ = [
    "MAX_TOPICS",
    "OTHER_TOPIC",
    "BatchMetrics",
    "MetricNames",
    "MetricPoint",
    "ReportsRetries",
    "RunMetrics",
    "batch_metrics",
    "metric_key",
    "observed_counts",
    "parse_metric_key",
]

log = logging.getLogger("quarantine.metrics")

#: Batches with at most this many distinct topics get exact per-topic counts.
MAX_TOPICS = 1024
#: The sketch's map size: 8x the topics asked for keeps it far from purging.
_MAX_ITEMS_TRACKED = 8 * MAX_TOPICS
#: Where per-topic counts the sketch could not attribute exactly are reported.
OTHER_TOPIC = "__other__"


class MetricNames(StrEnum):
    """Every metric this package records, by the name users query it with.

    The first eight are Kafka Connect's ``task-error-metrics`` (KIP-298,
    ``ErrorHandlingMetrics``); each member's doc gives Kafka's meaning, then
    ours. Counts are per batch in the metrics table; per run is their sum
    (``last-error-timestamp``: their max).
    """

    TOTAL_RECORD_FAILURES = "total-record-failures"
    """Kafka: failed operation attempts, retried ones included ("the number of
    record processing failures"). Ours: failed attempts over all records of the
    batch — every attempt of a quarantined record (``attempts``) plus the failed
    attempts of records that succeeded after retrying. Per stage, per topic."""

    TOTAL_RECORD_ERRORS = "total-record-errors"
    """Kafka: records whose processing failed for good, after retries. Ours:
    records that ended with an error (== ``records-quarantined`` for the
    pipeline's own stages). Per stage and per topic."""

    TOTAL_RECORDS_SKIPPED = "total-records-skipped"
    """Kafka: records skipped (not delivered) because of an error that was
    tolerated. Ours: records the batch did not write to the target because they
    failed — they are in the quarantine table, never dropped. Only reported for
    batches that completed (a tolerance breach fails the batch; nothing is
    skipped, the batch is replayed)."""

    TOTAL_RETRIES = "total-retries"
    """Kafka: operations retried. Ours: attempts beyond the first, over every
    record (quarantined or not) of the batch, per stage."""

    TOTAL_ERRORS_LOGGED = "total-errors-logged"
    """Kafka: errors written to the log (``errors.log.enable``). Ours: error
    context lines the error log wrote for the batch (a bounded sample, see
    :mod:`quarantine.errorlog`)."""

    DEADLETTERQUEUE_PRODUCE_REQUESTS = "deadletterqueue-produce-requests"
    """Kafka: attempted writes of records to the DLQ topic. Ours: records sent to
    the quarantine table MERGE, once per write attempt (``records x attempts``),
    reporter writes included."""

    DEADLETTERQUEUE_PRODUCE_FAILURES = "deadletterqueue-produce-failures"
    """Kafka: failed writes to the DLQ. Ours: records in quarantine MERGE
    attempts that failed and were retried (``records x (attempts - 1)``). A
    quarantine write that fails for good fails the batch (no report)."""

    LAST_ERROR_TIMESTAMP = "last-error-timestamp"
    """Kafka: epoch ms when the task last saw an error. Ours: epoch ms of the
    latest source ``timestamp`` among the batch's failed records (the batch's
    write time where failed records carry no timestamp); 0 without errors."""

    RECORDS_IN = "records-in"
    """Source records in the batch. Per topic."""

    RECORDS_OK = "records-ok"
    """Records written to the target (``records-in - records-quarantined``)."""

    RECORDS_QUARANTINED = "records-quarantined"
    """Records written to the quarantine table by the pipeline's stages. Per stage, per topic."""

    TOLERANCE_BREACHES = "tolerance-breaches"
    """Tolerance breaches in the batch: aggregate-expectation breaches carried by
    the batch report, plus 1 when an error limit failed the run (recorded at
    run end, see :mod:`quarantine.sinks.metrics`)."""

    EXPECTATION_FAILURES = "expectation-failures"
    """Records that failed an expectation stage (error ``kind`` =
    ``expectation``). Per stage (the expectation stage)."""

    @property
    def per_run(self) -> str:
        """How batches add up to a run: ``sum``, or ``max`` for timestamps."""
        return "max" if self is MetricNames.LAST_ERROR_TIMESTAMP else "sum"


@dataclass(frozen=True)
class MetricPoint:
    """One value of one metric, optionally for one stage or one topic.

    Attributes:
        metric: which metric.
        value: the value (a count, or epoch ms for ``last-error-timestamp``).
        stage: the stage it is about, or None for the whole batch.
        topic: the source topic it is about, or None for all topics.
    """

    metric: MetricNames
    value: float
    stage: str | None = None
    topic: str | None = None

    @property
    def key(self) -> str:
        """This point's key in ``BatchReport.metrics`` (see :func:`metric_key`)."""
        return metric_key(self.metric, stage=self.stage, topic=self.topic)


def metric_key(
    metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None
) -> str:
    """The flat key of a metric: ``metric``, ``metric/stage/<stage>`` or ``metric/topic/<topic>``.

    Raises:
        ValueError: both a stage and a topic are given (no metric has both).
    """
    name = MetricNames(metric).value
    if stage is not None and topic is not None:
        raise ValueError(
            f"metric {name}: expected a stage or a topic, found both ({stage!r}, {topic!r})"
        )
    if stage is not None:
        return f"{name}/stage/{stage}"
    if topic is not None:
        return f"{name}/topic/{topic}"
    return name


def parse_metric_key(key: str) -> MetricPoint:
    """Invert :func:`metric_key` (value 0.0; the caller sets it).

    Raises:
        ValueError: the key is not ``<metric>[/stage|topic/<name>]`` with a known metric.
    """
    parts = key.split("/", 2)
    try:
        metric = MetricNames(parts[0])
    except ValueError:
        allowed = ", ".join(m.value for m in MetricNames)
        raise ValueError(
            f"metric key {key!r}: expected a metric name first, one of {allowed}"
        ) from None
    if len(parts) == 1:
        return MetricPoint(metric, 0.0)
    if len(parts) == 3 and parts[1] in ("stage", "topic") and parts[2]:
        if parts[1] == "stage":
            return MetricPoint(metric, 0.0, stage=parts[2])
        return MetricPoint(metric, 0.0, topic=parts[2])
    raise ValueError(
        f"metric key {key!r}: expected <metric>, <metric>/stage/<name> or <metric>/topic/<name>"
    )


@runtime_checkable
class ReportsRetries(Protocol):
    """A stage that retries and can say, per row, how many retries it made.

    ``retries(column)`` gets the stage's own result column and returns an
    integer Column: the retries (attempts beyond the first) the stage made for
    that row, successes included; 0 or NULL when none. Used by
    :func:`observed_counts` so that retried successes count in ``total-retries``
    and ``total-record-failures``.
    """

    name: str

    def retries(self, column: Column) -> Column:
        """Per-row retries this stage made (see the class doc)."""


# --------------------------------------------------------------------------- observing

#: Aliases of the observed columns (the runner and its hooks read some of them).
RECORDS_IN = "records_in"
RECORDS_FAILED = "records_quarantined"
_FAILED_ATTEMPTS = "failed_attempts"
_RETRIES_FAILED = "retries"
_RETRIABLE = "retriable"
_EXPECTATION = "expectation_failures"
_LAST_ERROR_TS = "last_error_ts"
_TOPICS_IN = "topics_in"
_TOPICS_FAILED = "topics_failed"


def _stage_key(prefix: str, stage: str) -> str:
    return f"{prefix}:{stage}"


def _top_topics(col: Column) -> Column:
    # k = MAX_TOPICS + 1: NULL (rows filtered out by a CASE WHEN) takes a slot of its own.
    return F.call_function("approx_top_k", col, F.lit(MAX_TOPICS + 1), F.lit(_MAX_ITEMS_TRACKED))


def observed_counts(
    stages: Sequence[Any],
    error_col: Column | str,
    *,
    topic_col: Column | str = "topic",
    timestamp_col: Column | str = "timestamp",
) -> list[Column]:
    """Aggregate Columns for ``DataFrame.observe``: every count of a batch in one pass.

    Pure: builds expressions, runs nothing. Aliases (read by :func:`batch_metrics`
    and, for ``records_in``/``records_quarantined``/``stage:<name>``, by the runner):

    * ``records_in``, ``records_quarantined``: rows, rows with an error;
    * ``stage:<name>`` / ``attempts:<name>`` / ``retries:<name>``: failed rows,
      their attempts and their retries, per failing stage;
    * ``retried_ok:<name>``: retries of rows by stages that :class:`ReportsRetries`
      (successes included, failed rows excluded — those are in ``retries:<name>``);
    * ``failed_attempts``, ``retries``, ``retriable``, ``expectation_failures``;
    * ``last_error_ts``: the latest source timestamp (epoch ms) among failed rows;
    * ``topics_in``, ``topics_failed``: ``ARRAY<STRUCT<item, count>>`` from
      ``approx_top_k`` (see the module doc for why, and when it is exact).

    Args:
        stages: the pipeline's stages (objects with ``name`` and ``kind``).
        error_col: the chain's final error struct (``ERROR_STRUCT``) column.
        topic_col: the source topic column.
        timestamp_col: the source timestamp column.
    """
    err = F.col(error_col) if isinstance(error_col, str) else error_col
    topic = F.col(topic_col) if isinstance(topic_col, str) else topic_col
    ts = F.col(timestamp_col) if isinstance(timestamp_col, str) else timestamp_col
    failed = err.isNotNull()
    attempts = F.greatest(F.coalesce(err.getField("attempts"), F.lit(1)), F.lit(1))
    zero = F.lit(0).cast("bigint")
    cols: list[Column] = [
        F.count(F.lit(1)).alias(RECORDS_IN),
        F.count(err).alias(RECORDS_FAILED),
        F.coalesce(F.sum(F.when(failed, attempts)), zero).alias(_FAILED_ATTEMPTS),
        F.coalesce(F.sum(F.when(failed, attempts - 1)), zero).alias(_RETRIES_FAILED),
        F.count(F.when(err.getField("retriable"), 1)).alias(_RETRIABLE),
        F.count(F.when(err.getField("kind") == ErrorKind.EXPECTATION.value, 1)).alias(_EXPECTATION),
        F.max(F.when(failed, F.unix_millis(ts))).alias(_LAST_ERROR_TS),
        _top_topics(topic).alias(_TOPICS_IN),
        _top_topics(F.when(failed, topic)).alias(_TOPICS_FAILED),
    ]
    for s in stages:
        mine = err.getField("stage") == s.name
        cols.append(F.count(F.when(mine, 1)).alias(_stage_key("stage", s.name)))
        cols.append(
            F.coalesce(F.sum(F.when(mine, attempts)), zero).alias(_stage_key("attempts", s.name))
        )
        cols.append(
            F.coalesce(F.sum(F.when(mine, attempts - 1)), zero).alias(_stage_key("retries", s.name))
        )
        if isinstance(s, ReportsRetries):
            retried = F.coalesce(s.retries(F.col(s.name)).cast("bigint"), zero)
            cols.append(
                F.coalesce(F.sum(F.when(~failed, retried)), zero).alias(
                    _stage_key("retried_ok", s.name)
                )
            )
    return cols


# --------------------------------------------------------------------------- per batch


def _int(row: Mapping[str, Any], key: str) -> int:
    v = row.get(key)
    return int(v) if v is not None else 0


def _topic_counts(entries: Iterable[Any] | None, total: int, what: str) -> dict[str, int]:
    """``approx_top_k`` output → {topic: count}, checked against the exact total."""
    out: dict[str, int] = {}
    for e in entries or ():
        item, count = (e["item"], e["count"]) if not isinstance(e, tuple) else e
        if item is not None:
            out[str(item)] = int(count)
    rest = total - sum(out.values())
    if rest:
        log.warning(
            "per-topic %s: expected the topic counts to add up to %d, found %d; more than %d "
            "topics in one batch? the remaining %d are reported under topic %r",
            what,
            total,
            total - rest,
            MAX_TOPICS,
            rest,
            OTHER_TOPIC,
        )
        out[OTHER_TOPIC] = out.get(OTHER_TOPIC, 0) + rest
    return out


@dataclass(frozen=True)
class BatchMetrics:
    """Every metric of one batch.

    Attributes:
        points: one :class:`MetricPoint` per metric, and per stage / per topic
            where the metric has one. Batch-level points always exist (value 0
            when nothing happened) so that SQL sums never miss a metric.
    """

    points: tuple[MetricPoint, ...]

    def value(
        self, metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None
    ) -> float:
        """One point's value (0.0 when there is no such point)."""
        key = metric_key(metric, stage=stage, topic=topic)
        return next((p.value for p in self.points if p.key == key), 0.0)

    def by_stage(self, metric: MetricNames | str) -> dict[str, float]:
        """``{stage: value}`` of one metric."""
        m = MetricNames(metric)
        return {p.stage: p.value for p in self.points if p.metric is m and p.stage is not None}

    def by_topic(self, metric: MetricNames | str) -> dict[str, float]:
        """``{topic: value}`` of one metric."""
        m = MetricNames(metric)
        return {p.topic: p.value for p in self.points if p.metric is m and p.topic is not None}

    def topic_counts(self, metric: MetricNames | str) -> dict[str, int]:
        """``{topic: count}`` of a counting metric (for ``BatchReport.quarantined_by_topic``)."""
        return {t: int(v) for t, v in self.by_topic(metric).items()}

    def as_report(self) -> dict[str, float]:
        """The flat ``BatchReport.metrics`` mapping (keys from :func:`metric_key`)."""
        return {p.key: p.value for p in self.points}

    @classmethod
    def from_report(cls, metrics: Mapping[str, float]) -> BatchMetrics:
        """Rebuild from a ``BatchReport.metrics`` mapping; keys that are not metrics are ignored."""
        points = []
        for key, value in metrics.items():
            try:
                p = parse_metric_key(key)
            except ValueError:
                continue
            points.append(MetricPoint(p.metric, float(value), p.stage, p.topic))
        return cls(tuple(points))


def _epoch_ms(ts: dt.datetime) -> float:
    if ts.tzinfo is None:  # a naive clock value is taken as UTC (the runner's clock is UTC)
        ts = ts.replace(tzinfo=dt.UTC)
    return float(int(ts.timestamp() * 1000))


def batch_metrics(
    observed_row: Mapping[str, Any],
    *,
    stages: Sequence[Any],
    now: dt.datetime,
    errors_logged: int = 0,
    dlq_attempts: int = 1,
    breaches: int = 0,
) -> BatchMetrics:
    """The batch's metrics from the row observed by :func:`observed_counts`.

    Pure (no Spark). Only what the data pass cannot see is passed in.

    Args:
        observed_row: ``Observation.get`` of the columns of :func:`observed_counts`.
        stages: the same stages, in order.
        now: the batch's write time (fallback for ``last-error-timestamp``).
        errors_logged: error-context lines the error log wrote for the batch.
        dlq_attempts: attempts the quarantine MERGE took (1 = first try succeeded).
        breaches: tolerance breaches of the batch.
    """
    row = observed_row
    records_in = _int(row, RECORDS_IN)
    failed = _int(row, RECORDS_FAILED)
    retried_ok = {s.name: _int(row, _stage_key("retried_ok", s.name)) for s in stages}
    retries_failed = {s.name: _int(row, _stage_key("retries", s.name)) for s in stages}
    attempts_failed = {s.name: _int(row, _stage_key("attempts", s.name)) for s in stages}
    errors_by_stage = {s.name: _int(row, _stage_key("stage", s.name)) for s in stages}
    kinds = {s.name: getattr(s, "kind", None) for s in stages}
    last_ms = row.get(_LAST_ERROR_TS)
    last_error = float(last_ms) if last_ms is not None else _epoch_ms(now)
    last_error = last_error if failed else 0.0
    dlq_attempts = max(dlq_attempts, 1) if failed else 0

    mn = MetricNames
    totals: dict[MetricNames, float] = {
        mn.RECORDS_IN: records_in,
        mn.RECORDS_OK: records_in - failed,
        mn.RECORDS_QUARANTINED: failed,
        mn.TOTAL_RECORD_FAILURES: _int(row, _FAILED_ATTEMPTS) + sum(retried_ok.values()),
        mn.TOTAL_RECORD_ERRORS: failed,
        mn.TOTAL_RECORDS_SKIPPED: failed,
        mn.TOTAL_RETRIES: _int(row, _RETRIES_FAILED) + sum(retried_ok.values()),
        mn.TOTAL_ERRORS_LOGGED: errors_logged,
        mn.DEADLETTERQUEUE_PRODUCE_REQUESTS: failed * dlq_attempts,
        mn.DEADLETTERQUEUE_PRODUCE_FAILURES: failed * max(dlq_attempts - 1, 0),
        mn.LAST_ERROR_TIMESTAMP: last_error,
        mn.TOLERANCE_BREACHES: breaches,
        mn.EXPECTATION_FAILURES: _int(row, _EXPECTATION),
    }
    points = [MetricPoint(m, float(v)) for m, v in totals.items()]
    for name in (s.name for s in stages):
        n = errors_by_stage[name]
        retries = retries_failed[name] + retried_ok[name]
        if n:
            points += [
                MetricPoint(mn.TOTAL_RECORD_ERRORS, float(n), stage=name),
                MetricPoint(mn.RECORDS_QUARANTINED, float(n), stage=name),
                MetricPoint(mn.TOTAL_RECORDS_SKIPPED, float(n), stage=name),
            ]
            if kinds[name] == ErrorKind.EXPECTATION:
                points.append(MetricPoint(mn.EXPECTATION_FAILURES, float(n), stage=name))
        if n or retried_ok[name]:
            points.append(
                MetricPoint(
                    mn.TOTAL_RECORD_FAILURES,
                    float(attempts_failed[name] + retried_ok[name]),
                    stage=name,
                )
            )
        if retries:
            points.append(MetricPoint(mn.TOTAL_RETRIES, float(retries), stage=name))
    for topic, n in sorted(_topic_counts(row.get(_TOPICS_IN), records_in, "records-in").items()):
        points.append(MetricPoint(mn.RECORDS_IN, float(n), topic=topic))
    for topic, n in sorted(_topic_counts(row.get(_TOPICS_FAILED), failed, "errors").items()):
        points += [
            MetricPoint(mn.TOTAL_RECORD_ERRORS, float(n), topic=topic),
            MetricPoint(mn.RECORDS_QUARANTINED, float(n), topic=topic),
        ]
    return BatchMetrics(tuple(points))


# --------------------------------------------------------------------------- per run


@dataclass
class RunMetrics:
    """Per-run totals: the sum of the batches' points (max for timestamps).

    Not thread safe; one instance per run, updated by the driver after each batch.

    Attributes:
        run_id: the run these totals belong to.
        batches: how many batches were added.
        totals: ``{metric key: value}`` over the run (keys from :func:`metric_key`).
    """

    run_id: str = ""
    batches: int = 0
    totals: dict[str, float] = field(default_factory=dict)

    def add(self, batch: BatchMetrics | Mapping[str, float]) -> None:
        """Add one batch (its :class:`BatchMetrics` or its ``BatchReport.metrics``)."""
        points = (
            batch.points
            if isinstance(batch, BatchMetrics)
            else BatchMetrics.from_report(batch).points
        )
        for p in points:
            old = self.totals.get(p.key)
            if p.metric.per_run == "max":
                self.totals[p.key] = p.value if old is None else max(old, p.value)
            else:
                self.totals[p.key] = (old or 0.0) + p.value
        self.batches += 1

    def value(
        self, metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None
    ) -> float:
        """A run total (0.0 when never recorded)."""
        return self.totals.get(metric_key(metric, stage=stage, topic=topic), 0.0)

    def snapshot(self) -> BatchMetrics:
        """The run totals as points (e.g. for a run summary or MLflow run-level metrics)."""
        return BatchMetrics.from_report(self.totals)
