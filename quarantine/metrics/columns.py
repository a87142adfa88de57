"""The aggregate Columns that count a batch's error metrics in the one pass that reads it.

:func:`observed_counts` returns aggregate Columns for ``DataFrame.observe``. The
runner observes them on the one noop write that also builds the persisted batch,
so every count comes out of the pass that reads the source; nothing here runs an
action. :func:`observed_row` waits for the observed row once that action has run, and
:func:`quarantine.metrics.observed.batch_metrics` reads it (the aliases below are the
contract between the two).

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
of the same pass (:mod:`quarantine.metrics.observed`), so totals stay exact and
nothing is silently lost.

Retries of records that finally *succeeded* leave no trace in the error
struct. A stage that retries can report them by implementing
:class:`ReportsRetries`; :func:`observed_counts` sums its per-row retry column
in the same pass.

Schema drift — fields a record holds that its stage's schema does not declare (the
``json`` stage drops them, or quarantines the record) — is counted the same way: a stage
that implements :class:`ReportsDrift` gives, per row, the undeclared fields it saw;
:func:`observed_counts` counts the rows that had any (``schema-drift-records``) and, with a
frequent-items sketch like the per-topic counts', which fields (:func:`~quarantine.metrics.observed.schema_drift`,
for the run summary).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyspark
from py4j.protocol import Py4JError
from pyspark.sql import Column, Observation
from pyspark.sql import functions as F

from quarantine.columns import ATTEMPTS, ERROR_CLASS, ITEM_SEP, KIND, RETRIABLE, STAGE, TIMESTAMP, TOPIC, ErrorKind
from quarantine.stage import ReportsDrift, ReportsRetries, drift_column, retry_column

__all__ = [
    "CELLS_FAILED",
    "LAST_ERROR_TS",
    "MAX_TOPICS",
    "RECORDS_FAILED",
    "RECORDS_IN",
    "TOPICS_IN",
    "observed_counts",
    "observed_row",
    "stage_key",
]

#: Batches with at most this many distinct topics get exact per-topic counts.
MAX_TOPICS = 1024
#: The sketch's map size: 8x the topics asked for keeps it far from purging.
_MAX_ITEMS_TRACKED = 8 * MAX_TOPICS

#: Aliases of observed columns: :mod:`quarantine.metrics.observed` reads them, and the
#: runner reads ``records_in``, ``records_quarantined`` and ``stage:<name>`` as well.
RECORDS_IN = "records_in"
RECORDS_FAILED = "records_quarantined"
_FAILED_ATTEMPTS = "failed_attempts"
_RETRIES_FAILED = "retries"
_RETRIABLE = "retriable"
_EXPECTATION = "expectation_failures"
LAST_ERROR_TS = "last_error_ts"
TOPICS_IN = "topics_in"
CELLS_FAILED = "stage_topic_failed"


def stage_key(prefix: str, stage: str) -> str:
    """The alias of a per-stage observed column: ``<prefix>:<stage>`` (``stage:parse``)."""
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
    the driver then reports its count under
    :data:`~quarantine.metrics.observed.OTHER_TOPIC` with a warning, so totals stay exact.
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
    topic_col: Column | str = TOPIC,
    timestamp_col: Column | str = TIMESTAMP,
) -> list[Column]:
    """Aggregate Columns for ``DataFrame.observe``: every count of a batch in one pass.

    Pure: builds expressions, runs nothing. Aliases (read by :func:`~quarantine.metrics.observed.batch_metrics`
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
    * ``refresh:<name>``: rows that failed a stage with one of the classes its
      :meth:`~quarantine.stage.Stage.refreshes` names (the streaming runner then refreshes it),
      for stages that name any;
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
    attempts = F.greatest(F.coalesce(err.getField(ATTEMPTS), F.lit(1)), F.lit(1))
    zero = F.lit(0).cast("bigint")
    cell = F.concat(err.getField(STAGE), F.lit(ITEM_SEP), topic)
    exact = not _has_approx_top_k()  # one look at the session's version for both item columns
    cols: list[Column] = [
        F.count(F.lit(1)).alias(RECORDS_IN),
        F.count(err).alias(RECORDS_FAILED),
        F.coalesce(F.sum(F.when(failed, attempts)), zero).alias(_FAILED_ATTEMPTS),
        F.coalesce(F.sum(F.when(failed, attempts - 1)), zero).alias(_RETRIES_FAILED),
        F.count(F.when(err.getField(RETRIABLE), 1)).alias(_RETRIABLE),
        F.count(F.when(err.getField(KIND) == ErrorKind.EXPECTATION.value, 1)).alias(_EXPECTATION),
        F.max(F.when(failed, F.unix_millis(ts))).alias(LAST_ERROR_TS),
        _observed_items(topic, exact=exact).alias(TOPICS_IN),
        _observed_items(F.when(failed, cell), exact=exact).alias(CELLS_FAILED),
    ]
    for s in stages:
        mine = err.getField(STAGE) == s.name
        cols += [
            F.count(F.when(mine, 1)).alias(stage_key("stage", s.name)),
            F.coalesce(F.sum(F.when(mine, attempts)), zero).alias(stage_key("attempts", s.name)),
            F.coalesce(F.sum(F.when(mine, attempts - 1)), zero).alias(stage_key("retries", s.name)),
        ]
        mended = s.refreshes() if callable(getattr(s, "refreshes", None)) else frozenset()
        if mended:
            cols.append(F.count(F.when(mine & err.getField(ERROR_CLASS).isin(sorted(mended)), 1))
                        .alias(stage_key("refresh", s.name)))
        if isinstance(s, ReportsRetries):
            retried = F.coalesce(F.col(retry_column(s.name)), zero)
            cols.append(F.coalesce(F.sum(F.when(~failed, retried)), zero).alias(stage_key("retried_ok", s.name)))
        if isinstance(s, ReportsDrift):
            drift = F.col(drift_column(s.name))
            cols += [
                F.count(drift).alias(stage_key("drift", s.name)),
                _observed_items(drift, exact=exact).alias(stage_key("drift_fields", s.name)),
            ]
    return cols


def observed_row(obs: Observation, timeout_s: float = 10.0) -> Mapping[str, Any] | None:
    """``obs``'s metrics once the action that carried it has run; None if none ran it, or Spark kept them from it.

    A classic session completes observations from its listener bus, a moment
    after the action returns: wait up to ``timeout_s`` for them (``Observation.get``
    would wait for ever if the action skipped its job). Spark Connect returns them
    with the action's result.
    """
    jo = getattr(obs, "_jo", None)
    if jo is None:
        try:
            return obs.get
        except Exception:
            return None
    future = jo.future()
    deadline = time.monotonic() + timeout_s
    while not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)
    # A write that created its catalog table (saveAsTable of a new name: Delta's CREATE
    # TABLE AS SELECT) ran the observed plan in a query of its own; Spark then completes
    # the observation with an empty row, which Spark 4.1's Observation.get fails on
    # (PythonSQLUtils.toPyRow: "assertion failed") after the write has committed, and
    # Spark 4.0's (a map, no getRow) reads as no metrics at all.
    try:
        if jo.getRow().schema() is None:
            return None
    except Py4JError:  # Spark 4.0: no getRow
        pass
    return obs.get or None
