"""Replay and discard: how records leave ``open`` in the quarantine table.

Replay re-runs a pipeline's open quarantine rows — their raw bytes, exactly as
they were read — through the pipeline's *current* stages (the fixed parser,
the widened check). Records that now pass go to the target (insert-only MERGE
on the source coordinates, so a replay can be repeated) and their quarantine
rows become ``status = 'replayed'``; records that still fail stay ``open`` with
the new failure added to ``error_history``. Whether a record passed comes from
its own result in the replay, never from shared state such as who last wrote
its quarantine row.

The rows to replay are read from one pinned version of the quarantine table,
and only those rows are resolved, so rows written concurrently by a running
pipeline are never touched. A crash mid-replay is repaired by replaying again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.errors import QuarantineError
from quarantine.pipeline import Pipeline
from quarantine.report import BatchReport
from quarantine.schema import KAFKA_SOURCE_SCHEMA, QuarantineStatus
from quarantine.sinks import is_path, table_exists, table_version
from quarantine.sinks.quarantine import close_records

__all__ = ["ReplayResult", "discard", "open_records", "replay"]


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did.

    Attributes:
        selected: open rows selected for replay.
        replayed: rows that now pass (written to the target, marked replayed).
        still_failing: rows that failed again (still open, history grown).
        report: the batch report of the replay run.
    """

    selected: int
    replayed: int
    still_failing: int
    report: BatchReport

    def render(self) -> str:
        return (
            f"replay: {self.selected:,} open record(s) selected, {self.replayed:,} replayed to the "
            f"target, {self.still_failing:,} still failing (still open)"
        )


def _version(pipe: Pipeline) -> int:
    return table_version(pipe.spark, pipe.quarantine_table)


def open_records(pipe: Pipeline, where: str | None = None, *, version: int | None = None) -> DataFrame:
    """The pipeline's open quarantine rows (optionally filtered by a SQL predicate)."""
    name = pipe.quarantine_table
    if not table_exists(pipe.spark, name):
        raise QuarantineError(f"quarantine table {name} does not exist yet: nothing to replay")
    reader = pipe.spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(name) if is_path(name) else reader.table(name)
    df = df.where(
        (F.col("pipeline") == pipe.config.pipeline) & (F.col("status") == QuarantineStatus.OPEN.value)
    )
    return df.where(where) if where else df


def replay(pipe: Pipeline, where: str | None = None, *, now: dt.datetime | None = None) -> ReplayResult:
    """Re-run open quarantine rows through the pipeline's stages.

    Each selected record's outcome is its own result in this replay: one that
    passes is written to the target (insert-only MERGE on the source
    coordinates) and then closed as ``replayed``; one that fails again stays
    ``open`` with the new error. Replay has its own policy: tolerance, limits,
    ``errors.handler.*: fail`` and ``on_breach: fail`` never fail it for a record
    that still fails. Replaying twice is a no-op for records already closed.

    Args:
        pipe: the pipeline (its current stages and tables); use a fresh run id.
        where: an optional SQL predicate over quarantine columns
            (``"stage = 'parse_order' AND first_seen_date >= '2026-11-01'"``).
        now: the resolution time (injected for tests).

    Returns:
        Counts of selected / replayed / still failing rows.
    """
    if not pipe.config.target.source_columns:
        raise QuarantineError(
            "replay needs target.source_columns: true (the target is de-duplicated on them)"
        )
    if now is not None:
        pipe = replace(pipe, clock=lambda: now)
    selected = open_records(pipe, where, version=_version(pipe))
    source = selected.select(*[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields])
    report = pipe.start_run().process_batch(source, 0, replaying=True)
    return ReplayResult(
        selected=report.records_in,
        replayed=report.records_ok,
        still_failing=report.records_quarantined,
        report=report,
    )


def discard(pipe: Pipeline, where: str, reason: str, *, now: dt.datetime | None = None) -> int:
    """Mark open quarantine rows matching ``where`` as discarded, with a reason.

    A discarded record stays discarded: batch re-runs leave it out, and it is
    never written to the target (only an explicit replay of it could be).

    Returns:
        How many rows were discarded.
    """
    if not where.strip():
        raise QuarantineError("discard needs a --where predicate; refusing to discard every open row")
    if not reason.strip():
        raise QuarantineError("discard needs a --reason (it is kept in the resolution column)")
    version = _version(pipe)
    keys = open_records(pipe, where, version=version).select("topic", "partition", "offset")
    n = keys.count()  # reported to the user; not a data-path decision
    at = now or pipe.clock()
    # under the write retry: a concurrent run or replay committing first is a conflict to retry
    pipe.write(
        "discard", pipe.quarantine_table, 0,
        lambda: close_records(
            pipe.spark, pipe.quarantine_table, keys, pipeline=pipe.config.pipeline,
            status=QuarantineStatus.DISCARDED, resolution=f"discarded: {reason}", now=at,
        ),
        quarantine=True,
    )
    return n
