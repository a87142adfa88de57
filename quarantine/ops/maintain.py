"""Quarantine table upkeep (``quarantine maintain``): delete old closed rows, OPTIMIZE, VACUUM.

Three steps, in this order, each its own Delta commit (or none):

1. **Delete** this pipeline's ``replayed`` and ``discarded`` rows resolved more than
   ``errors.deadletterqueue.retention.days`` ago (``-1``: keep them). ``open``
   rows are never deleted, however old: only a replay or a discard closes them.
   The delete runs under the write retry (a concurrent pipeline's MERGE may
   commit first).
2. **OPTIMIZE**: compaction, which also clusters the table by its clustering
   columns (pipeline, topic, first_seen_date).
3. **VACUUM** with ``errors.deadletterqueue.vacuum.retention.hours`` (at least
   168, which the config enforces), raised to the table's own
   ``delta.deletedFileRetentionDuration`` when that is longer: a VACUUM never
   retains less than Delta's retention safety check allows, and this package has
   no switch to go below it (readers of an older version, and time travel for
   that long, keep working). Delta's VACUUM lists and groups the table's files in
   ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` tasks: at Spark's
   default (10,000) that alone took ~25 s on a table of a few files on 2 cores, so
   a session still at that default runs the VACUUM at
   :data:`VACUUM_LISTING_PARALLELISM` (the table is clustered, not partitioned:
   its files sit in one folder), and gets its setting back after. A session that
   set its own value keeps it.
"""

from __future__ import annotations

import datetime as dt
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quarantine.config import PipelineConfig
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import QuarantineError
from quarantine.schema import (
    PIPELINE,
    STATUS,
    QuarantineStatus,
)
from quarantine.spark.session import session_setting
from quarantine.tables import read_table, sql_literal, table_exists, table_ref, table_version

__all__ = [
    "DELTA_MIN_RETENTION_HOURS", "VACUUM_LISTING_PARALLELISM", "MaintenanceResult", "maintain", "retention_hours",
]

#: Delta's default ``delta.deletedFileRetentionDuration`` (7 days), the floor of its VACUUM safety check.
DELTA_MIN_RETENTION_HOURS = 168.0

#: The file listing parallelism of a VACUUM in a session at Spark's default (see the module docstring).
VACUUM_LISTING_PARALLELISM = 64
_LISTING = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
_SPARK_DEFAULT_LISTING = "10000"

_UNIT_HOURS = {"week": 168.0, "day": 24.0, "hour": 1.0, "minute": 1 / 60, "second": 1 / 3600,
               "millisecond": 1 / 3_600_000, "microsecond": 1 / 3_600_000_000}
_INTERVAL = re.compile(r"(\d+(?:\.\d+)?)\s*(week|day|hour|minute|second|millisecond|microsecond)s?", re.I)


def retention_hours(interval: str | None) -> float:
    """A Delta interval property (``interval 7 days``, ``168 hours``) in hours; Delta's default if None.

    Raises:
        QuarantineError: the text is not an interval Delta writes.
    """
    if interval is None:
        return DELTA_MIN_RETENTION_HOURS
    parts = _INTERVAL.findall(interval)
    if not parts:
        raise QuarantineError(f"delta.deletedFileRetentionDuration {interval!r} is not an interval like '7 days'")
    return sum(float(n) * _UNIT_HOURS[unit.lower()] for n, unit in parts)


@dataclass(frozen=True)
class MaintenanceResult:
    """What ``quarantine maintain`` did.

    Attributes:
        table: the quarantine table.
        deleted: closed rows deleted (0 when retention is -1 or none were old enough).
        cutoff: rows resolved before this were deleted (None: retention -1, nothing deleted).
        files_compacted: data files OPTIMIZE rewrote (removed).
        vacuum_hours: the retention VACUUM used.
        open_rows: this pipeline's open rows after the delete (never deleted).
    """

    table: str
    deleted: int
    cutoff: dt.datetime | None
    files_compacted: int
    vacuum_hours: float
    open_rows: int

    def render(self) -> str:
        """Three lines: the delete, OPTIMIZE, VACUUM."""
        kept = "kept (errors.deadletterqueue.retention.days: -1)" if self.cutoff is None else (
            f"deleted {self.deleted:,} replayed/discarded row(s) resolved before {self.cutoff:%Y-%m-%d %H:%M} UTC")
        return "\n".join([
            f"maintain {self.table}: {kept}; {self.open_rows:,} open row(s) kept",
            f"  OPTIMIZE: {self.files_compacted:,} file(s) compacted",
            f"  VACUUM: files removed more than {self.vacuum_hours:g} h ago deleted",
        ])


def maintain(spark: SparkSession, config: PipelineConfig, *, now: dt.datetime | None = None) -> MaintenanceResult:
    """Delete old closed rows of ``config``'s pipeline, then OPTIMIZE and VACUUM its quarantine table.

    Args:
        spark: the session.
        config: the pipeline config (its quarantine table, retention keys and write retry).
        now: the current time (injected for tests; default: now, UTC).

    Raises:
        QuarantineError: the quarantine table does not exist.
        TableWriteError: the delete still failed after its retries.
    """
    name = config.errors.dlq_table_name
    if not table_exists(spark, name):
        raise QuarantineError(f"quarantine table {name} does not exist: nothing to maintain")
    now = now or dt.datetime.now(dt.UTC)
    ref = table_ref(name)  # SQL only: works over Spark Connect (no DeltaTable API there)
    mine = f"pipeline = {sql_literal(config.pipeline)}"
    days = config.errors.dlq_retention_days
    cutoff = None if days < 0 else now - dt.timedelta(days=days)
    deleted = 0
    if cutoff is not None:
        closed = f"status IN ('{QuarantineStatus.REPLAYED.value}', '{QuarantineStatus.DISCARDED.value}')"
        # the cutoff with its zone: a session's time zone may not be UTC (Databricks)
        since = cutoff.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00:00")
        old = f"{mine} AND {closed} AND resolved_at IS NOT NULL AND resolved_at < TIMESTAMP '{since}'"
        before = table_version(spark, name)
        retry = RetryWithToleranceOperator.for_writes(config.errors)
        retry.call(
            lambda: spark.sql(f"DELETE FROM {ref} WHERE {old}").collect(), name=f"delete of closed rows from {name}"
        )
        deleted = _deleted_since(spark, name, before)
    optimized = spark.sql(f"OPTIMIZE {ref}").select("metrics.numFilesRemoved").first()
    files = int(optimized[0] or 0) if optimized is not None else 0
    props = spark.sql(f"DESCRIBE DETAIL {ref}").select("properties").first()
    table_hours = retention_hours((props[0] or {}).get("delta.deletedFileRetentionDuration") if props else None)
    hours = max(float(config.errors.dlq_vacuum_retention_hours), table_hours, DELTA_MIN_RETENTION_HOURS)
    with _listing_parallelism(spark):
        spark.sql(f"VACUUM {ref} RETAIN {hours:g} HOURS").collect()
    open_rows = read_table(spark, name).where(
        (F.col(PIPELINE) == F.lit(config.pipeline)) & (F.col(STATUS) == QuarantineStatus.OPEN.value)
    ).count()
    return MaintenanceResult(
        table=name, deleted=deleted, cutoff=cutoff, files_compacted=files, vacuum_hours=hours, open_rows=open_rows
    )


def _listing_parallelism(spark: SparkSession) -> AbstractContextManager[None]:
    """:data:`VACUUM_LISTING_PARALLELISM` for the block, if the session is at Spark's default; restored after."""
    if spark.conf.get(_LISTING, None) in (None, _SPARK_DEFAULT_LISTING):
        return session_setting(spark, _LISTING, str(VACUUM_LISTING_PARALLELISM))
    return nullcontext()


def _deleted_since(spark: SparkSession, name: str, version: int) -> int:
    """Rows deleted by the table's DELETE commits after ``version`` (none if nothing matched)."""
    rows = (
        spark.sql(f"DESCRIBE HISTORY {table_ref(name)} LIMIT 20")
        .where((F.col("version") > version) & (F.col("operation") == "DELETE"))
        .select("operationMetrics").collect()
    )
    return sum(int((r[0] or {}).get("numDeletedRows", 0) or 0) for r in rows)
