"""The batch runner: a Kafka-shaped Delta table or Parquet directory, read once, as batch 0.

A source is read as :mod:`quarantine.batch.increment` says: what was committed to a Delta table
since the last run, the files of a Parquet directory the last run did not read, or the whole
source (the summary says which, and why).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame

from quarantine.batch.increment import SourceRead, plan_parquet_read, plan_read, record_read
from quarantine.batch.plan import Plan
from quarantine.batch.run import start_run
from quarantine.batch.settle import floors_of
from quarantine.batch.writes import BatchMode
from quarantine.config import SourceConfig, SourceFormat
from quarantine.errorhandling.retry import retried_write
from quarantine.errors import SourceError, TableWriteError, describe_failure
from quarantine.identity import Floors
from quarantine.listeners.events import BatchReport, RunStatus, RunSummary
from quarantine.progress import Progress
from quarantine.redaction import redact_text
from quarantine.source_contract import check_kafka_shaped
from quarantine.tables import read_table_pinned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PROGRESS_EVERY_S", "read_source", "run_batch"]

log = logging.getLogger("quarantine")

#: Seconds between the progress lines of a running batch (:class:`~quarantine.progress.Progress`).
PROGRESS_EVERY_S = 15.0


def read_source(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """Read a Kafka-shaped Delta/Parquet source as one batch, checking its shape.

    Raises:
        SourceError: the source is a Kafka topic (read by the streaming runner),
            cannot be read (naming the key to check), or is not Kafka-shaped.
    """
    if source.format is SourceFormat.KAFKA:
        raise SourceError("a kafka source is read by the streaming runner (quarantine.runners.streaming)")
    try:
        if source.format is SourceFormat.PARQUET:
            assert source.path is not None
            df = spark.read.parquet(source.path)
        else:
            # pinned: the runner may read the batch twice (quarantine.batch.run), and must see one version
            df = read_table_pinned(spark, source.path or source.table or "")
    except AnalysisException as exc:
        key = "source.path" if source.path else "source.table"
        raise SourceError(
            f"source {source.location} could not be read: {describe_failure(exc)} — check {key} "
            "(an existing Delta table or Parquet directory the job may read)"
        ) from exc
    check_kafka_shaped(df, source.location)
    return df


def _source_read(plan: Plan, *, full: bool) -> SourceRead:
    """What the run reads: a Delta source's new commits, a Parquet directory's files not read
    before, or all of it (:mod:`quarantine.batch.increment`).

    Raises:
        SourceError: as :func:`read_source`.
    """
    source = plan.config.source
    if source.format is not SourceFormat.DELTA:
        return plan_parquet_read(plan, read_source(plan.spark, source), full=full)
    read = plan_read(plan, full=full)
    check_kafka_shaped(read.df, source.location)
    return read


def _floors(read: SourceRead) -> Floors | None:
    """A read of what was added since the last run: its floors (:func:`floors_of`); None for a whole read."""
    return None if read.since is None else floors_of(read.df)


def _record(plan: Plan, read: SourceRead) -> None:
    """Record how far the run read (:func:`~quarantine.batch.increment.record_read`); a failure
    only costs the next run a longer read, so it is said, not raised."""
    try:
        retried_write(plan.write_operator, "target read mark", plan.target_table, 0, lambda: record_read(plan, read))
    except (TableWriteError, AnalysisException) as exc:
        log.warning(
            "could not record on %s how far this run read its source (the next run reads it whole): %s",
            plan.target_table, redact_text(str(exc), plan.config.secrets()),
        )


def run_batch(plan: Plan, *, full: bool = False) -> RunSummary:
    """Run ``plan`` once over what is new in its source (``full``: the whole source), as batch 0.

    The listeners hear the run start and end (``failed`` with the exception, which
    is then re-raised). While the batch runs, a progress line is logged every
    :data:`PROGRESS_EVERY_S` seconds. A run with nothing new runs no batch; its
    ``fail_on`` conditions are still judged. Once every write committed, the run records
    on the target how far it read.
    """
    run = start_run(plan)
    run.begin()
    try:
        with Progress(plan.spark, f"batch run of {plan.config.pipeline}", every_s=PROGRESS_EVERY_S):
            read = _source_read(plan, full=full)
            if read.empty:
                reports: tuple[BatchReport, ...] = ()
                run.check_conditions()
            else:
                reports = (run.process_batch(read.df, 0, BatchMode.batch_run(_floors(read))),)
    except BaseException as exc:
        run.end(RunStatus.FAILED, exc)
        raise
    _record(plan, read)
    run.end(RunStatus.SUCCEEDED)
    return RunSummary(run=run.info, batches=reports, status=RunStatus.SUCCEEDED, notes=(read.note, *run.notes))
