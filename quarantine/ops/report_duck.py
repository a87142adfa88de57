"""A pipeline's report data on DuckDB: path tables aggregated without a JVM, to Spark's numbers.

``quarantine report`` over path tables (:mod:`quarantine.commands.report_local`) collects
its :class:`~quarantine.ops.report_model.ReportData` here: the quarantine and metrics
tables read by delta-rs into Arrow (each once, its current snapshot: the figures agree with
each other) and aggregated by DuckDB in this process. Each figure's query is the one of
:mod:`quarantine.ops.report_data` (Spark) in SQL, with Spark's semantics kept where the
engines differ: buckets by epoch seconds in UTC, a DOUBLE sum truncated to a whole number
as Spark's cast does, NULLs first ascending and last descending, ``error_class`` NULLs
last. ``tests/integration/test_two_engines.py`` holds both engines' data and page equal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from quarantine.columns import (
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
from quarantine.config import PipelineConfig
from quarantine.errors import DeltaRsUnreadableError, QuarantineError
from quarantine.metrics.cells import MetricNames
from quarantine.ops.delta_arrow import row_count
from quarantine.ops.duck import Session
from quarantine.ops.report_model import (
    LATEST,
    RUN_KIND_DISCARD,
    RUN_KIND_REPLAY,
    RUN_KIND_RUN,
    TOP_ERROR_CLASSES,
    ReportData,
    Rows,
    counted_target,
    missing_metrics,
    missing_quarantine,
    time_unit,
)

__all__ = ["QUARANTINE_COLUMNS", "collect_report_data"]

#: The quarantine table's columns the report reads: a table without them is not one (Spark says why).
QUARANTINE_COLUMNS = frozenset({PIPELINE, TOPIC, PARTITION, OFFSET, STAGE, ERROR_CLASS, STATUS, FIRST_SEEN_AT,
                                RESOLVED_AT, RESOLUTION})
#: A breach row's run: when its first metrics row was recorded (a keyword in DuckDB: quoted).
_AT = '"at"'
_OPEN = f"CAST({STATUS} = '{QuarantineStatus.OPEN.value}' AS BIGINT)"


def _naive(rows: list[list[Any]]) -> Rows:
    """Rows as tuples, each instant its UTC wall clock (naive: the page labels its times UTC)."""
    return [tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in rows]


def collect_report_data(
    config: PipelineConfig,
    *,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
) -> ReportData | None:
    """Aggregate ``config``'s path tables on DuckDB: the data ``quarantine report`` draws.

    Args:
        config: the pipeline config (its pipeline, quarantine table, ``metrics.table`` and target, paths;
            the target's rows are counted from its files' footers, :func:`~quarantine.ops.delta_arrow.row_count`).
        since: keep only records first seen, breaches recorded and rows resolved at or after it.
        now: the report's time stamp (injected for tests).

    Returns:
        The data, as :func:`quarantine.ops.report_data.collect_report_data` collects it in
        Spark; None when the quarantine table lacks a column the report reads (Spark says
        which, as a config error).

    Raises:
        DeltaRsUnreadableError: delta-rs or DuckDB cannot read a table (Spark reads it instead).
    """
    at = now or dt.datetime.now(dt.UTC)
    pipeline, quarantine_table, metrics_table = config.pipeline, config.errors.dlq_table_name, config.metrics.table
    session = Session(config)
    values: dict[str, Any] = {"pipeline": pipeline} | ({"since": since} if since is not None else {})
    data: dict[str, Any] = {"missing": {}}

    def rows(sql: str) -> Rows:
        used = {k: v for k, v in values.items() if f"${k}" in sql}
        return _naive(session.rows(sql, used)[1])

    try:
        session.need("quarantine")
    except DeltaRsUnreadableError:
        raise
    except QuarantineError:
        for fig in ("over_time", "error_classes", "partitions", "statuses", "replays"):
            data["missing"][fig] = missing_quarantine(quarantine_table)
    else:
        if not set(session.rows("SELECT * FROM quarantine LIMIT 0")[0]) >= QUARANTINE_COLUMNS:
            return None
        data |= _quarantine_figures(rows, since)
    if metrics_table is None:
        data["missing"]["breaches"] = missing_metrics(None)
    else:
        try:
            session.need("metrics")
        except DeltaRsUnreadableError:
            raise
        except QuarantineError:
            data["missing"]["breaches"] = missing_metrics(metrics_table)
        else:
            data |= _metrics_figures(rows, since)
    target = counted_target(config)
    if target is not None and since is None:
        try:
            data["in_target"] = row_count(target, "target")
        except DeltaRsUnreadableError:
            raise
        except QuarantineError:  # no target yet
            data["in_target"] = 0
    return ReportData(
        pipeline=pipeline, generated_at=at, quarantine_table=quarantine_table,
        metrics_table=metrics_table, since=since, **data,
    )


def _quarantine_figures(rows: Callable[[str], Rows], since: dt.datetime | None) -> dict[str, Any]:
    """over_time, error_classes, partitions, statuses and replays (:mod:`quarantine.ops.report_data`'s)."""
    mine = f"{PIPELINE} = $pipeline"
    seen = f"(SELECT * FROM quarantine WHERE {mine}" + (f" AND {FIRST_SEEN_AT} >= $since)" if since else ")")
    resolved = f"(SELECT * FROM quarantine WHERE {mine}" + (f" AND {RESOLVED_AT} >= $since)" if since else ")")
    ((first, last),) = rows(f"SELECT min({FIRST_SEEN_AT}), max({FIRST_SEEN_AT}) FROM {seen}")
    unit = time_unit(first, last)
    seconds = {"hour": 3600, "day": 86400}[unit]
    bucket = (f"spark_timestamp_seconds(CAST(floor(spark_unix_seconds({FIRST_SEEN_AT}) / {seconds}) AS BIGINT) "
              f"* {seconds})")
    open_offset = f'CASE WHEN {STATUS} = \'{QuarantineStatus.OPEN.value}\' THEN "{OFFSET}" END'
    closed_offset = f'CASE WHEN NOT ({STATUS} = \'{QuarantineStatus.OPEN.value}\') THEN "{OFFSET}" END'
    return {
        "unit": unit,
        "over_time": rows(f"SELECT {bucket} AS bucket, {STAGE}, count(1) AS records FROM {seen} "
                          f"GROUP BY bucket, {STAGE} ORDER BY bucket, {STAGE}"),
        "error_classes": rows(
            f"SELECT {ERROR_CLASS}, count(1) AS records, sum({_OPEN}) AS open_records FROM {seen} "
            f"GROUP BY {ERROR_CLASS} ORDER BY records DESC, {ERROR_CLASS} ASC NULLS LAST LIMIT {TOP_ERROR_CLASSES}"
        ),
        "partitions": rows(
            f'SELECT {TOPIC}, "{PARTITION}", count(1) AS records, min("{OFFSET}"), max("{OFFSET}"), sum({_OPEN}), '
            f"min({open_offset}), max({open_offset}), min({closed_offset}), max({closed_offset}) FROM {seen} "
            f'GROUP BY {TOPIC}, "{PARTITION}" ORDER BY {TOPIC}, "{PARTITION}"'
        ),
        "statuses": rows(f"SELECT {STATUS}, count(1) AS records FROM {seen} GROUP BY {STATUS} ORDER BY {STATUS}"),
        "replays": rows(
            f"SELECT * FROM (SELECT {RESOLVED_AT}, {STATUS}, {RESOLUTION}, count(1) AS records FROM {resolved} "
            f"WHERE {STATUS} != '{QuarantineStatus.OPEN.value}' AND {RESOLVED_AT} IS NOT NULL "
            f"GROUP BY {RESOLVED_AT}, {STATUS}, {RESOLUTION} ORDER BY {RESOLVED_AT} DESC LIMIT {LATEST}) "
            f"ORDER BY {RESOLVED_AT}, {STATUS}, {RESOLUTION}"
        ),
    }


def _metrics_figures(rows: Callable[[str], Rows], since: dt.datetime | None) -> dict[str, Any]:
    """breaches, resolution_runs and records_in (:mod:`quarantine.ops.report_data`'s)."""
    m = f"(SELECT * FROM metrics WHERE {PIPELINE} = $pipeline" + (f" AND {RECORDED_AT} >= $since)" if since else ")")
    per_kind = (
        f"SELECT {RUN_ID}, {_AT}, {STAGE}, CAST(trunc(sum({METRIC_VALUE})) AS BIGINT) AS breaches FROM "
        f"(SELECT *, min({RECORDED_AT}) OVER (PARTITION BY {RUN_ID}) AS {_AT} FROM {m} "
        f"WHERE {METRIC} = '{MetricNames.TOLERANCE_BREACHES.value}' AND {METRIC_VALUE} > 0) "
        f"GROUP BY {RUN_ID}, {_AT}, {STAGE}"
    )
    breaches = (
        f"WITH per_kind AS ({per_kind}), runs AS (SELECT DISTINCT {RUN_ID}, {_AT} FROM per_kind "
        f"ORDER BY {_AT} DESC, {RUN_ID} LIMIT {LATEST}) "
        f"SELECT {RUN_ID}, {_AT}, breaches, {STAGE} FROM per_kind JOIN runs USING ({RUN_ID}, {_AT}) "
        f"ORDER BY {_AT}, {RUN_ID}, {STAGE} ASC NULLS FIRST"
    )
    ((total,),) = rows(
        f"SELECT sum({METRIC_VALUE}) FROM {m} WHERE {METRIC} = '{MetricNames.RECORDS_IN.value}' "
        f"AND coalesce({RUN_KIND}, '{RUN_KIND_RUN}') = '{RUN_KIND_RUN}'"
    )
    return {
        "breaches": rows(breaches),
        "resolution_runs": rows(
            f"SELECT {RUN_KIND}, count(DISTINCT {RUN_ID}) AS runs FROM {m} "
            f"WHERE {RUN_KIND} IN ('{RUN_KIND_REPLAY}', '{RUN_KIND_DISCARD}') GROUP BY {RUN_KIND} ORDER BY {RUN_KIND}"
        ),
        "records_in": int(total) if total is not None else 0,
    }
