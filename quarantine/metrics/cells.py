"""Error metrics with Kafka Connect's names, kept as cells that add up to a batch's and a run's totals.

Kafka Connect keeps one set of counters per task (KIP-298's
``task-error-metrics`` MBean); this package keeps the same counters per batch,
per run, per stage and per topic. The vocabulary is :class:`MetricNames`; its
values are the strings that appear in the Delta metrics table's ``metric``
column, in MLflow and in logs.

How counts are made — one pass, no extra scans: the aggregate Columns of
:mod:`quarantine.metrics.columns` are observed on the pass that reads the
source; :func:`quarantine.metrics.observed.batch_metrics` turns the observed row
into a frozen :class:`BatchMetrics`; :class:`RunMetrics` adds batches up into
per-run totals.

Cells, so that SQL stays a plain ``sum``. A batch's metric is a set of
:class:`MetricPoint` *cells* that partition it: each metric has one grain and
its cells add up to the batch total (``last-error-timestamp``: their max).

====================================================  ==================
metric                                                grain (cells)
====================================================  ==================
``records-quarantined``, ``total-record-errors``,     stage x topic
``total-records-skipped``, ``expectation-failures``
``records-in``, ``records-ok``                        topic
``total-record-failures``, ``total-retries``,         stage
``schema-drift-records``
``tolerance-breaches``                                stage (NULL: an error limit's)
``alerts-sent``, ``alerts-undelivered``,              the run (``batch_id`` NULL)
``alerts-held``
everything else                                       the batch
====================================================  ==================

A metric with nothing to count still gets one batch-grain cell with value 0,
so that it exists in every batch. Hence ``SELECT metric, sum(value) … GROUP BY
metric`` gives totals, ``GROUP BY metric, stage`` per stage, ``GROUP BY metric,
topic`` per topic, without double counting.

Transport: :meth:`BatchMetrics.as_report` flattens a batch into the
``BatchReport.metrics`` mapping: the plain metric name holds the batch total
(what MLflow plots), and keys from :func:`metric_key` hold the cells
(``total-record-errors/stage/parse/topic/orders``, ``records-in/topic/orders``).
:meth:`BatchMetrics.from_report` reads the cells back (a metric's plain total
is used only when it has no cells). Kafka topic names (``[A-Za-z0-9._-]``) and
stage names never contain ``/``, so the keys parse unambiguously and are valid
MLflow metric names as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "BatchMetrics",
    "MetricNames",
    "MetricPoint",
    "RunMetrics",
    "metric_key",
    "parse_metric_key",
]


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
    attempts of records that succeeded after retrying. Per stage."""

    TOTAL_RECORD_ERRORS = "total-record-errors"
    """Kafka: records whose processing failed for good, after retries. Ours:
    records that ended with an error (== ``records-quarantined`` for the
    pipeline's own stages). Per stage x topic."""

    TOTAL_RECORDS_SKIPPED = "total-records-skipped"
    """Kafka: records skipped (not delivered) because of an error that was
    tolerated. Ours: records the batch did not write to the target because they
    failed — they are in the quarantine table, never dropped. Only reported for
    batches that completed (a tolerance breach fails the batch; nothing is
    skipped, the batch is replayed). Per stage x topic."""

    TOTAL_RETRIES = "total-retries"
    """Kafka: operations retried. Ours: attempts beyond the first, over every
    record (quarantined or not) of the batch, per stage."""

    TOTAL_ERRORS_LOGGED = "total-errors-logged"
    """Kafka: errors written to the log (``errors.log.enable``). Ours: error
    context lines the error log wrote for the batch (a bounded sample, see
    :mod:`quarantine.listeners.error_log`)."""

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
    """Records written to the target (``records-in - records-quarantined``). Per topic."""

    RECORDS_QUARANTINED = "records-quarantined"
    """Records written to the quarantine table by the pipeline's stages. Per stage x topic."""

    RECORDS_DISCARDED = "records-discarded"
    """Open quarantine rows a discard closed (``quarantine discard``; ``run_kind`` = ``discard``)."""

    TOLERANCE_BREACHES = "tolerance-breaches"
    """Tolerance breaches in the batch: aggregate-expectation breaches carried by
    the batch report, in the cell of their judging stage (whatever their ``on_breach``
    action, ``warn`` included), plus 1 in the batch's own cell (stage NULL) when an
    error limit or a ``fail`` handler failed the run (see
    :mod:`quarantine.listeners.metrics_table`). Per stage."""

    EXPECTATION_FAILURES = "expectation-failures"
    """Records that failed an expectation stage (error ``kind`` =
    ``expectation``). Per stage x topic."""

    SCHEMA_DRIFT_RECORDS = "schema-drift-records"
    """Records that held fields their stage's schema does not declare (a ``json``
    stage's undeclared fields, dropped or quarantined as ``options.undeclared_fields``
    says), among the records that reached the stage. Per stage."""

    ALERTS_SENT = "alerts-sent"
    """Alert messages delivered to their channels (:mod:`quarantine.alerts`). A run's row, not a
    batch's: ``batch_id`` NULL, written after each round of deliveries."""

    ALERTS_UNDELIVERED = "alerts-undelivered"
    """Alert messages given up after ``alerts.timeout_s`` (the channel down or slow); the run
    went on. A run's row (``batch_id`` NULL); the run's summary names the channels."""

    ALERTS_HELD = "alerts-held"
    """Alert messages not sent because their channel was told of the same event within
    ``alerts.rate_limit`` (a stream breaching every micro-batch). A run's row (``batch_id`` NULL)."""

    @property
    def per_run(self) -> str:
        """How batches add up to a run: ``sum``, or ``max`` for timestamps."""
        return "max" if self is MetricNames.LAST_ERROR_TIMESTAMP else "sum"


@dataclass(frozen=True)
class MetricPoint:
    """One cell of one metric: the whole batch, one stage, one topic, or a stage x topic.

    Attributes:
        metric: which metric.
        value: the value (a count, or epoch ms for ``last-error-timestamp``).
        stage: the stage the cell is about, or None.
        topic: the source topic the cell is about, or None.
    """

    metric: MetricNames
    value: float
    stage: str | None = None
    topic: str | None = None

    @property
    def key(self) -> str:
        """This cell's key in ``BatchReport.metrics`` (see :func:`metric_key`)."""
        return metric_key(self.metric, stage=self.stage, topic=self.topic)


def metric_key(metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None) -> str:
    """The flat key of a cell: ``metric``, ``metric/stage/<s>``, ``metric/topic/<t>``
    or ``metric/stage/<s>/topic/<t>``."""
    key = MetricNames(metric).value
    if stage is not None:
        key += f"/stage/{stage}"
    if topic is not None:
        key += f"/topic/{topic}"
    return key


def parse_metric_key(key: str) -> MetricPoint:
    """Invert :func:`metric_key` (value 0.0; the caller sets it).

    Raises:
        ValueError: the key is not one :func:`metric_key` makes for a known metric.
    """
    name, _, rest = key.partition("/")
    try:
        metric = MetricNames(name)
    except ValueError:
        allowed = ", ".join(m.value for m in MetricNames)
        raise ValueError(f"metric key {key!r}: expected a metric name first, one of {allowed}") from None
    stage: str | None = None
    topic: str | None = None
    if rest.startswith("stage/"):
        stage, sep, tail = rest[len("stage/") :].partition("/topic/")
        topic = tail if sep else None
    elif rest.startswith("topic/"):
        topic = rest[len("topic/") :]
    elif rest:
        stage = ""  # marks the key as malformed below
    if stage == "" or topic == "":
        raise ValueError(f"metric key {key!r}: expected <metric>[/stage/<stage>][/topic/<topic>]")
    return MetricPoint(metric, 0.0, stage, topic)


@dataclass(frozen=True)
class BatchMetrics:
    """Every metric of one batch, as cells (see the module doc).

    Attributes:
        points: the cells. For each metric, its cells partition its batch total.
    """

    points: tuple[MetricPoint, ...]

    def total(self, metric: MetricNames | str) -> float:
        """The batch total of a metric (max for ``last-error-timestamp``); 0.0 if absent."""
        m = MetricNames(metric)
        values = [p.value for p in self.points if p.metric is m]
        if not values:
            return 0.0
        return max(values) if m.per_run == "max" else float(sum(values))

    def value(self, metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None) -> float:
        """The total, or the sum of the cells of one stage and/or one topic."""
        m = MetricNames(metric)
        if stage is None and topic is None:
            return self.total(m)
        return float(
            sum(
                p.value
                for p in self.points
                if p.metric is m and (stage is None or p.stage == stage) and (topic is None or p.topic == topic)
            )
        )

    def by_stage(self, metric: MetricNames | str) -> dict[str, float]:
        """``{stage: value}`` of one metric (its cells summed per stage)."""
        m = MetricNames(metric)
        out: dict[str, float] = {}
        for p in self.points:
            if p.metric is m and p.stage is not None:
                out[p.stage] = out.get(p.stage, 0.0) + p.value
        return out

    def by_topic(self, metric: MetricNames | str) -> dict[str, float]:
        """``{topic: value}`` of one metric (its cells summed per topic)."""
        m = MetricNames(metric)
        out: dict[str, float] = {}
        for p in self.points:
            if p.metric is m and p.topic is not None:
                out[p.topic] = out.get(p.topic, 0.0) + p.value
        return out

    def topic_counts(self, metric: MetricNames | str) -> dict[str, int]:
        """``{topic: count}`` of a counting metric (for ``BatchReport.quarantined_by_topic``)."""
        return {t: int(v) for t, v in self.by_topic(metric).items()}

    def as_report(self) -> dict[str, float]:
        """The flat ``BatchReport.metrics`` mapping: every metric's total, then its cells."""
        out = {m.value: self.total(m) for m in MetricNames if any(p.metric is m for p in self.points)}
        out.update({p.key: p.value for p in self.points if p.stage or p.topic})
        return out

    @classmethod
    def from_report(cls, metrics: Mapping[str, float]) -> BatchMetrics:
        """Read the cells back from a ``BatchReport.metrics`` mapping.

        A metric's plain total is used only when the mapping has no cells for it;
        keys that are not metric keys are ignored.
        """
        cells: list[MetricPoint] = []
        totals: dict[MetricNames, float] = {}
        for key, value in metrics.items():
            try:
                p = parse_metric_key(key)
            except ValueError:
                continue
            if p.stage is None and p.topic is None:
                totals[p.metric] = float(value)
            else:
                cells.append(MetricPoint(p.metric, float(value), p.stage, p.topic))
        with_cells = {p.metric for p in cells}
        plain = [MetricPoint(m, v) for m, v in totals.items() if m not in with_cells]
        return cls((*plain, *cells))


@dataclass
class RunMetrics:
    """Per-run totals: the batches' cells summed (max for timestamps).

    Not thread safe; one instance per run, updated by the driver after each batch.

    Attributes:
        run_id: the run these totals belong to.
        batches: how many batches were added.
        cells: ``{cell key: value}`` over the run (keys from :func:`metric_key`).
    """

    run_id: str = ""
    batches: int = 0
    cells: dict[str, float] = field(default_factory=dict)

    def add(self, batch: BatchMetrics | Mapping[str, float]) -> None:
        """Add one batch (its :class:`BatchMetrics` or its ``BatchReport.metrics``)."""
        metrics = batch if isinstance(batch, BatchMetrics) else BatchMetrics.from_report(batch)
        for p in metrics.points:
            old = self.cells.get(p.key)
            if p.metric.per_run == "max":
                self.cells[p.key] = p.value if old is None else max(old, p.value)
            else:
                self.cells[p.key] = (old or 0.0) + p.value
        self.batches += 1

    def snapshot(self) -> BatchMetrics:
        """The run so far, as cells."""
        return BatchMetrics(
            tuple(
                MetricPoint(p.metric, v, p.stage, p.topic)
                for p, v in ((parse_metric_key(k), v) for k, v in self.cells.items())
            )
        )

    def value(self, metric: MetricNames | str, *, stage: str | None = None, topic: str | None = None) -> float:
        """A run total, or the run's sum over one stage and/or topic (0.0 when never recorded)."""
        return self.snapshot().value(metric, stage=stage, topic=topic)
