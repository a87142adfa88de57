"""A source record's identity: ``(topic, partition, offset)``, made total.

Spark's Kafka source gives every record unique, non-NULL coordinates. Tables
and files shaped like it do not always: a message re-delivered into a Delta
table, a file loaded twice, rows with no partition or offset. The quarantine
table is keyed by the coordinates and the target is de-duplicated on them, so
they must identify one record. The rules (README "Guarantees"):

* **Unkeyed records.** A record whose ``partition`` or ``offset`` is NULL gets
  a synthetic offset, stable across runs:
  ``-1 - (xxhash64(topic, partition, key, value, headers) & 0x7FFFFFFFFFFFFFFF)``
  (always negative, so it never collides with a real Kafka offset). ``topic``
  and ``partition`` keep their values, NULL included; every key comparison is
  NULL-safe (``<=>``). Identical bytes give the identical key: they are one
  record, as below.
* **Same coordinates, same bytes** (``key``, ``value``, ``headers``): one
  record. The copies are dropped before any stage runs.
* **Same coordinates, different bytes**: a conflict. One copy is kept (the
  first in byte order, so the choice is stable), the :class:`SourceCheck`
  stage fails it with ``error_class = ConflictingDuplicate`` and a message
  naming how many different records share the coordinates; it is quarantined
  with that copy's bytes and never reaches the target. The source still holds
  every copy.

Within one read this is exact (byte comparison, no hash). Across runs the
quarantine MERGE and the target's insert-only MERGE keep the first record
committed under a key; a later, different record under the same key is not
compared with it.

Only sources that are not Kafka topics go through :func:`identified` (a Kafka
topic's coordinates are unique by construction; a stream over one pays nothing).
Most other sources hold no duplicate and no unkeyed record either, so
:func:`identified` first checks that with one narrow job
(:func:`unique_coordinates`: the coordinates only, counted exactly in bitmaps, no
shuffle of the records' bytes) and shuffles the records by coordinates
(:func:`identify`) only when the check finds something to apply the rules to.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quarantine.schema import VARIANTS, ErrorKind
from quarantine.stage import Stage, StageContext, error_column, outcome

__all__ = [
    "SOURCE_STAGE",
    "VARIANTS",
    "SourceCheck",
    "identified",
    "identify",
    "null_safe_key_match",
    "suspect_groups",
    "synthetic_offset",
    "unique_coordinates",
]

#: The hidden column holding how many different records share a row's coordinates.
#: The name (and error ``stage``) of the check that fails conflicting duplicates.
SOURCE_STAGE = "source"

_MAX_LONG = 0x7FFFFFFFFFFFFFFF


def synthetic_offset() -> Column:
    """The offset of a record: its own, or the stable synthetic one when unkeyed (see module doc)."""
    h = F.xxhash64(F.col("topic"), F.col("partition"), F.col("key"), F.col("value"), F.col("headers"))
    synthetic = F.lit(-1) - h.bitwiseAND(F.lit(_MAX_LONG))
    return F.when(F.col("partition").isNull() | F.col("offset").isNull(), synthetic).otherwise(F.col("offset"))


def identify(df: DataFrame) -> DataFrame:
    """Apply the identity rules to a Kafka-shaped frame (pure; one shuffle by coordinates).

    Returns:
        ``df`` with unkeyed offsets made synthetic, byte-identical copies dropped,
        and a :data:`VARIANTS` column (1, or the number of different records that
        share the row's coordinates) for :class:`SourceCheck`.
    """
    keyed = df.withColumn("offset", synthetic_offset())
    by_key = Window.partitionBy("topic", "partition", "offset")
    in_byte_order = by_key.orderBy(F.col("key").asc_nulls_first(), F.col("value").asc_nulls_first(),
                                   F.col("headers").asc_nulls_first())
    ranked = keyed.select(
        "*",
        F.dense_rank().over(in_byte_order).alias("_q_variant"),
        F.row_number().over(in_byte_order).alias("_q_copy"),
    )
    return (
        ranked.withColumn(VARIANTS, F.max("_q_variant").over(by_key))
        .where(F.col("_q_copy") == 1)
        .drop("_q_variant", "_q_copy")
    )


def suspect_groups(df: DataFrame) -> DataFrame:
    """The groups of ``df``'s coordinates where the identity rules would change something (pure).

    Rows are grouped by ``topic``, ``partition`` and the offset's bitmap bucket
    (32,768 offsets each; Spark's ``bitmap_bucket_number``); a group is returned when
    its ``partition`` or any of its offsets is NULL, or when it holds fewer distinct
    offsets than rows. The distinct offsets are counted exactly, in a bitmap per group
    (``bitmap_bit_position`` maps every ``long``, negative ones included, to one
    bucket and bit), so the map side folds a partition's rows into a few bitmaps and
    only those are shuffled: the records' bytes never are.

    Returns:
        one row per suspect group: ``topic``, ``partition``, ``_q_bucket``,
        ``_q_rows``, ``_q_offsets`` and ``_q_unkeyed`` (whether an offset is NULL).
    """
    offset = F.col("offset")
    per_bucket = df.groupBy("topic", "partition", F.bitmap_bucket_number(offset).alias("_q_bucket")).agg(
        F.count(F.lit(1)).alias("_q_rows"),
        F.bitmap_count(F.bitmap_construct_agg(F.bitmap_bit_position(offset))).alias("_q_offsets"),
        F.max(offset.isNull()).alias("_q_unkeyed"),
    )
    return per_bucket.where(
        F.col("partition").isNull() | F.col("_q_unkeyed") | (F.col("_q_rows") != F.col("_q_offsets"))
    )


def unique_coordinates(df: DataFrame) -> bool:
    """Whether every row of ``df`` has a ``partition`` and an ``offset`` that no other row shares.

    Runs one Spark job over the coordinates (:func:`suspect_groups`). ``topic`` may be
    NULL; rows with NULL topics share it, as in every key comparison here (``<=>``).
    """
    return suspect_groups(df).isEmpty()


def identified(df: DataFrame) -> DataFrame:
    """:func:`identify`'s result, without its shuffle when the rules change nothing (one job).

    When :func:`unique_coordinates` holds, no offset is made synthetic, no copy is
    dropped and no coordinates are shared: ``df`` comes back with :data:`VARIANTS`
    = 1 on every row, and its plan has no shuffle. Otherwise :func:`identify`.
    ``df`` must read the same rows each time it runs (a pinned Delta version, a
    listed set of files, a micro-batch): the check and the batch read it apart.
    """
    if unique_coordinates(df):
        return df.withColumn(VARIANTS, F.lit(1))
    return identify(df)


def null_safe_key_match(left: str, right: str, columns: tuple[str, ...]) -> Column:
    """``left.c <=> right.c AND …`` over ``columns``, as a Column (no SQL text)."""
    cond: Column | None = None
    for c in columns:
        term = F.col(f"{left}.{c}").eqNullSafe(F.col(f"{right}.{c}"))
        cond = term if cond is None else cond & term
    assert cond is not None
    return cond


class SourceCheck(Stage):
    """Fails a record whose coordinates are shared by different records (kind ``validate``).

    Its result is the record's ``value``, unchanged, so the next stage reads what it
    would have read without it. Reads :data:`VARIANTS` (see :func:`identify`).
    """

    name = SOURCE_STAGE
    kind = ErrorKind.VALIDATE
    input = "value"

    deterministic = True  # pure Column expressions of the record

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        variants = F.col(VARIANTS)
        failed = variants > 1
        message = F.concat(
            variants.cast("string"),
            F.lit(" records with different key/value/headers share topic="),
            F.coalesce(F.col("topic"), F.lit("NULL")),
            F.lit(" partition="), F.coalesce(F.col("partition").cast("string"), F.lit("NULL")),
            F.lit(" offset="), F.col("offset").cast("string"),
            F.lit("; this row holds the first of them in byte order, the source holds all"),
        )
        err = error_column(self.name, self.kind, F.lit("ConflictingDuplicate"), message, retriable=False)
        return outcome(value, failed, err)
