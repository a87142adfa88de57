"""Tolerance: ``none``/``all``, a per-run error limit, a rate limit whose windows survive restarts.

The runner calls :meth:`ToleranceGuard.check` once per batch, **after** the
batch's failed records are durable in the quarantine table and **before** the
target write, so a breach never loses a record and never commits the batch's
good rows or offsets.

Rules, checked in this order (every error counts toward the limits, whatever
decided to continue it):

* ``errors.tolerance=none`` — any error not continued by an explicit
  ``errors.handler.<kind>`` fails the run (key ``errors.tolerance``).
* ``errors.tolerance.limit=N`` — the run fails once it has seen more than N
  errors: the batch that brings the run's count to N+1 breaches. A run is this
  process's life (a restart is a new run).
* ``errors.tolerance.rate.limit=N`` with ``errors.tolerance.rate.duration`` —
  the run fails when more than N errors fall in one window. Windows are
  tumbling and aligned to UTC (``minute`` = ``[hh:mm:00, hh:mm+1:00)``), a batch's
  errors fall in the window of its batch time, and windows span micro-batches
  and runs: the counts are kept in a small append-only Delta table next to the
  quarantine table (:func:`window_state_table`), so a restarted pipeline that
  breached keeps failing on new errors until the window rolls.

Why a state table and not the quarantine table's ``last_seen_at``: a replay or a
triage update touches quarantine rows without being a new error, and a record
failing twice in a window is two errors. The state table holds one row per
``(pipeline, run_id, batch_id)`` with errors, written by blind appends (which
never conflict in Delta); a micro-batch replayed after a crash (same run id —
the streaming query id — and batch id) is counted once because reads keep one
row per ``(run_id, batch_id)``.

A breach raises :class:`~quarantine.errors.ToleranceExceededError` naming the
config key (``limit``), the count and the window.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from quarantine.columns import BATCH_ID, PIPELINE, RUN_ID
from quarantine.errorhandling.settings import ErrorsConfig, RateDuration, Tolerance
from quarantine.errors import ToleranceExceededError
from quarantine.tables import read_table, save, table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "WINDOW_STATE_SCHEMA_DDL",
    "DeltaWindowStore",
    "MemoryWindowStore",
    "ToleranceGuard",
    "WindowEntry",
    "WindowStore",
    "window_bounds",
    "window_state_table",
]

#: Columns of the window state table (one row per batch that had errors).
WINDOW_STATE_SCHEMA_DDL = (
    "pipeline STRING, run_id STRING, batch_id BIGINT, recorded_at TIMESTAMP, "
    "window_seconds INT, window_start_s BIGINT, errors BIGINT"
)


def window_bounds(at: dt.datetime, duration: RateDuration) -> tuple[dt.datetime, dt.datetime]:
    """The UTC-aligned tumbling window ``[start, end)`` that contains ``at``.

    A naive ``at`` is taken as UTC.
    """
    aware = at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
    epoch = int(aware.timestamp())
    start = epoch - epoch % duration.seconds
    begin = dt.datetime.fromtimestamp(start, dt.UTC)
    return begin, begin + dt.timedelta(seconds=duration.seconds)


def window_state_table(dlq_table: str) -> str:
    """Where a quarantine table's rate-limit windows are kept: ``<quarantine>_tolerance``."""
    return dlq_table.rstrip("/") + "_tolerance"


@dataclass(frozen=True)
class WindowEntry:
    """One batch's errors, as recorded for the rate limit.

    Attributes:
        pipeline: the pipeline's name.
        run_id: the run (the streaming query id in streaming).
        batch_id: the micro-batch.
        recorded_at: the batch time.
        window_seconds: the window's length.
        window_start_s: the window's start, in epoch seconds (UTC).
        errors: errors in the batch (> 0).
    """

    pipeline: str
    run_id: str
    batch_id: int
    recorded_at: dt.datetime
    window_seconds: int
    window_start_s: int
    errors: int


class WindowStore(Protocol):
    """Durable error counts per window. ``record`` then ``errors_in`` sees the entry."""

    def record(self, entry: WindowEntry) -> None:
        """Add a batch's errors (recording the same run and batch again replaces it)."""

    def errors_in(self, pipeline: str, window_seconds: int, window_start_s: int) -> int:
        """Errors recorded for the pipeline in that window, each batch counted once."""


@dataclass
class MemoryWindowStore:
    """An in-process :class:`WindowStore` (tests, notebooks). Not durable."""

    entries: dict[tuple[str, str, int], WindowEntry] = field(default_factory=dict)

    def record(self, entry: WindowEntry) -> None:
        self.entries[(entry.pipeline, entry.run_id, entry.batch_id)] = entry

    def errors_in(self, pipeline: str, window_seconds: int, window_start_s: int) -> int:
        return sum(
            e.errors
            for e in self.entries.values()
            if e.pipeline == pipeline
            and e.window_seconds == window_seconds
            and e.window_start_s == window_start_s
        )


@dataclass
class DeltaWindowStore:
    """A :class:`WindowStore` in a Delta table (created on first write).

    Blind appends only, so writers never conflict; reads keep the largest count
    per ``(run_id, batch_id)`` (a replayed batch is counted once). The table is
    tiny: one row per batch that had errors.

    Attributes:
        spark: the session.
        table: a path or catalog name (see :func:`window_state_table`).
    """

    spark: SparkSession
    table: str

    def record(self, entry: WindowEntry) -> None:
        df = self.spark.createDataFrame(
            [
                (
                    entry.pipeline, entry.run_id, entry.batch_id, entry.recorded_at,
                    entry.window_seconds, entry.window_start_s, entry.errors,
                )
            ],
            WINDOW_STATE_SCHEMA_DDL,
        )
        try:
            save(df.write.format("delta").mode("append"), self.table)
        except Exception:
            # Two writers creating the table at once: one wins; append again to it.
            if not table_exists(self.spark, self.table):
                raise
            save(df.write.format("delta").mode("append"), self.table)

    def errors_in(self, pipeline: str, window_seconds: int, window_start_s: int) -> int:
        from pyspark.sql import functions as F

        if not table_exists(self.spark, self.table):
            return 0
        rows = (
            read_table(self.spark, self.table)
            .where(
                (F.col(PIPELINE) == pipeline)
                & (F.col("window_seconds") == window_seconds)
                & (F.col("window_start_s") == window_start_s)
            )
            .groupBy(RUN_ID, BATCH_ID)
            .agg(F.max("errors").alias("errors"))
            .agg(F.coalesce(F.sum("errors"), F.lit(0)).alias("errors"))
            .collect()
        )
        return int(rows[0]["errors"]) if rows else 0


@dataclass
class ToleranceGuard:
    """Decides, once per batch, whether the run may go on.

    Attributes:
        errors: the ``errors.*`` config.
        pipeline: the pipeline's name (windows are per pipeline).
        run_id: this run's id.
        store: where rate-limit windows are kept; required when
            ``errors.tolerance.rate.limit`` is set (use :class:`DeltaWindowStore`
            on :func:`window_state_table` for windows that survive restarts).
    """

    errors: ErrorsConfig
    pipeline: str
    run_id: str = ""
    store: WindowStore | None = None
    _by_batch: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.errors.tolerance_rate_limit >= 0 and self.store is None:
            raise ValueError(
                "errors.tolerance.rate.limit is set: the ToleranceGuard needs a WindowStore "
                "(DeltaWindowStore on window_state_table(...) keeps windows across restarts)"
            )

    @property
    def run_errors(self) -> int:
        """Errors this run has seen so far (each batch counted once)."""
        return sum(self._by_batch.values())

    def check(
        self,
        batch_errors: int,
        batch_time: dt.datetime,
        *,
        batch_id: int = 0,
        handled_errors: int = 0,
    ) -> None:
        """Count a batch's errors and raise if the tolerance is breached.

        Call after the batch's failed records are durable and before its good
        rows are written. Checking the same ``batch_id`` again replaces its count.

        Args:
            batch_errors: records of this batch that failed (and were quarantined).
            batch_time: the batch's time (its rate-limit window).
            batch_id: the micro-batch id.
            handled_errors: those of ``batch_errors`` that an explicit
                ``errors.handler.<kind>`` chose to continue; they are exempt from
                ``errors.tolerance=none`` but count toward the limits.

        Raises:
            ToleranceExceededError: naming the limit's key, the count and the window.
        """
        if batch_errors < 0 or not 0 <= handled_errors <= batch_errors:
            raise ValueError(
                f"expected 0 ≤ handled_errors ({handled_errors}) ≤ batch_errors ({batch_errors})"
            )
        self._by_batch[batch_id] = batch_errors
        cfg = self.errors
        in_window = self._record_window(batch_errors, batch_time, batch_id)

        unhandled = batch_errors - handled_errors
        if cfg.tolerance is Tolerance.NONE and unhandled > 0:
            raise ToleranceExceededError(
                f"errors.tolerance=none: {unhandled} record(s) failed in batch {batch_id} "
                f"(pipeline {self.pipeline}); they are in the quarantine table "
                f"{cfg.dlq_table_name}; the batch's good rows and offsets were not committed",
                limit="errors.tolerance", count=unhandled, window=f"batch {batch_id}",
            )
        total = self.run_errors
        if cfg.tolerance_limit >= 0 and total > cfg.tolerance_limit:
            raise ToleranceExceededError(
                f"errors.tolerance.limit={cfg.tolerance_limit} exceeded: {total} errors in run "
                f"{self.run_id or '?'} (pipeline {self.pipeline}), {batch_errors} in batch "
                f"{batch_id}; the failed records are in {cfg.dlq_table_name}; the batch's good "
                "rows and offsets were not committed",
                limit="errors.tolerance.limit", count=total, window=f"run {self.run_id}",
            )
        if in_window is not None:
            count, (start, end) = in_window
            if count > cfg.tolerance_rate_limit:
                window = f"{cfg.tolerance_rate_duration.value} [{_iso(start)}, {_iso(end)})"
                raise ToleranceExceededError(
                    f"errors.tolerance.rate.limit={cfg.tolerance_rate_limit} per "
                    f"{cfg.tolerance_rate_duration.value} exceeded: {count} errors in the window "
                    f"{window} (pipeline {self.pipeline}, {batch_errors} in batch {batch_id}); "
                    f"the failed records are in {cfg.dlq_table_name}; the batch's good rows and "
                    "offsets were not committed",
                    limit="errors.tolerance.rate.limit", count=count, window=window,
                )

    def _record_window(
        self, batch_errors: int, batch_time: dt.datetime, batch_id: int
    ) -> tuple[int, tuple[dt.datetime, dt.datetime]] | None:
        cfg = self.errors
        if cfg.tolerance_rate_limit < 0 or self.store is None:
            return None
        start, end = window_bounds(batch_time, cfg.tolerance_rate_duration)
        seconds = cfg.tolerance_rate_duration.seconds
        start_s = int(start.timestamp())
        if batch_errors > 0:
            self.store.record(
                WindowEntry(
                    self.pipeline, self.run_id, batch_id, batch_time, seconds, start_s, batch_errors
                )
            )
            return self.store.errors_in(self.pipeline, seconds, start_s), (start, end)
        # No new errors: this batch cannot be the one that breaches.
        return 0, (start, end)


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
