"""Replay into a declarative pipeline: a queue table that the pipeline's next update reads.

A declarative pipeline's runtime owns its target (``target.written_by: pipeline``), so
``quarantine replay`` does not write the target of such a config. It appends the selected open
records, their raw source columns byte for byte, to the pipeline's **replay queue**, a Delta
table named ``<quarantine table>_replay`` that this command owns. Then it closes their
quarantine rows as ``replayed``, with the resolution ``queued for the pipeline's next update``.
:func:`quarantine.declarative.declare` reads the queue as a stream in two append flows,
``<target>_replay`` and ``<quarantine table>_replay``. On the pipeline's next update each queued
record runs once through the *current* stages and lands in the target, or in the quarantine
table again as a new ``open`` row with its new error. A replay of a job's config is
:func:`quarantine.runners.replay.replay`.

Exactly once, by the queue's key. The key is the quarantine row a queued record came from:
``pipeline``, the coordinates, the record's fingerprint, and the row's ``first_seen_at``
(``quarantined_at``). A record that failed again has a new row (a new ``first_seen_at``), so it
can be queued again. A replay (1) inserts the selected rows whose key the queue does not hold,
with an insert-only MERGE, so that two replays at once conflict rather than both insert, and
then (2) closes the selected rows that are still ``open``. If it crashes between the two, the
rows stay open and are already queued: the next replay inserts nothing for them and closes
them. The pipeline's flows read each queue row once (the runtime's checkpoints).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from quarantine.columns import (
    ENCRYPTION_KEY_ID,
    FINGERPRINT,
    FIRST_SEEN_AT,
    PIPELINE,
    QUARANTINE_FINGERPRINT,
    SOURCE_KEY,
    QuarantineStatus,
)
from quarantine.config import PipelineConfig, WrittenBy
from quarantine.errors import QuarantineError
from quarantine.identity import null_safe_key_match
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import open_records
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sinks.quarantine import close_records, row_fingerprint
from quarantine.tables import create_table, table_ref, table_version

__all__ = ["QUEUE_KEY", "QUEUE_SCHEMA", "QueueResult", "queue_replay", "queue_table"]

#: The queue's columns: the source record as it was read (the Kafka source's columns), the
#: pipeline and quarantine row it came from, and when it was queued.
QUEUE_SCHEMA = StructType([
    StructField("pipeline", StringType(), False),
    *KAFKA_SOURCE_SCHEMA.fields,
    StructField(QUARANTINE_FINGERPRINT, LongType()),
    StructField("quarantined_at", TimestampType()),
    StructField("queued_at", TimestampType()),
])

#: The queue's key: the quarantine row a queued record came from.
QUEUE_KEY = ("pipeline", *SOURCE_KEY, QUARANTINE_FINGERPRINT, "quarantined_at")


def queue_table(config: PipelineConfig) -> str:
    """The replay queue of a config's quarantine table: its name with ``_replay`` appended."""
    return f"{config.errors.dlq_table_name}_replay"


@dataclass(frozen=True)
class QueueResult:
    """What a replay into a declarative pipeline did.

    Attributes:
        queue: the queue table's name.
        selected: open quarantine rows selected.
        queued: rows this call added to the queue (fewer than ``selected`` when an earlier
            replay queued some and crashed before closing them).
    """

    queue: str
    selected: int
    queued: int

    def render(self) -> str:
        """What the command prints."""
        return (f"queued {self.queued:,} of {self.selected:,} selected open record(s) in {self.queue}; "
                "the pipeline's next update runs them through its current stages (the target, or the "
                "quarantine table again as new open rows)")


def queue_replay(plan: Pipeline, where: str | None = None, *, now: dt.datetime | None = None) -> QueueResult:
    """Queue a declarative pipeline's open quarantine rows for its next update (see the module doc).

    Args:
        plan: the pipeline's plan; its config has ``target.written_by: pipeline``.
        where: an optional SQL predicate over the quarantine table's columns.
        now: ``queued_at`` and ``resolved_at`` (injected for tests).

    Raises:
        ConfigError: ``where`` is not a condition over the quarantine columns.
        QuarantineError: the config's tables are not a declarative pipeline's, or its quarantine
            table does not exist yet, or selected rows are kept encrypted (their queue would hold
            bytes the pipeline's replay flow cannot read), before anything is written.
    """
    config = plan.config
    if config.target.written_by is not WrittenBy.PIPELINE:
        raise QuarantineError("a replay queue is for a declarative pipeline's config (target.written_by: pipeline)")
    at = now or dt.datetime.now(dt.UTC)
    spark, name = plan.spark, queue_table(config)
    selected = open_records(plan, where, version=table_version(spark, config.errors.dlq_table_name))
    rows = selected.select(
        F.col(PIPELINE), *[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields],
        row_fingerprint(selected).alias(QUARANTINE_FINGERPRINT),
        F.col(FIRST_SEEN_AT).alias("quarantined_at"),
        F.lit(at).cast("timestamp").alias("queued_at"),
    )
    n = rows.count()
    if n == 0:
        return QueueResult(queue=name, selected=0, queued=0)
    if ENCRYPTION_KEY_ID in selected.columns:
        sealed = selected.where(F.col(ENCRYPTION_KEY_ID).isNotNull()).count()
        if sealed:
            raise QuarantineError(
                f"replay into the declarative pipeline {config.pipeline} refused, nothing was written: {sealed:,} of "
                f"the {n:,} selected record(s) are kept encrypted (errors.deadletterqueue.encryption.key), and its "
                f"replay flow reads the queue {name} as the source's bytes; a queue of encrypted records is not "
                "supported yet (docs/personal-data.md)"
            )
    create_table(spark, name, QUEUE_SCHEMA, cluster_by=("pipeline",),
                 comment=f"quarantine: records queued for replay by the declarative pipeline {config.pipeline}")
    before = table_version(spark, name)
    (rows.alias("s").mergeInto(table_ref(name), null_safe_key_match(table_ref(name), "s", QUEUE_KEY))
     .whenNotMatched().insertAll().merge())
    queued = _inserted_after(spark, name, before)
    keys = rows.select(*SOURCE_KEY, F.col(QUARANTINE_FINGERPRINT).alias(FINGERPRINT))
    close_records(spark, config.errors.dlq_table_name, keys, pipeline=config.pipeline,
                  status=QuarantineStatus.REPLAYED, resolution=f"queued for the pipeline's next update ({name})",
                  now=at)
    return QueueResult(queue=name, selected=n, queued=queued)


def _inserted_after(spark: SparkSession, name: str, version: int) -> int:
    """Rows the commits after ``version`` inserted (Delta's operation metrics of the MERGE)."""
    history = spark.sql(f"DESCRIBE HISTORY {table_ref(name)}").where(F.col("version") > version)
    return sum(int(r["n"] or 0) for r in
               history.select(F.col("operationMetrics")["numTargetRowsInserted"].alias("n")).collect())
