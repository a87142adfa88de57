"""Quarantine table upkeep (``quarantine maintain``): strip old closed rows, OPTIMIZE, VACUUM.

Three steps, in this order, each its own Delta commit (or none):

1. **Strip** this pipeline's ``replayed`` and ``discarded`` rows resolved more than
   ``errors.deadletterqueue.retention.days`` ago (``-1``: keep them whole): their
   :data:`~quarantine.sinks.quarantine.STRIPPED` columns (the record's key, value and
   headers, the failure's message and stack trace) and the messages in its
   ``error_history`` become NULL; the row stays, with its coordinates, timestamp,
   fingerprint, status, stage, error class, history (times and classes) and times, so a
   batch re-run over a source that still holds the record leaves it out
   (closed stays closed; a deleted row would let the record run, and open, again).
   ``open`` rows are never touched, however old: only a replay or a discard closes them.
   The strip is a MERGE under the write retry (a concurrent pipeline's MERGE may commit
   first).

   **Clocks.** ``resolved_at`` is the closing writer's clock. A row is stripped only when
   that clock *and* the table's own clock agree it is old: the Delta commits made since the
   cutoff by the table's clock (``DESCRIBE HISTORY``'s commit times, one clock every
   writer shares), as far back as VACUUM keeps their change data (the VACUUM retention
   below, at least 7 days), are read through the table's Change Data Feed, and a row those
   commits closed is kept whatever its ``resolved_at`` says (a writer's clock behind). Rows whose
   ``resolved_at`` is later than maintain's ``now`` (a writer's clock ahead) are kept and
   counted in the summary. A table without Change Data Feed gets the writer's clock alone,
   and the summary says so.
2. **OPTIMIZE**: compaction, which also clusters the table by its clustering
   columns (pipeline, topic, first_seen_date).
3. **VACUUM** with ``errors.deadletterqueue.vacuum.retention.hours`` (at least
   168, which the config enforces), raised to the table's own
   ``delta.deletedFileRetentionDuration`` when that is longer: a VACUUM never
   retains less than Delta's retention safety check allows, and this package has
   no switch to go below it (readers of an older version, and time travel for
   that long, keep working). Delta's VACUUM lists and groups the table's files in
   ``spark.sql.sources.parallelPartitionDiscovery.parallelism`` tasks: at Spark's
   default (10,000) that listing dominates a small table's VACUUM on a small
   cluster (benchmarks/README.md, "Figures the code's comments rest on"), so a
   session still at that default runs the VACUUM at
   :data:`VACUUM_LISTING_PARALLELISM` (the table is clustered, not partitioned:
   its files sit in one folder), and gets its setting back after. A session that
   set its own value keeps it.
"""

from __future__ import annotations

import datetime as dt
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.columns import PIPELINE, RESOLVED_AT, SOURCE_KEY, STATUS, QuarantineStatus
from quarantine.config import PipelineConfig
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import QuarantineError
from quarantine.sinks.quarantine import strip_settled, stripped
from quarantine.spark.session import session_setting
from quarantine.table_names import is_path
from quarantine.tables import read_table, table_exists, table_ref, table_version

__all__ = [
    "COMMITTED_AT", "DELTA_MIN_RETENTION_HOURS", "VACUUM_LISTING_PARALLELISM", "MaintenanceResult", "maintain",
    "retention_hours", "table_properties", "vacuum", "vacuum_hours",
]

#: Delta's default ``delta.deletedFileRetentionDuration`` (7 days), the floor of its VACUUM safety check.
DELTA_MIN_RETENTION_HOURS = 168.0

#: The file listing parallelism of a VACUUM in a session at Spark's default (see the module docstring).
VACUUM_LISTING_PARALLELISM = 64
_LISTING = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
#: ``DESCRIBE HISTORY``'s commit time column (Delta's, not the quarantine table's ``timestamp``).
COMMITTED_AT = "timestamp"
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
        stripped: closed rows stripped of their bytes and messages (0 when retention is -1 or
            none were old enough); the rows stay.
        cutoff: rows resolved before this were stripped (None: retention -1, nothing stripped).
        files_compacted: data files OPTIMIZE rewrote (removed).
        vacuum_hours: the retention VACUUM used.
        open_rows: this pipeline's open rows (never stripped).
        future_rows: this pipeline's closed rows whose ``resolved_at`` is later than now (a
            writer's clock ahead): kept, counted here.
        recent_rows: closed rows stamped before the cutoff that a commit since the cutoff
            closed (a writer's clock behind): kept, counted here.
        commit_clock: whether the table's commit clock guarded the strip (False: the table
            has no Change Data Feed; ``resolved_at`` alone decided).
    """

    table: str
    stripped: int
    cutoff: dt.datetime | None
    files_compacted: int
    vacuum_hours: float
    open_rows: int
    future_rows: int = 0
    recent_rows: int = 0
    commit_clock: bool = True

    def render(self) -> str:
        """Three lines: the strip (with the rows whose clocks disagree), OPTIMIZE, VACUUM."""
        kept = "kept whole (errors.deadletterqueue.retention.days: -1)" if self.cutoff is None else (
            f"stripped {self.stripped:,} replayed/discarded row(s) resolved before {self.cutoff:%Y-%m-%d %H:%M} UTC "
            "of their bytes and messages (their coordinates, fingerprint and status kept)")
        notes = [f"{self.open_rows:,} open row(s) kept",
                 f"{self.future_rows:,} closed row(s) resolved in the future kept (a writer's clock ahead?)"]
        if self.recent_rows:
            notes.append(f"{self.recent_rows:,} closed row(s) stamped before the cutoff but committed after it kept "
                         "(a writer's clock behind?)")
        if self.cutoff is not None and not self.commit_clock:
            notes.append("resolved_at alone decided: the table has no Change Data Feed to check commit times")
        return "\n".join([
            f"maintain {self.table}: {kept}; " + "; ".join(notes),
            f"  OPTIMIZE: {self.files_compacted:,} file(s) compacted",
            f"  VACUUM: files removed more than {self.vacuum_hours:g} h ago deleted",
        ])


def maintain(spark: SparkSession, config: PipelineConfig, *, now: dt.datetime | None = None) -> MaintenanceResult:
    """Strip old closed rows of ``config``'s pipeline, then OPTIMIZE and VACUUM its quarantine table.

    Args:
        spark: the session.
        config: the pipeline config (its quarantine table, retention keys and write retry).
        now: the current time (injected for tests; default: now, UTC).

    Raises:
        QuarantineError: the quarantine table does not exist.
        TableWriteError: the strip still failed after its retries.
    """
    name = config.errors.dlq_table_name
    if not table_exists(spark, name):
        raise QuarantineError(f"quarantine table {name} does not exist: nothing to maintain")
    now = now or dt.datetime.now(dt.UTC)
    ref = table_ref(name)  # SQL and mergeInto only: works over Spark Connect (no DeltaTable API there)
    properties = table_properties(spark, name)
    hours = vacuum_hours(config, properties)
    mine = read_table(spark, name).where(F.col(PIPELINE) == F.lit(config.pipeline))
    closed = mine.where(F.col(STATUS).isin(QuarantineStatus.REPLAYED.value, QuarantineStatus.DISCARDED.value))
    future = closed.where(F.col(RESOLVED_AT) > F.lit(now).cast("timestamp")).count()
    days = config.errors.dlq_retention_days
    cutoff = None if days < 0 else now - dt.timedelta(days=days)
    stripped_rows = recent = 0
    commit_clock = str(properties.get("delta.enableChangeDataFeed", "false")).lower() == "true"
    if cutoff is not None:
        old = closed.where((F.col(RESOLVED_AT) < F.lit(cutoff).cast("timestamp")) & ~stripped())
        keys = old.select(*SOURCE_KEY).distinct()
        if commit_clock:
            since = max(cutoff, now - dt.timedelta(hours=hours))
            late = _closed_since(spark, name, config.pipeline, since)
            if late is not None:
                recent = keys.join(late, list(SOURCE_KEY), "left_semi").count()
                keys = keys.join(late, list(SOURCE_KEY), "left_anti")
        before = table_version(spark, name)
        retry = RetryWithToleranceOperator.for_writes(config.errors)
        retry.call(
            lambda: strip_settled(spark, name, keys, pipeline=config.pipeline, before=cutoff),
            name=f"strip of closed rows in {name}",
        )
        stripped_rows = _updated_since(spark, name, before)
    optimized = spark.sql(f"OPTIMIZE {ref}").select("metrics.numFilesRemoved").first()
    files = int(optimized[0] or 0) if optimized is not None else 0
    vacuum(spark, name, hours)
    open_rows = read_table(spark, name).where(
        (F.col(PIPELINE) == F.lit(config.pipeline)) & (F.col(STATUS) == QuarantineStatus.OPEN.value)
    ).count()
    return MaintenanceResult(
        table=name, stripped=stripped_rows, cutoff=cutoff, files_compacted=files, vacuum_hours=hours,
        open_rows=open_rows, future_rows=future, recent_rows=recent, commit_clock=commit_clock,
    )


def table_properties(spark: SparkSession, name: str) -> dict[str, str]:
    """The Delta table's properties (``DESCRIBE DETAIL``)."""
    props = spark.sql(f"DESCRIBE DETAIL {table_ref(name)}").select("properties").first()
    return dict((props[0] or {}) if props else {})


def vacuum_hours(config: PipelineConfig, properties: dict[str, str]) -> float:
    """The retention a VACUUM of the quarantine table keeps: ``errors.deadletterqueue.vacuum.retention.hours``,
    raised to the table's ``delta.deletedFileRetentionDuration`` and Delta's 168 hours."""
    table_hours = retention_hours(properties.get("delta.deletedFileRetentionDuration"))
    return max(float(config.errors.dlq_vacuum_retention_hours), table_hours, DELTA_MIN_RETENTION_HOURS)


def vacuum(spark: SparkSession, name: str, hours: float) -> None:
    """``VACUUM`` the table, keeping files removed in the last ``hours`` (the listing at
    :data:`VACUUM_LISTING_PARALLELISM` in a session at Spark's default, see the module doc)."""
    with _listing_parallelism(spark):
        spark.sql(f"VACUUM {table_ref(name)} RETAIN {hours:g} HOURS").collect()


def _closed_since(spark: SparkSession, name: str, pipeline: str, since: dt.datetime) -> DataFrame | None:
    """The coordinates of ``pipeline``'s rows that commits at or after ``since`` (the table's clock) closed.

    Read from the table's Change Data Feed (post-images and inserts with a closed status) of
    the first commit ``DESCRIBE HISTORY`` dates at or after ``since`` onwards; None when no
    commit is that recent.
    """
    first = (
        spark.sql(f"DESCRIBE HISTORY {table_ref(name)}")
        .where(F.col(COMMITTED_AT) >= F.lit(since).cast("timestamp"))
        .agg(F.min("version")).first()
    )
    if first is None or first[0] is None:
        return None
    reader = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", int(first[0]))
    changes = reader.load(name) if is_path(name) else reader.table(name)
    return changes.where(
        (F.col(PIPELINE) == F.lit(pipeline))
        & F.col("_change_type").isin("update_postimage", "insert")
        & F.col(STATUS).isin(QuarantineStatus.REPLAYED.value, QuarantineStatus.DISCARDED.value)
    ).select(*SOURCE_KEY).distinct()


def _listing_parallelism(spark: SparkSession) -> AbstractContextManager[None]:
    """:data:`VACUUM_LISTING_PARALLELISM` for the block, if the session is at Spark's default; restored after."""
    if spark.conf.get(_LISTING, None) in (None, _SPARK_DEFAULT_LISTING):
        return session_setting(spark, _LISTING, str(VACUUM_LISTING_PARALLELISM))
    return nullcontext()


def _updated_since(spark: SparkSession, name: str, version: int) -> int:
    """Rows updated by the table's MERGE commits after ``version`` (none if nothing matched)."""
    rows = (
        spark.sql(f"DESCRIBE HISTORY {table_ref(name)} LIMIT 20")
        .where((F.col("version") > version) & (F.col("operation") == "MERGE"))
        .select("operationMetrics").collect()
    )
    return sum(int((r[0] or {}).get("numTargetRowsUpdated", 0) or 0) for r in rows)
