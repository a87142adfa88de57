"""A pipeline's report data aggregated in Spark, collected small (catalog tables, Spark Connect, Databricks).

Each figure of the report page (:mod:`quarantine.ops.report_page`) has one pure aggregation here
over the quarantine table (:data:`~quarantine.schema.QUARANTINE_SCHEMA`) or the metrics table
(:data:`~quarantine.schema.METRICS_SCHEMA`), filtered to one pipeline. :func:`collect_report_data`
reads each table at one version and collects the aggregates (a few hundred rows at most) into
a :class:`~quarantine.ops.report_model.ReportData`, which the page draws and ``quarantine report``
summarises. Path tables are aggregated without a JVM, to the same rows, by
:mod:`quarantine.ops.report_duck`: a change to a figure's aggregation here is made there too
(``tests/integration/test_two_engines.py`` compares them).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from quarantine.instants import collect_utc
from quarantine.metrics.cells import MetricNames
from quarantine.ops.report_model import (
    LATEST,
    RUN_KIND_DISCARD,
    RUN_KIND_REPLAY,
    RUN_KIND_RUN,
    STATUSES,
    TOP_ERROR_CLASSES,
    ReportData,
    Rows,
    missing_metrics,
    missing_quarantine,
    time_unit,
)
from quarantine.ops.report_page import require_plotly, write_page
from quarantine.schema import (
    ERROR_CLASS,
    FIRST_SEEN_AT,
    METRIC,
    METRIC_VALUE,
    OFFSET,
    PARTITION,
    PIPELINE,
    RECORDED_AT,
    RESOLUTION,
    RESOLVED_AT,
    RUN_ID,
    RUN_KIND,
    STAGE,
    STATUS,
    TOPIC,
    QuarantineStatus,
)
from quarantine.sinks.quarantine import read_quarantine
from quarantine.tables import read_table_pinned, table_exists

__all__ = [
    "STATUSES",
    "TOP_ERROR_CLASSES",
    "ReportData",
    "Rows",
    "breaches_per_run",
    "collect_report_data",
    "error_classes",
    "offsets_per_partition",
    "pipeline_runs",
    "quarantined_over_time",
    "replay_history",
    "status_counts",
    "time_unit",
    "write_report",
]

#: A breach row's run: when its first metrics row was recorded (the report's own column).
_RUN_AT = "at"


# --------------------------------------------------------------------------- aggregations (pure)


def _records() -> Column:
    return F.count(F.lit(1)).alias("records")


def pipeline_runs() -> Column:
    """True for a metrics-table row of a pipeline run (``run_kind`` ``run``, or NULL: written before the
    column existed), not of a replay or a discard."""
    return F.coalesce(F.col(RUN_KIND), F.lit(RUN_KIND_RUN)) == RUN_KIND_RUN


def quarantined_over_time(quarantine: DataFrame, unit: str) -> DataFrame:
    """``bucket`` (``first_seen_at`` truncated to ``unit``, ``hour`` or ``day``, in UTC whatever the
    session's time zone), ``stage``, ``records``; by bucket, stage."""
    # epoch arithmetic, not date_trunc (which truncates in the session's time zone)
    seconds = {"hour": 3600, "day": 86400}[unit]
    bucket = F.timestamp_seconds(F.floor(F.unix_seconds(F.col(FIRST_SEEN_AT)) / seconds) * seconds).alias("bucket")
    return quarantine.groupBy(bucket, F.col(STAGE)).agg(_records()).orderBy("bucket", STAGE)


def error_classes(quarantine: DataFrame, top: int = TOP_ERROR_CLASSES) -> DataFrame:
    """The ``top`` error classes: ``error_class``, ``records``, ``open_records``; most records first."""
    is_open = (F.col(STATUS) == QuarantineStatus.OPEN.value).cast("long")
    return (
        quarantine.groupBy(ERROR_CLASS)
        .agg(_records(), F.sum(is_open).alias("open_records"))
        .orderBy(F.desc("records"), F.asc_nulls_last(ERROR_CLASS))
        .limit(top)
    )


def offsets_per_partition(quarantine: DataFrame) -> DataFrame:
    """Records and offsets per partition, all of them and split into open and closed ones.

    ``topic``, ``partition``, ``records``, ``min_offset``, ``max_offset`` (every status), then
    ``open_records``, ``open_min_offset``, ``open_max_offset``, ``closed_min_offset``,
    ``closed_max_offset`` (NULL where the partition has none); by topic, partition.
    """
    is_open = F.col(STATUS) == QuarantineStatus.OPEN.value
    open_offset = F.when(is_open, F.col(OFFSET))
    closed_offset = F.when(~is_open, F.col(OFFSET))
    return (
        quarantine.groupBy(TOPIC, PARTITION)
        .agg(
            _records(), F.min(OFFSET).alias("min_offset"), F.max(OFFSET).alias("max_offset"),
            F.sum(is_open.cast("long")).alias("open_records"),
            F.min(open_offset).alias("open_min_offset"), F.max(open_offset).alias("open_max_offset"),
            F.min(closed_offset).alias("closed_min_offset"), F.max(closed_offset).alias("closed_max_offset"),
        )
        .orderBy(TOPIC, PARTITION)
    )


def status_counts(quarantine: DataFrame) -> DataFrame:
    """``status``, ``records``."""
    return quarantine.groupBy(STATUS).agg(_records()).orderBy(STATUS)


def breaches_per_run(metrics: DataFrame, latest: int = LATEST) -> DataFrame:
    """``run_id``, ``at`` (the run's first breach row), ``breaches``, ``stage``: per run and kind of
    breach, the latest runs with a breach, oldest first.

    ``stage`` is the kind: NULL for an error limit's breach (``errors.tolerance*``, a ``fail``
    handler), a judging stage's name for its aggregate expectations' breaches (any
    ``on_breach`` action, ``warn`` included). Sums the ``tolerance-breaches`` rows (a metric's
    rows partition its batch total, so a sum never double counts), the run-end row of a breach
    that ended a run (``batch_id`` NULL) included.
    """
    rows = metrics.where((F.col(METRIC) == MetricNames.TOLERANCE_BREACHES.value) & (F.col(METRIC_VALUE) > 0))
    first = F.min(RECORDED_AT).over(Window.partitionBy(RUN_ID))
    per_kind = rows.withColumn(_RUN_AT, first).groupBy(RUN_ID, _RUN_AT, STAGE).agg(
        F.sum(METRIC_VALUE).cast("long").alias("breaches")
    )
    runs = per_kind.select(RUN_ID, _RUN_AT).distinct().orderBy(F.desc(_RUN_AT), RUN_ID).limit(latest)
    return (
        per_kind.join(runs, [RUN_ID, _RUN_AT])
        .select(RUN_ID, _RUN_AT, "breaches", STAGE)
        .orderBy(_RUN_AT, RUN_ID, F.asc_nulls_first(STAGE))
    )


def resolution_runs(metrics: DataFrame) -> DataFrame:
    """``run_kind``, ``runs``: how many replays and discards ran (distinct run ids), by kind.

    From the metrics table, so a replay that closed nothing (its records failed again) counts:
    the quarantine table's closed rows show only the runs that closed some.
    """
    kinds = [RUN_KIND_REPLAY, RUN_KIND_DISCARD]
    return (
        metrics.where(F.col(RUN_KIND).isin(kinds)).groupBy(RUN_KIND)
        .agg(F.countDistinct(RUN_ID).alias("runs")).orderBy(RUN_KIND)
    )


def replay_history(quarantine: DataFrame, latest: int = LATEST) -> DataFrame:
    """``resolved_at``, ``status``, ``resolution``, ``records``: the latest resolutions, oldest first.

    A replay (or discard) closes its rows with one ``resolved_at`` and one
    ``resolution`` (``replayed by run …`` / ``discarded: <reason>``), so each
    group is one replay or discard.
    """
    closed = quarantine.where((F.col(STATUS) != QuarantineStatus.OPEN.value) & F.col(RESOLVED_AT).isNotNull())
    groups = closed.groupBy(RESOLVED_AT, STATUS, RESOLUTION).agg(_records())
    return groups.orderBy(F.desc(RESOLVED_AT)).limit(latest).orderBy(RESOLVED_AT, STATUS, RESOLUTION)


# --------------------------------------------------------------------------- collecting


def _tuples(df: DataFrame) -> Rows:
    """``df``'s rows, each instant its UTC wall clock (naive: the page labels its times UTC)."""
    return [tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in collect_utc(df)]


def collect_report_data(
    spark: SparkSession,
    *,
    pipeline: str,
    quarantine_table: str,
    metrics_table: str | None,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
    target_table: str | None = None,
) -> ReportData:
    """Aggregate both tables in Spark and collect the figures' rows.

    Each table is read at one version (pinned), so the figures agree with each
    other while a pipeline writes; one small Spark job per figure.

    Args:
        spark: the session.
        pipeline: the pipeline whose rows are reported.
        quarantine_table: ``errors.deadletterqueue.table.name`` (may not exist yet).
        metrics_table: ``metrics.table``, or None when the config has none.
        since: keep only records first seen, breaches recorded and rows resolved at or after it.
        now: the report's time stamp (injected for tests).
        target_table: ``target.table``, whose rows are counted (Delta answers a count from its
            log) for :attr:`ReportData.records`; None, or ``since`` given: not counted.

    Raises:
        ConfigError: ``quarantine_table`` is not a quarantine table.
    """
    at = now or dt.datetime.now(dt.UTC)
    data: dict[str, Any] = {"missing": {}}
    if table_exists(spark, quarantine_table):
        read_quarantine(spark, quarantine_table)  # its columns checked: a wrong table is a ConfigError
        q = read_table_pinned(spark, quarantine_table).where(F.col(PIPELINE) == F.lit(pipeline))
        seen = q if since is None else q.where(F.col(FIRST_SEEN_AT) >= F.lit(since))
        (span,) = collect_utc(seen.agg(F.min(FIRST_SEEN_AT), F.max(FIRST_SEEN_AT)))  # an aggregate: one row
        unit = time_unit(*span)
        resolved = q if since is None else q.where(F.col(RESOLVED_AT) >= F.lit(since))
        data |= {
            "unit": unit,
            "over_time": _tuples(quarantined_over_time(seen, unit)),
            "error_classes": _tuples(error_classes(seen)),
            "partitions": _tuples(offsets_per_partition(seen)),
            "statuses": _tuples(status_counts(seen)),
            "replays": _tuples(replay_history(resolved)),
        }
    else:
        for fig in ("over_time", "error_classes", "partitions", "statuses", "replays"):
            data["missing"][fig] = missing_quarantine(quarantine_table)
    if metrics_table is None or not table_exists(spark, metrics_table):
        data["missing"]["breaches"] = missing_metrics(metrics_table)
    else:
        m = read_table_pinned(spark, metrics_table).where(F.col(PIPELINE) == F.lit(pipeline))
        if since is not None:
            m = m.where(F.col(RECORDED_AT) >= F.lit(since))
        data["breaches"] = _tuples(breaches_per_run(m))
        data["resolution_runs"] = _tuples(resolution_runs(m))
        # records-in has one row per topic per batch: their sum is the total, over the pipeline's own
        # runs only (a replay's records-in are records it selected from quarantine: counted twice)
        in_runs = (F.col(METRIC) == MetricNames.RECORDS_IN.value) & pipeline_runs()
        total = m.where(in_runs).agg(F.sum(METRIC_VALUE)).first()
        data["records_in"] = int(total[0]) if total is not None and total[0] is not None else 0
    if target_table is not None and since is None:
        data["in_target"] = read_table_pinned(spark, target_table).count() if table_exists(spark, target_table) else 0
    return ReportData(
        pipeline=pipeline, generated_at=at, quarantine_table=quarantine_table,
        metrics_table=metrics_table, since=since, **data,
    )


def write_report(
    spark: SparkSession,
    out: str | Path,
    *,
    pipeline: str,
    quarantine_table: str,
    metrics_table: str | None,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
    target_table: str | None = None,
) -> ReportData:
    """Aggregate in Spark, render and write the page to ``out`` (its folders created); the data it shows.

    Raises:
        ReportDependencyError: Plotly is not installed (checked before Spark runs anything).
    """
    require_plotly()
    data = collect_report_data(
        spark, pipeline=pipeline, quarantine_table=quarantine_table, metrics_table=metrics_table,
        since=since, now=now, target_table=target_table,
    )
    write_page(data, out)
    return data
