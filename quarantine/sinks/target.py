"""The target table: good rows, written exactly once per batch.

Two idempotence strategies, both Delta-native:

* **streaming** — a target that keeps the source coordinates is appended plainly:
  the stream's first micro-batch after a start leaves out the records the tables
  hold (compared by coordinates and content, as a batch run's records are), and
  every later one reads offsets that no table holds yet (README, Guarantees). A
  target without them is appended with ``txnAppId`` (pipeline + query id) and
  ``txnVersion`` (the micro-batch id): Delta skips a version it has already
  committed, so a micro-batch replayed after a crash appends nothing.
* **batch** — the first write creates the table with a plain append; later
  runs MERGE insert-only on the source record's identity: its coordinates
  (``_source_topic``, ``_source_partition``, ``_source_offset``) and its content's
  fingerprint (``_source_fingerprint``), so re-running the same input adds nothing,
  new records are added once, and a record with other content under coordinates
  the table holds (a recreated topic) is a new record. A row written before the
  fingerprint existed is the same record when its ``_source_timestamp`` is.
"""

from __future__ import annotations

import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from quarantine.schema import (
    OFFSET,
    TARGET_FINGERPRINT,
    TARGET_OFFSET,
    TARGET_PARTITION,
    TARGET_TIMESTAMP,
    TARGET_TOPIC,
)
from quarantine.sinks.ownership import claim_written_topics
from quarantine.tables import add_missing_columns, read_table, save, table_exists, table_ref

__all__ = ["SOURCE_COLUMNS", "append_batch", "highest_offsets", "merge_new_rows", "txn_app_id"]

#: The source record kept in the target (when ``target.source_columns``): its coordinates,
#: timestamp and content fingerprint (:func:`quarantine.identity.fingerprint`).
SOURCE_COLUMNS: tuple[str, ...] = (
    TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET, TARGET_TIMESTAMP, TARGET_FINGERPRINT,
)

_FINGERPRINTED = StructType([StructField(TARGET_FINGERPRINT, LongType())])


def _add_fingerprint(spark: SparkSession, rows: DataFrame, table: str) -> None:
    """Give a target written before the fingerprint existed its column (NULL in its rows)."""
    if TARGET_FINGERPRINT in rows.columns and TARGET_FINGERPRINT not in read_table(spark, table).columns:
        add_missing_columns(spark, table, _FINGERPRINTED)


def txn_app_id(pipeline: str, table: str) -> str:
    """The Delta ``txnAppId`` for one pipeline writing one table."""
    return f"quarantine:{pipeline}:{table}"


def append_batch(
    rows: DataFrame, table: str, *, pipeline: str, batch_id: int | None, owner: str | None = None
) -> None:
    """Append a micro-batch: exactly once by ``txnAppId``/``txnVersion``, or plainly.

    Args:
        pipeline: the ``txnAppId``'s writer (the pipeline and its query's id).
        batch_id: the ``txnVersion`` (the micro-batch id); None for a plain append, which
            is exactly once only when the caller has left out the records the table
            holds (a stream's first micro-batch after a start, compared with the tables
            by coordinates; later micro-batches read offsets no table holds: see
            README, Guarantees).
        owner: the pipeline recorded as the writer of the topics of a table this
            append creates (:mod:`quarantine.sinks.ownership`).
    """
    spark = rows.sparkSession
    existed = table_exists(spark, table)
    if existed:
        _add_fingerprint(spark, rows, table)
    writer = rows.write.format("delta").mode("append")
    if batch_id is not None:
        # Delta checks the identifiers against the snapshot's whole state (in Delta 4.1,
        # Snapshot.setTransactions reconstructs it on every such commit)
        writer = writer.option("txnAppId", txn_app_id(pipeline, table)).option("txnVersion", str(batch_id))
    save(writer, table)
    if not existed and owner is not None:
        claim_written_topics(spark, table, owner, rows)


def merge_new_rows(
    spark: SparkSession, rows: DataFrame, table: str, *, pipeline: str | None = None
) -> int | None:
    """Insert rows whose source record is not in the table yet (see the module doc).

    Creates the table with a plain append when it does not exist, and then records
    ``pipeline`` as the writer of the topics it wrote (:mod:`quarantine.sinks.ownership`).
    Needs the :data:`SOURCE_COLUMNS`.

    Returns:
        The rows this call's own commit inserted (Delta's ``num_inserted_rows`` of its
        MERGE): fewer than ``rows`` holds when another writer (a replay, a concurrent
        run) or an earlier run had already written some of the records. None when the
        call created the table (every row was appended).
    """
    if not table_exists(spark, table):
        save(rows.write.format("delta").mode("append"), table)
        if pipeline is not None:
            claim_written_topics(spark, table, pipeline, rows)
        return None
    _add_fingerprint(spark, rows, table)
    view = f"_quarantine_merge_{uuid.uuid4().hex}"
    rows.createOrReplaceTempView(view)
    try:
        out = spark.sql(
            f"MERGE INTO {table_ref(table)} AS t USING {view} AS s ON {_SAME_RECORD} WHEN NOT MATCHED THEN INSERT *"
        ).collect()
    finally:
        spark.catalog.dropTempView(view)
    return int(out[0]["num_inserted_rows"]) if out and "num_inserted_rows" in out[0] else None


#: The insert-only MERGE's condition: the same source record (see the module doc).
_SAME_RECORD = (
    "t._source_topic = s._source_topic AND t._source_partition = s._source_partition "
    "AND t._source_offset = s._source_offset AND CASE "
    f"WHEN t.{TARGET_FINGERPRINT} IS NOT NULL AND s.{TARGET_FINGERPRINT} IS NOT NULL "
    f"THEN t.{TARGET_FINGERPRINT} = s.{TARGET_FINGERPRINT} "
    f"WHEN t.{TARGET_FINGERPRINT} IS NULL AND s.{TARGET_FINGERPRINT} IS NOT NULL "
    "THEN t._source_timestamp <=> s._source_timestamp ELSE TRUE END"
)


def highest_offsets(spark: SparkSession, table: str) -> dict[tuple[str, int], int]:
    """The target's highest ``_source_offset`` per topic-partition (one aggregate job; empty for
    no table, or one without the source columns)."""
    if not table_exists(spark, table):
        return {}
    rows = read_table(spark, table)
    if not {TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET} <= set(rows.columns):
        return {}
    found = (
        rows.where(F.col(TARGET_TOPIC).isNotNull() & F.col(TARGET_PARTITION).isNotNull())
        .groupBy(TARGET_TOPIC, TARGET_PARTITION)
        .agg(F.max(TARGET_OFFSET).alias(OFFSET))
        .collect()
    )
    return {(r[0], int(r[1])): int(r[OFFSET]) for r in found if r[OFFSET] is not None}
