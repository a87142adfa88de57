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
pipeline are never touched. A crash mid-replay is repaired by replaying again:
a record whose target row was written before the crash, its quarantine row still
open, runs again, adds nothing to the target and is closed (once).

Replay and discard are runs of their own kind (:class:`~quarantine.columns.RunKind`):
their listeners (the metrics table with ``run_kind``, MLflow with the
``quarantine.run_kind`` tag) hear of them like of a pipeline run. A replay's dry run
(:func:`preview_replay`) says what its selection would do through the current stages and
writes nothing; the selection itself, and a discard's dry run, which is that selection,
are one read on either engine (:func:`quarantine.ops.reads.replay_selection`).

A ``--where`` predicate is checked against the quarantine table's columns before
anything is read (:func:`check_predicate`): an unknown column or bad SQL is a
:class:`~quarantine.errors.ConfigError`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.batch.plan import Plan, refuse_pipeline_tables
from quarantine.batch.run import start_run
from quarantine.batch.settle import prepare
from quarantine.batch.writes import BatchMode
from quarantine.columns import (
    ENCRYPTION_KEY_ID,
    ERROR,
    ERROR_CLASS,
    FINGERPRINT,
    PIPELINE,
    SOURCE_KEY,
    SOURCE_PAYLOAD,
    STAGE,
    STATUS,
    QuarantineStatus,
    RunKind,
)
from quarantine.dry_run import ErrorGroup, group_lines, largest_first
from quarantine.encryption import open_payload, unreadable
from quarantine.errorhandling.retry import retried_write
from quarantine.errors import (
    ConfigError,
    KeyUnavailableError,
    MissingTableError,
    QuarantineError,
    QuarantineWriteError,
    describe_failure,
)
from quarantine.listeners.events import BatchReport, RunStatus
from quarantine.metrics.cells import MetricNames
from quarantine.schema import KAFKA_SOURCE_SCHEMA, QUARANTINE_SCHEMA
from quarantine.sinks.quarantine import close_records, row_fingerprint
from quarantine.table_names import is_path
from quarantine.tables import table_exists, table_version
from quarantine.unlogged import unlogged_analysis

__all__ = [
    "Preview",
    "ReplayResult",
    "check_predicate",
    "discard",
    "open_records",
    "preview_replay",
    "readable_records",
    "replay",
    "replay_outcomes",
]

@dataclass(frozen=True)
class ReplayResult:
    """What a replay did.

    Attributes:
        selected: open rows selected for replay.
        replayed: rows that now pass, closed as replayed by this replay (written to the
            target by its commit, or found there already: ``report.already_in_target``).
        still_failing: rows that failed again (still open, history grown).
        report: the batch report of the replay run (its run id is the replay's).
    """

    selected: int
    replayed: int
    still_failing: int
    report: BatchReport

    def render(self) -> str:
        already = self.report.already_in_target
        return (
            f"replay: {self.selected:,} open record(s) selected, {self.replayed:,} replayed to the "
            f"target, {self.still_failing:,} still failing (still open)"
            + (f" ({already:,} of them were in the target already: written by another writer)" if already else "")
            + f"\n  run {self.report.run.run_id} (run_kind replay)"
        )


@dataclass(frozen=True)
class Preview:
    """What a replay would do now with its selection (its dry run's second part); nothing was written.

    Attributes:
        selected: the open rows the predicate selects.
        would_pass: the selected records that pass the current stages now: a replay would
            write them to the target and close them.
        groups: the records that would still fail, by their *new* failure, largest first.
    """

    selected: int
    would_pass: int
    groups: tuple[ErrorGroup, ...]

    def render(self) -> str:
        """A few lines: the counts, then the largest groups (at most :data:`SHOWN_GROUPS`); printed after
        the selection (:class:`~quarantine.dry_run.ReplaySelection`)."""
        failing = self.selected - self.would_pass
        head = (f"through the current stages: {self.would_pass:,} would be replayed to the target, "
                f"{failing:,} would still fail")
        return "\n".join([head + (":" if self.groups else ""), *group_lines(self.groups)])


def check_predicate(spark: SparkSession, where: str) -> None:
    """Check a ``--where`` predicate against the quarantine table's columns; run no Spark job.

    The predicate is parsed and analysed over an empty frame with
    :data:`~quarantine.schema.QUARANTINE_SCHEMA` (Spark Connect analyses lazily:
    asking for the schema forces it).

    Raises:
        ConfigError: ``--where`` is not SQL, names a column the quarantine table does
            not have, or is not a boolean condition; the message has Spark's reason.
    """
    try:
        with unlogged_analysis():
            spark.createDataFrame([], QUARANTINE_SCHEMA).where(where).schema  # noqa: B018 - forces analysis
    except PySparkException as exc:
        reason = describe_failure(exc).split("\n")[0][:400]
        columns = ", ".join(f.name for f in QUARANTINE_SCHEMA.fields if f.name not in SOURCE_PAYLOAD)
        raise ConfigError(
            "--where", where,
            f"a SQL condition over the quarantine table's columns ({columns}, …); Spark says: {reason}",
        ) from None


def _version(pipe: Plan) -> int:
    return table_version(pipe.spark, pipe.quarantine_table)


def open_records(pipe: Plan, where: str | None = None, *, version: int | None = None) -> DataFrame:
    """The pipeline's open quarantine rows (optionally filtered by a SQL predicate).

    Raises:
        ConfigError: ``where`` is not a condition over the quarantine columns (:func:`check_predicate`).
        MissingTableError: the quarantine table does not exist yet.
    """
    if where:
        check_predicate(pipe.spark, where)
    name = pipe.quarantine_table
    if not table_exists(pipe.spark, name):
        raise MissingTableError("quarantine", name)
    reader = pipe.spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(name) if is_path(name) else reader.table(name)
    df = df.where(
        (F.col(PIPELINE) == pipe.config.pipeline) & (F.col(STATUS) == QuarantineStatus.OPEN.value)
    )
    return df.where(where) if where else df


def readable_records(pipe: Plan, selected: DataFrame, what: str) -> DataFrame:
    """``selected`` quarantine rows with their raw bytes opened (:func:`quarantine.encryption.open_payload`).

    Raises:
        KeyUnavailableError: some are encrypted under a key this process cannot read; one job
            counts them by key, before anything is written; the message names each key and why.
    """
    keys = pipe.key_ring()
    if ENCRYPTION_KEY_ID in selected.columns:
        found = selected.where(unreadable(keys)).groupBy(ENCRYPTION_KEY_ID).count().collect()
        if found:
            said = "; ".join(f"{int(r['count']):,} record(s) under {keys.why_not(r[ENCRYPTION_KEY_ID])}"
                             for r in sorted(found, key=lambda r: r[ENCRYPTION_KEY_ID]))
            raise KeyUnavailableError(f"{what} refused, nothing was written: the selected records' bytes are "
                                      f"encrypted and cannot be opened here: {said}")
    return open_payload(selected, keys)


def replay_outcomes(pipe: Plan, where: str | None = None, *, version: int | None = None) -> DataFrame:
    """Per selected open record, its outcome through the current stages now (lazy; writes nothing).

    Columns: the source coordinates (``topic``, ``partition``, ``offset``), the
    record's quarantined failure (``stage``, ``error_class``), ``would_pass``, and its
    new failure if it would still fail (``new_stage``, ``new_error_class``,
    ``new_message``; NULL when it would pass). Row-level outcomes only: a replay
    does not apply batch-level expectation verdicts either (see :func:`replay`).
    """
    pipe.config.target.require_source_columns()
    selected = open_records(pipe, where, version=_version(pipe) if version is None else version)
    old = selected.select(
        *[F.col(c).alias(f"_old_{c}") for c in (*SOURCE_KEY, "stage", "error_class")],
        row_fingerprint(selected).alias(f"_old_{FINGERPRINT}"),
    )
    readable = readable_records(pipe, selected, "replay --dry-run")
    split = pipe.split_frame(prepare(pipe, readable.select(*[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields])))
    new = split.select(
        *SOURCE_KEY, FINGERPRINT,
        F.col(ERROR).isNull().alias("would_pass"),
        F.col(f"{ERROR}.stage").alias("new_stage"),
        F.col(f"{ERROR}.error_class").alias("new_error_class"),
        F.col(f"{ERROR}.message").alias("new_message"),
    )
    joined = new.join(old, [new[c].eqNullSafe(old[f"_old_{c}"]) for c in (*SOURCE_KEY, FINGERPRINT)], "left")
    return joined.select(
        *SOURCE_KEY, F.col("_old_stage").alias(STAGE), F.col("_old_error_class").alias(ERROR_CLASS),
        "would_pass", "new_stage", "new_error_class", "new_message",
    )


def _groups(pipe: Plan, df: DataFrame, stage: str, error_class: str, message: str) -> list[tuple[int, ErrorGroup]]:
    """Rows by stage and error class, each group's smallest message its example (opened where its key
    is readable here, else ``encrypted (N bytes)``)."""
    rows = df.groupBy(F.col(stage).alias("s"), F.col(error_class).alias("c")).agg(
        F.count(F.lit(1)).alias("n"), F.min(message).alias("m")
    ).collect()
    keys = pipe.key_ring()
    return [(int(r["n"]), ErrorGroup(r["s"], r["c"], int(r["n"]), keys.open_text(r["m"]))) for r in rows]


def _largest_first(groups: list[tuple[int, ErrorGroup]]) -> tuple[ErrorGroup, ...]:
    return largest_first(g for _, g in groups)


def preview_replay(pipe: Plan, where: str | None = None, *, version: int | None = None) -> Preview:
    """What :func:`replay` would do now (``quarantine replay --dry-run``'s second part): nothing is written.

    One Spark job over the selected records (at the quarantine table's ``version``, its
    current one by default): how many would pass, and those that would still fail grouped
    by their new stage and error class.
    """
    outcomes = replay_outcomes(pipe, where, version=version)
    groups = _groups(pipe, outcomes, "new_stage", "new_error_class", "new_message")
    passing = sum(n for n, g in groups if g.stage is None and g.error_class is None)
    failing = [(n, g) for n, g in groups if not (g.stage is None and g.error_class is None)]
    return Preview(selected=sum(n for n, _ in groups), would_pass=passing, groups=_largest_first(failing))


def replay(pipe: Plan, where: str | None = None, *, now: dt.datetime | None = None) -> ReplayResult:
    """Re-run open quarantine rows through the pipeline's stages, as a run of kind ``replay``.

    Each selected record's outcome is its own result in this replay: one that
    passes is written to the target (insert-only MERGE on the source
    coordinates) and then closed as ``replayed``; one that fails again stays
    ``open`` with the new error. Replay has its own policy: tolerance, limits,
    ``errors.handler.*: fail`` and ``on_breach`` never act on a replay, and
    expectation stages' batch-level verdicts (row counts, means) are not taken
    over a replay's selection, which is not a batch of the source: each record
    passes or fails its row-level checks. Replaying twice is a no-op for records
    already closed. The pipeline's listeners get the replay as a run (start, one
    batch report, end).

    Args:
        pipe: the pipeline (its current stages and tables); use a fresh run id.
        where: an optional SQL predicate over quarantine columns
            (``"stage = 'parse_order' AND first_seen_date >= '2026-11-01'"``).
        now: the resolution time (injected for tests).

    Returns:
        Counts of selected / replayed / still failing rows.

    Raises:
        ConfigError: ``where`` is not a condition over the quarantine columns (before any job),
            or the config's tables are a declarative pipeline's (``target.written_by:
            pipeline``: :func:`quarantine.declarative.replay_queue.queue_replay` queues its records).
        KeyUnavailableError: selected records are encrypted under a key this process cannot read
            (:func:`readable_records`), before anything is written.
    """
    refuse_pipeline_tables(pipe, "a replay that writes the target")
    pipe.config.target.require_source_columns()
    if where:
        check_predicate(pipe.spark, where)
    if now is not None:
        pipe = replace(pipe, clock=lambda: now)
    selected = open_records(pipe, where, version=_version(pipe))
    source = readable_records(pipe, selected, "replay").select(*[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields])
    run = start_run(pipe, kind=RunKind.REPLAY)
    run.begin()
    try:
        report = run.process_batch(source, 0, BatchMode.replay())
    except BaseException as exc:
        run.end(RunStatus.FAILED, exc)
        raise
    run.end(RunStatus.SUCCEEDED)
    return ReplayResult(
        selected=report.records_in,
        replayed=report.records_ok + report.already_in_target,
        still_failing=report.records_quarantined,
        report=report,
    )


def _check_discard(where: str, reason: str) -> None:
    if not where.strip():
        raise QuarantineError("discard needs a --where predicate; refusing to discard every open row")
    if not reason.strip():
        raise QuarantineError("discard needs a --reason (it is kept in the resolution column)")


def discard(pipe: Plan, where: str, reason: str, *, now: dt.datetime | None = None) -> int:
    """Mark open quarantine rows matching ``where`` as discarded, with a reason, as a run of kind ``discard``.

    A discarded record stays discarded: batch re-runs leave it out, and it is
    never written to the target (only an explicit replay of it could be). The
    pipeline's listeners get the discard as a run whose one batch report has the
    ``records-discarded`` metric.

    Returns:
        How many rows were discarded.

    Raises:
        ConfigError: ``where`` is not a condition over the quarantine columns (before any job).
    """
    _check_discard(where, reason)
    check_predicate(pipe.spark, where)
    version = _version(pipe)
    selected = open_records(pipe, where, version=version)
    keys = selected.select(*SOURCE_KEY, row_fingerprint(selected).alias(FINGERPRINT))
    at = now or pipe.clock()
    run = start_run(pipe, kind=RunKind.DISCARD)
    run.begin()
    try:
        n = keys.count()  # reported to the user; not a data-path decision
        # under the write retry: a concurrent run or replay committing first is a conflict to retry
        retried_write(
            pipe.write_operator, "discard", pipe.quarantine_table, 0,
            lambda: close_records(
                pipe.spark, pipe.quarantine_table, keys, pipeline=pipe.config.pipeline,
                status=QuarantineStatus.DISCARDED, resolution=f"discarded: {reason}", now=at,
            ),
            failure=QuarantineWriteError,
        )
        run.report_batch(
            BatchReport(
                run=run.info, batch_id=0, records_in=n, records_ok=0, records_quarantined=0,
                metrics={MetricNames.RECORDS_DISCARDED.value: float(n)}, finished_at=pipe.clock(),
            )
        )
    except BaseException as exc:
        run.end(RunStatus.FAILED, exc)
        raise
    run.end(RunStatus.SUCCEEDED)
    return n
