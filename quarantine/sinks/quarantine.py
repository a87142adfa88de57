"""The quarantine table: one row per source record per pipeline, written by MERGE.

Key: ``(pipeline, topic, partition, offset)``. A record seen again (a re-run of
the same input, a replay that failed again) updates the latest-error columns,
appends to ``error_history``, bumps ``last_seen_at`` and re-opens the row. A
MERGE of the same ``(run_id, batch_id)`` twice — a streaming micro-batch
replayed after a crash — changes nothing, so restarts never grow the history.

The raw ``key``, ``value`` and ``headers`` are the source bytes, unchanged.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.schema import QUARANTINE_SCHEMA, QuarantineStatus
from quarantine.sinks import create_table, delta_table, save

__all__ = ["ensure_quarantine_table", "merge_quarantine", "quarantine_rows"]

#: Columns the MERGE refreshes when a record fails again.
_LATEST = ("stage", "kind", "error_class", "message", "stacktrace", "retriable", "attempts")


def ensure_quarantine_table(spark: SparkSession, name: str) -> bool:
    """Create the quarantine table if it does not exist; return whether this call created it.

    Schema :data:`~quarantine.schema.QUARANTINE_SCHEMA`, Change Data Feed on,
    liquid-clustered by ``(pipeline, topic, first_seen_date)``. Safe to call
    concurrently (see :func:`quarantine.sinks.create_table`): True only when this
    call committed the table's first version, so the table is known to be empty.
    """
    return create_table(
        spark, name, QUARANTINE_SCHEMA,
        comment="quarantine: failed records with their raw bytes and the reason",
        cluster_by=("pipeline", "topic", "first_seen_date"),
        properties={"delta.enableChangeDataFeed": "true"},
    )


def quarantine_rows(
    failed: DataFrame,
    *,
    pipeline: str,
    run_id: str,
    batch_id: int,
    now: dt.datetime,
    error: Column | str = "_q_error",
) -> DataFrame:
    """Shape failed records into quarantine-table rows (pure; no I/O).

    Args:
        failed: rows with the Kafka source columns and an error struct column.
        pipeline: the pipeline's name.
        run_id: the run writing these rows.
        batch_id: the micro-batch writing these rows.
        now: the write time (``first_seen_at``/``last_seen_at``, history ``at``).
        error: the error struct column.
    """
    err = F.col(error) if isinstance(error, str) else error
    at = F.lit(now).cast("timestamp")
    cols: list[Column] = [
        F.lit(pipeline).alias("pipeline"),
        F.col("topic"), F.col("partition"), F.col("offset"),
        F.col("timestamp"), F.col("timestampType"),
        F.col("key"), F.col("value"), F.col("headers"),
        *[err.getField(c).alias(c) for c in _LATEST],
        F.array(
            F.struct(
                at.alias("at"), F.lit(run_id).alias("run_id"), err.getField("stage").alias("stage"),
                err.getField("error_class").alias("error_class"), err.getField("message").alias("message"),
            )
        ).alias("error_history"),
        F.lit(QuarantineStatus.OPEN.value).alias("status"),
        at.alias("first_seen_at"),
        at.alias("last_seen_at"),
        F.lit(run_id).alias("run_id"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.lit(None).cast("timestamp").alias("resolved_at"),
        F.lit(None).cast("string").alias("resolution"),
        F.to_date(at).alias("first_seen_date"),
    ]
    rows = failed.select(*cols)
    # Cast each column to the contract's type (nullability aside) so MERGE sees one schema.
    return rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in QUARANTINE_SCHEMA.fields])


def merge_quarantine(spark: SparkSession, name: str, rows: DataFrame, *, pipeline: str) -> None:
    """MERGE quarantine rows into the table on ``(pipeline, topic, partition, offset)``.

    Matched rows whose last write was this same ``(run_id, batch_id)`` are left
    as they are (a replayed micro-batch is a no-op); other matches refresh the
    latest error, append to ``error_history`` and re-open the row.
    """
    if ensure_quarantine_table(spark, name):
        # Created empty just now: nothing can match, and a plain append is the same
        # commit as the MERGE without its join (the largest phase of a first batch).
        save(rows.write.format("delta").mode("append"), name)
        return
    target = delta_table(spark, name).alias("t")
    same_write = "t.run_id <=> s.run_id AND t.batch_id <=> s.batch_id"
    update: dict[str, str | Column] = {c: f"s.{c}" for c in _LATEST}
    update.update(
        {
            "error_history": "concat(coalesce(t.error_history, array()), s.error_history)",
            "last_seen_at": "s.last_seen_at",
            "run_id": "s.run_id",
            "batch_id": "s.batch_id",
            "status": f"'{QuarantineStatus.OPEN.value}'",
            "resolved_at": "CAST(NULL AS TIMESTAMP)",
            "resolution": "CAST(NULL AS STRING)",
        }
    )
    literal = pipeline.replace("'", "''")
    (
        target.merge(
            rows.alias("s"),
            f"t.pipeline = '{literal}' AND t.pipeline = s.pipeline AND t.topic = s.topic "
            "AND t.partition = s.partition AND t.offset = s.offset",
        )
        .whenMatchedUpdate(condition=f"NOT ({same_write})", set=update)
        .whenNotMatchedInsertAll()
        .execute()
    )
