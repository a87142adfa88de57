"""Target and quarantine table in agreement: the check a batch write makes first.

The quarantine table remembers records that were replayed into the target
(status ``replayed``): their good rows are only in the target. A target deleted
or rebuilt from the source alone would lose them without a word, so a batch run
or a replay refuses to write when the target does not exist while the quarantine
table holds ``replayed`` rows of the pipeline (:func:`check_tables_agree`), or
when a target the pipeline has no record of writing (rebuilt by other means: a
plain Spark job, ``CREATE OR REPLACE``) lacks some of them
(:func:`check_target_holds_replayed`); :func:`quarantine.ops.rebuild.rebuild_target`
builds a new target instead.

The other way round, a quarantine table deleted while the target holds rows, is
safe (records already delivered are left out by their identity; discarded rows
open again) and only said: a warning that a new quarantine table was started.

A target also agrees with the pipelines writing it: :func:`check_and_claim`, the one
check a batch run and a Kafka stream's start make of who writes a topic into it
(:mod:`quarantine.sinks.ownership`), and their one claim.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quarantine.columns import PIPELINE, RESOLUTION, SOURCE_KEY, STATUS, TARGET_KEY, QuarantineStatus
from quarantine.config import PipelineConfig
from quarantine.errorhandling.retry import RetryWithToleranceOperator, retried_write
from quarantine.errors import TablesDisagreeError
from quarantine.sinks.ownership import check_owners, claim_topics, owners
from quarantine.tables import read_table, table_exists

__all__ = [
    "REOPENED", "check_and_claim", "check_tables_agree", "check_target_holds_replayed", "rebuilding",
    "replayed_records",
]

log = logging.getLogger("quarantine")

#: How ``resolution`` starts in a row :func:`quarantine.ops.rebuild.rebuild_target` reopened.
REOPENED = "reopened by rebuild-target"


def replayed_records(spark: SparkSession, config: PipelineConfig) -> int:
    """How many of the pipeline's quarantine rows are ``replayed`` (one Spark job)."""
    q = read_table(spark, config.errors.dlq_table_name)
    return q.where(
        (F.col(PIPELINE) == F.lit(config.pipeline)) & (F.col(STATUS) == QuarantineStatus.REPLAYED.value)
    ).count()


def rebuilding(spark: SparkSession, config: PipelineConfig) -> bool:
    """Whether rows reopened by an earlier rebuild are still open (a rebuild to go on with)."""
    q = read_table(spark, config.errors.dlq_table_name)
    return not q.where(
        (F.col(PIPELINE) == F.lit(config.pipeline)) & (F.col(STATUS) == QuarantineStatus.OPEN.value)
        & F.col(RESOLUTION).startswith(REOPENED)
    ).isEmpty()


def check_tables_agree(
    spark: SparkSession, config: PipelineConfig, *, target_exists: bool, quarantine_exists: bool
) -> None:
    """Refuse a batch write when the target lost records the quarantine table says it holds.

    Runs a Spark job only when the target does not exist and the quarantine table does.

    Raises:
        TablesDisagreeError: the target does not exist and the quarantine table has
            ``replayed`` rows of this pipeline; the message says what to run.
    """
    target, quarantine = config.target.table, config.errors.dlq_table_name
    if not target_exists and quarantine_exists:
        n = replayed_records(spark, config)
        if n:
            raise TablesDisagreeError(
                f"the target {target} does not exist, but the quarantine table {quarantine} says {n:,} "
                f"record(s) of pipeline {config.pipeline} were replayed into it: was the target deleted or "
                "rebuilt? Nothing was written. `quarantine rebuild-target --conf <this config> --dry-run` "
                "says what rebuilding it from the source and the quarantine table's raw bytes would do; "
                "without --dry-run it does it"
            )
    if target_exists and not quarantine_exists:
        log.warning(
            "the quarantine table %s does not exist: starting a new one for the target %s, which already "
            "holds rows (records in the target are left out by their identity; records discarded or open "
            "in a deleted quarantine table run again)", quarantine, target,
        )




def check_target_holds_replayed(spark: SparkSession, config: PipelineConfig) -> None:
    """Refuse a write into a target that lacks records the quarantine table says were replayed into it.

    Called when the target exists but has no record of the pipeline writing it
    (:class:`~quarantine.sinks.ownership.Owners`): it was rebuilt by other means, or
    written before writers were recorded. One Spark job: the pipeline's ``replayed``
    rows whose coordinates the target does not hold. None missing: the target is the
    pipeline's own (the caller then records the pipeline as its writer).

    Raises:
        TablesDisagreeError: some replayed records are not in the target; the message
            says how many and what to run.
    """
    target, quarantine = config.target.table, config.errors.dlq_table_name
    rows = read_table(spark, target)
    if not set(TARGET_KEY) <= set(rows.columns):
        return  # a target without the source coordinates: nothing to compare by
    replayed = read_table(spark, quarantine).where(
        (F.col(PIPELINE) == F.lit(config.pipeline)) & (F.col(STATUS) == QuarantineStatus.REPLAYED.value)
    ).select(*SOURCE_KEY)
    held = rows.select(*[F.col(t).alias(c) for t, c in zip(TARGET_KEY, SOURCE_KEY, strict=True)])
    n = replayed.join(held, [*SOURCE_KEY], "left_anti").count()
    if n:
        raise TablesDisagreeError(
            f"the target {target} does not hold {n:,} record(s) that the quarantine table {quarantine} says "
            f"were replayed into it, and has no record of pipeline {config.pipeline} writing it: was it rebuilt "
            "by other means? Nothing was written. Move it away (its records are settled again by their "
            "identity), then `quarantine rebuild-target --conf <this config> --dry-run` says what rebuilding it "
            "from the source and the quarantine table's raw bytes would do; without --dry-run it does it"
        )


def check_and_claim(
    spark: SparkSession, config: PipelineConfig, topics: Iterable[str | None], retry: RetryWithToleranceOperator
) -> None:
    """Before a pipeline writes ``topics`` (NULL ones have no owner) into its target, which exists:
    refuse a topic another pipeline writes there, then claim the unowned ones (:mod:`quarantine.sinks.ownership`).

    A target with no record of the pipeline is first checked with :func:`check_target_holds_replayed`
    (if the quarantine table exists). The claim, one commit made only for new topics or a pipeline
    new to the target, is the ``target claim`` write under ``retry``
    (:func:`~quarantine.errorhandling.retry.retried_write`).

    Raises:
        TablesDisagreeError: another pipeline writes one of ``topics`` into the target (not
            with ``target.shared``), or the target lacks records replayed into it.
        TableWriteError: the claim still failed after its retries.
    """
    target, pipeline = config.target.table, config.pipeline
    known = owners(spark, target)
    new = check_owners(target, pipeline, topics, known.topics, shared=config.target.shared)
    first = not known.writes(pipeline)
    if first and table_exists(spark, config.errors.dlq_table_name):
        check_target_holds_replayed(spark, config)
    if new or first:
        retried_write(retry, "target claim", target, 0, lambda: claim_topics(spark, target, pipeline, new))
