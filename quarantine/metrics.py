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

Per-topic counts — the design choice. Topics are not known in advance (a
``topic.pattern`` subscription, a Kafka-shaped Delta table), so per-topic
counts cannot be a fixed list of ``count(CASE WHEN topic = …)`` columns.
Ruled out: ``collect_list`` (memory grows with the batch), ``count_min_sketch``
and ``histogram_numeric`` (approximate for every batch, and not readable
without the JVM). Chosen: Spark's ``approx_top_k(item, k, maxItemsTracked)``
aggregate (Spark ≥ 4.1; on Spark 4.0, which lacks it, :func:`_exact_items`: exact
counts from ``histogram_numeric`` over the values' hashes), a DataSketches *frequent items* sketch. Its memory is
bounded by ``maxItemsTracked`` whatever the batch size, it merges across
partitions (so ``observe`` accepts it), and its counts are **exact** as long as
the number of distinct items stays well under ``maxItemsTracked`` — the sketch
only starts estimating once its map must purge. We ask for
``k = MAX_TOPICS + 1`` items with ``maxItemsTracked = 8 x MAX_TOPICS``; one
sketch counts topics, one counts ``(stage, topic)`` pairs of failed records.
The result is also checked on the driver against the exact ``count`` columns
of the same pass: if the cells do not add up (a batch with thousands of
topics, or NULL topics), the rest is reported under the topic
:data:`OTHER_TOPIC` and a warning is logged, so totals stay exact and nothing
is silently lost.

Retries of records that finally *succeeded* leave no trace in the error
struct. A stage that retries can report them by implementing
:class:`ReportsRetries`; :func:`observed_counts` sums its per-row retry column
in the same pass.

Schema drift — fields a record holds that its stage's schema does not declare (the
``json`` stage drops them, or quarantines the record) — is counted the same way: a stage
that implements :class:`ReportsDrift` gives, per row, the undeclared fields it saw;
:func:`observed_counts` counts the rows that had any (``schema-drift-records``) and, with a
frequent-items sketch like the per-topic counts', which fields (:func:`schema_drift`, for
the run summary).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyspark
from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.schema import ITEM_SEP, ErrorKind
from quarantine.stage import ReportsDrift, ReportsRetries, drift_column, retry_column

__all__ = [
    "MAX_TOPICS",
    "OTHER_TOPIC",
    "BatchMetrics",
    "MetricNames",
    "MetricPoint",
    "RunMetrics",
    "batch_metrics",
    "metric_key",
    "observed_counts",
    "parse_metric_key",
    "schema_drift",
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
    """Records written to the target (``records-in - records-quarantined``). Per topic."""

    RECORDS_QUARANTINED = "records-quarantined"
    """Records written to the quarantine table by the pipeline's stages. Per stage x topic."""

    RECORDS_DISCARDED = "records-discarded"
    """Open quarantine rows a discard closed (``quarantine discard``; ``run_kind`` = ``discard``)."""

    TOLERANCE_BREACHES = "tolerance-breaches"
    """Tolerance breaches in the batch: aggregate-expectation breaches carried by
    the batch report, plus 1 when an error limit failed the run (recorded at
    run end, see :mod:`quarantine.sinks.metrics`)."""

    EXPECTATION_FAILURES = "expectation-failures"
    """Records that failed an expectation stage (error ``kind`` =
    ``expectation``). Per stage x topic."""

    SCHEMA_DRIFT_RECORDS = "schema-drift-records"
    """Records that held fields their stage's schema does not declare (a ``json``
    stage's undeclared fields, dropped or quarantined as ``options.undeclared_fields``
    says), among the records that reached the stage. Per stage."""

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


# --------------------------------------------------------------------------- observing

#: Aliases of observed columns that the runner and its hooks read as well.
RECORDS_IN = "records_in"
RECORDS_FAILED = "records_quarantined"
_FAILED_ATTEMPTS = "failed_attempts"
_RETRIES_FAILED = "retries"
_RETRIABLE = "retriable"
_EXPECTATION = "expectation_failures"
_LAST_ERROR_TS = "last_error_ts"
_TOPICS_IN = "topics_in"
_CELLS_FAILED = "stage_topic_failed"


def _stage_key(prefix: str, stage: str) -> str:
    return f"{prefix}:{stage}"


def _has_approx_top_k() -> bool:
    """Whether the session's Spark has ``approx_top_k`` (Spark >= 4.1; not 4.0, DBR 17.3 LTS)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    version = active.version if active is not None else pyspark.__version__
    major, minor = (int(p) for p in version.split(".")[:2])
    return (major, minor) >= (4, 1)


def _exact_items(col: Column) -> Column:
    """Exact ``ARRAY<STRUCT<item, count>>`` of the non-NULL values of ``col``, for ``observe``.

    Spark 4.0 has no ``approx_top_k``. ``histogram_numeric`` over the 32-bit ``hash`` of
    each value keeps one bin per distinct hash, with its exact count, as long as there are
    at most ``nb`` of them (its bins are merged only beyond that), across partitions too;
    ``collect_set`` of (hash, value) names the bins. Memory is bounded by the number of
    distinct values (topics, or stage/topic cells of failed rows), not by the batch size.
    A bin whose hash two values share, or beyond :data:`MAX_TOPICS`, gets a NULL item:
    :func:`_complete` then reports its count under :data:`OTHER_TOPIC` with a warning,
    so totals stay exact.
    """
    h = F.when(col.isNotNull(), F.hash(col))
    bins = F.histogram_numeric(h, F.lit(MAX_TOPICS))
    names = F.collect_set(F.struct(h.alias("h"), col.alias("item")))

    def entry(b: Column) -> Column:
        same = F.filter(names, lambda n: n.getField("h") == b.getField("x").cast("int"))
        item = F.when(F.size(same) == 1, same.getItem(0).getField("item"))
        return F.struct(item.alias("item"), b.getField("y").cast("bigint").alias("count"))

    return F.transform(bins, entry)


def _observed_items(col: Column, *, exact: bool | None = None) -> Column:
    """:func:`_top_items` as a JSON string: ``Observation.get`` of pyspark 4.0 (classic)
    hands arrays of structs back as bare py4j objects; a string comes back as itself."""
    return F.to_json(_top_items(col, exact=exact))


def _top_items(col: Column, *, exact: bool | None = None) -> Column:
    """Items and counts of ``col``; ``exact`` (default: the session lacks ``approx_top_k``)
    picks :func:`_exact_items`."""
    if exact if exact is not None else not _has_approx_top_k():
        return _exact_items(col)
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
    * ``retried_ok:<name>``: retries of rows that did not fail, by stages that
      :class:`ReportsRetries` (read from the :func:`retry_columns`, which the
      observed frame must carry);
    * ``drift:<name>`` / ``drift_fields:<name>``: rows with undeclared fields, and the
      sets of undeclared fields with their counts (as JSON, like ``topics_in``), by
      stages that :class:`ReportsDrift` (read from the :func:`drift_columns`, which the
      observed frame must carry);
    * ``failed_attempts``, ``retries``, ``retriable``, ``expectation_failures``;
    * ``last_error_ts``: the latest source timestamp (epoch ms) among failed rows;
    * ``topics_in``, ``stage_topic_failed``: ``ARRAY<STRUCT<item, count>>`` as JSON, from
      ``approx_top_k`` (Spark 4.0: :func:`_exact_items`) over topics, and over ``stage <US> topic`` of failed rows
      (see the module doc for why, and when it is exact).

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
    cell = F.concat(err.getField("stage"), F.lit(ITEM_SEP), topic)
    exact = not _has_approx_top_k()  # one look at the session's version for both item columns
    cols: list[Column] = [
        F.count(F.lit(1)).alias(RECORDS_IN),
        F.count(err).alias(RECORDS_FAILED),
        F.coalesce(F.sum(F.when(failed, attempts)), zero).alias(_FAILED_ATTEMPTS),
        F.coalesce(F.sum(F.when(failed, attempts - 1)), zero).alias(_RETRIES_FAILED),
        F.count(F.when(err.getField("retriable"), 1)).alias(_RETRIABLE),
        F.count(F.when(err.getField("kind") == ErrorKind.EXPECTATION.value, 1)).alias(_EXPECTATION),
        F.max(F.when(failed, F.unix_millis(ts))).alias(_LAST_ERROR_TS),
        _observed_items(topic, exact=exact).alias(_TOPICS_IN),
        _observed_items(F.when(failed, cell), exact=exact).alias(_CELLS_FAILED),
    ]
    for s in stages:
        mine = err.getField("stage") == s.name
        cols += [
            F.count(F.when(mine, 1)).alias(_stage_key("stage", s.name)),
            F.coalesce(F.sum(F.when(mine, attempts)), zero).alias(_stage_key("attempts", s.name)),
            F.coalesce(F.sum(F.when(mine, attempts - 1)), zero).alias(_stage_key("retries", s.name)),
        ]
        if isinstance(s, ReportsRetries):
            retried = F.coalesce(F.col(retry_column(s.name)), zero)
            cols.append(F.coalesce(F.sum(F.when(~failed, retried)), zero).alias(_stage_key("retried_ok", s.name)))
        if isinstance(s, ReportsDrift):
            drift = F.col(drift_column(s.name))
            cols += [
                F.count(drift).alias(_stage_key("drift", s.name)),
                _observed_items(drift, exact=exact).alias(_stage_key("drift_fields", s.name)),
            ]
    return cols


# --------------------------------------------------------------------------- per batch


def _int(row: Mapping[str, Any], key: str) -> int:
    v = row.get(key)
    return int(v) if v is not None else 0


def _items(entries: str | Iterable[Any] | None) -> dict[str, int]:
    """``approx_top_k`` output → {item: count}; the NULL item (filtered-out rows) dropped.

    ``entries`` is the observed JSON (:func:`_observed_items`: objects with ``item`` and
    ``count``, ``item`` left out when NULL) or ``(item, count)`` pairs.
    """
    if isinstance(entries, str):
        entries = [(e.get("item"), e["count"]) for e in json.loads(entries)]
    out: dict[str, int] = {}
    for e in entries or ():
        item, count = e[0], e[1]
        if item is not None:
            out[str(item)] = out.get(str(item), 0) + int(count)
    return out


def _complete(counts: dict[str, int], total: int, what: str) -> dict[str, int]:
    """Counts that add up to ``total``: any rest goes to :data:`OTHER_TOPIC` (with a warning)."""
    rest = total - sum(counts.values())
    if rest:
        log.warning(
            "%s: expected the per-topic counts to add up to %d, found %d (NULL topics, or "
            "more than %d topics in one batch); %d reported under topic %r",
            what,
            total,
            total - rest,
            MAX_TOPICS,
            rest,
            OTHER_TOPIC,
        )
        counts = {**counts, OTHER_TOPIC: counts.get(OTHER_TOPIC, 0) + rest}
    return counts


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
    topic_attempts: int = 0,
    topic_failed_attempts: int = 0,
) -> BatchMetrics:
    """The batch's metrics from the row observed by :func:`observed_counts`.

    Pure (no Spark). Only what the data pass cannot see is passed in.

    Args:
        observed_row: ``Observation.get`` of the columns of :func:`observed_counts`.
        stages: the same stages, in order.
        now: the batch's write time (fallback for ``last-error-timestamp``).
        errors_logged: error-context lines the error log wrote for the batch.
        dlq_attempts: attempts the quarantine MERGE took (1 = first try succeeded).
        topic_attempts: attempts the DLQ topic's produce took (0: no topic).
        topic_failed_attempts: those of them that failed (:attr:`TopicProduce.failed_attempts
            <quarantine.sinks.dlq_topic.TopicProduce.failed_attempts>`).
        breaches: tolerance breaches of the batch.
    """
    row = observed_row
    mn = MetricNames
    records_in = _int(row, RECORDS_IN)
    failed = _int(row, RECORDS_FAILED)
    names = [s.name for s in stages]
    kinds = {s.name: getattr(s, "kind", None) for s in stages}
    errors = {n: _int(row, _stage_key("stage", n)) for n in names}
    retried_ok = {n: _int(row, _stage_key("retried_ok", n)) for n in names}

    # stage x topic cells of failed records, completed per stage against the exact counts
    sketch: dict[str, dict[str, int]] = {}
    for item, n in _items(row.get(_CELLS_FAILED)).items():
        stage, _, topic = item.partition(ITEM_SEP)
        sketch.setdefault(stage, {})[topic] = n
    failed_cells = {
        s: _complete(sketch.get(s, {}), errors[s], f"records-quarantined at stage {s}") for s in names if errors[s]
    }
    in_topics = _complete(_items(row.get(_TOPICS_IN)), records_in, "records-in")
    failed_by_topic: dict[str, int] = {}
    for topics in failed_cells.values():
        for t, n in topics.items():
            failed_by_topic[t] = failed_by_topic.get(t, 0) + n

    points: list[MetricPoint] = []

    def cells(metric: MetricNames, values: Iterable[tuple[str | None, str | None, int]]) -> None:
        nonzero = [(stage, topic, v) for stage, topic, v in values if v]
        if not nonzero:
            points.append(MetricPoint(metric, 0.0))
        for stage, topic, v in nonzero:
            points.append(MetricPoint(metric, float(v), stage, topic))

    by_cell = [(s, t, n) for s, topics in failed_cells.items() for t, n in sorted(topics.items())]
    for metric in (mn.RECORDS_QUARANTINED, mn.TOTAL_RECORD_ERRORS, mn.TOTAL_RECORDS_SKIPPED):
        cells(metric, by_cell)
    cells(
        mn.EXPECTATION_FAILURES,
        [(s, t, n) for s, t, n in by_cell if kinds.get(s) == ErrorKind.EXPECTATION],
    )
    cells(mn.RECORDS_IN, [(None, t, n) for t, n in sorted(in_topics.items())])
    ok_topics = sorted(set(in_topics) | set(failed_by_topic))
    cells(
        mn.RECORDS_OK,
        [(None, t, in_topics.get(t, 0) - failed_by_topic.get(t, 0)) for t in ok_topics],
    )
    cells(
        mn.TOTAL_RECORD_FAILURES,
        [(n, None, _int(row, _stage_key("attempts", n)) + retried_ok[n]) for n in names],
    )
    cells(
        mn.TOTAL_RETRIES,
        [(n, None, _int(row, _stage_key("retries", n)) + retried_ok[n]) for n in names],
    )
    cells(mn.SCHEMA_DRIFT_RECORDS, [(n, None, _int(row, _stage_key("drift", n))) for n in names])
    last_ms = row.get(_LAST_ERROR_TS)
    last_error = float(last_ms) if last_ms is not None else _epoch_ms(now)
    dlq_attempts = max(dlq_attempts, 1) if failed else 0
    # the table's write, then the DLQ topic's (each attempt sends every failed record)
    requests = failed * (dlq_attempts + topic_attempts)
    failures = failed * (max(dlq_attempts - 1, 0) + topic_failed_attempts)
    points += [
        MetricPoint(mn.TOTAL_ERRORS_LOGGED, float(errors_logged)),
        MetricPoint(mn.DEADLETTERQUEUE_PRODUCE_REQUESTS, float(requests)),
        MetricPoint(mn.DEADLETTERQUEUE_PRODUCE_FAILURES, float(failures)),
        MetricPoint(mn.LAST_ERROR_TIMESTAMP, last_error if failed else 0.0),
        MetricPoint(mn.TOLERANCE_BREACHES, float(breaches)),
    ]
    return BatchMetrics(tuple(points))


def schema_drift(stages: Sequence[Any], observed_row: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``{stage: {undeclared field: records that held it}}`` from the row observed by
    :func:`observed_counts`, for the stages that :class:`ReportsDrift` and saw any.

    Pure (no Spark). Exact while a batch has fewer distinct sets of undeclared fields
    per stage than the sketch tracks (:data:`MAX_TOPICS`); beyond that the rarest sets
    may be missing here (``schema-drift-records`` stays exact).
    """
    out: dict[str, dict[str, int]] = {}
    for s in stages:
        if not isinstance(s, ReportsDrift) or not _int(observed_row, _stage_key("drift", s.name)):
            continue
        fields: dict[str, int] = {}
        for names, n in _items(observed_row.get(_stage_key("drift_fields", s.name))).items():
            for name in names.split(ITEM_SEP):
                fields[name] = fields.get(name, 0) + n
        out[s.name] = dict(sorted(fields.items()))
    return out


# --------------------------------------------------------------------------- per run


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
