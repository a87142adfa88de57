"""The batch runner: a Kafka-shaped Delta table or Parquet directory, read once, as batch 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame

from quarantine.batch.plan import Plan
from quarantine.batch.run import start_run
from quarantine.config import SourceConfig, SourceFormat
from quarantine.errors import SourceError, describe_failure
from quarantine.listeners.events import RunStatus, RunSummary
from quarantine.progress import Progress
from quarantine.source_contract import check_kafka_shaped
from quarantine.tables import read_table_pinned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PROGRESS_EVERY_S", "read_source", "run_batch"]

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


def run_batch(plan: Plan) -> RunSummary:
    """Run ``plan`` once over its whole source, as batch 0.

    The listeners hear the run start and end (``failed`` with the exception, which
    is then re-raised). While the batch runs, a progress line is logged every
    :data:`PROGRESS_EVERY_S` seconds.
    """
    run = start_run(plan)
    run.begin()
    try:
        with Progress(plan.spark, f"batch run of {plan.config.pipeline}", every_s=PROGRESS_EVERY_S):
            report = run.process_batch(read_source(plan.spark, plan.config.source), 0)
    except BaseException as exc:
        run.end(RunStatus.FAILED, exc)
        raise
    run.end(RunStatus.SUCCEEDED)
    return RunSummary(run=run.info, batches=(report,), status=RunStatus.SUCCEEDED, notes=run.notes)
