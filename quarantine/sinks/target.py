"""The target table: good rows, written exactly once per batch.

Two idempotence strategies, both Delta-native:

* **streaming** — an append carrying ``txnAppId`` (pipeline + target) and
  ``txnVersion`` (the micro-batch id): Delta skips a version it has already
  committed, so a micro-batch replayed after a crash appends nothing.
* **batch** — the first write creates the table with a plain append; later
  runs MERGE insert-only on the source coordinates (``_source_topic``,
  ``_source_partition``, ``_source_offset``), so re-running the same input
  adds nothing and new records are added once.
"""

from __future__ import annotations

from functools import reduce
from operator import and_

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.sinks import save, table_column, table_exists, table_ref

__all__ = ["SOURCE_COLUMNS", "append_batch", "merge_new_rows", "txn_app_id"]

#: The source coordinates kept in the target (when ``target.source_columns``).
SOURCE_COLUMNS: tuple[str, ...] = ("_source_topic", "_source_partition", "_source_offset", "_source_timestamp")


def txn_app_id(pipeline: str, table: str) -> str:
    """The Delta ``txnAppId`` for one pipeline writing one table."""
    return f"quarantine:{pipeline}:{table}"


def append_batch(rows: DataFrame, table: str, *, pipeline: str, batch_id: int) -> None:
    """Append a micro-batch exactly once (``txnAppId``/``txnVersion``)."""
    writer = (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", txn_app_id(pipeline, table))
        .option("txnVersion", str(batch_id))
    )
    save(writer, table)


def merge_new_rows(spark: SparkSession, rows: DataFrame, table: str) -> None:
    """Insert rows whose source coordinates are not in the table yet.

    Creates the table with a plain append when it does not exist. Needs the
    :data:`SOURCE_COLUMNS`.
    """
    if not table_exists(spark, table):
        save(rows.write.format("delta").mode("append"), table)
        return
    cond = reduce(and_, (table_column(table, c) == F.col(f"s.{c}") for c in SOURCE_COLUMNS[:3]))
    rows.alias("s").mergeInto(table_ref(table), cond).whenNotMatched().insertAll().merge()
