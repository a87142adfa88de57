"""A source record's identity: its coordinates ``(topic, partition, offset)`` and its content.

Coordinates alone are not an identity across a topic's lifetime (a recreated
topic starts again at offset 0), a source table's rewrite, or a file loaded
twice. A record is identified by its coordinates and its content's
:func:`fingerprint` (key, value, headers, timestamp), which both tables keep with
the settled record (the quarantine table's ``fingerprint``, the target's
``_source_fingerprint``). The rules (README "Guarantees"):

* **Unkeyed records.** A record whose ``partition`` or ``offset`` is NULL gets
  a synthetic offset, stable across runs:
  ``-1 - (xxhash64(topic, partition, key, value, headers) & 0x7FFFFFFFFFFFFFFF)``
  (always negative, so it never collides with a real Kafka offset). ``topic``
  and ``partition`` keep their values, NULL included; every key comparison is
  NULL-safe (``<=>``).
* **Same coordinates, same content**: one record. The copies are dropped before
  any stage runs.
* **Same coordinates, other content**: different records. None is dropped; each
  has its own quarantine row. Under ``errors.coordinates.reused: quarantine`` (the
  default) the :class:`~quarantine.stages.source.SourceCheck` stage fails each of them: ``ConflictingDuplicate``
  when they share the coordinates within one read, ``CoordinatesReused`` when an
  earlier record with other content is settled under them (its message says
  where: :mod:`quarantine.pipeline`'s ``prepare`` finds it). ``process`` runs them
  as any record; ``fail`` stops the run before any write.

Only sources that are not Kafka topics go through :func:`identified` (a Kafka
topic's coordinates are unique by construction; a stream over one pays nothing).
Most other sources hold no duplicate and no unkeyed record either, so
:func:`identified` first checks that with one narrow job
(:func:`unique_coordinates`: the coordinates only, counted exactly in bitmaps, no
shuffle of the records' bytes) and shuffles the records by coordinates
(:func:`identify`) only when the check finds something to apply the rules to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from quarantine.columns import (
    FINGERPRINT,
    HEADERS,
    KEY,
    OFFSET,
    OPEN,
    PARTITION,
    REUSED,
    SOURCE_KEY,
    SOURCE_STAGE,
    TIMESTAMP,
    TOPIC,
    VALUE,
    VARIANTS,
)
from quarantine.table_names import sql_literal

__all__ = [
    "DELIVERED",
    "SOURCE_STAGE",
    "VARIANTS",
    "Floors",
    "against_settled",
    "coordinate_groups",
    "fingerprint",
    "identified",
    "identified_topics",
    "identify",
    "null_safe_key_match",
    "suspect_groups",
    "synthetic_offset",
    "unique_coordinates",
]


_MAX_LONG = 0x7FFFFFFFFFFFFFFF


def synthetic_offset() -> Column:
    """The offset of a record: its own, or the stable synthetic one when unkeyed (see module doc)."""
    h = F.xxhash64(F.col(TOPIC), F.col(PARTITION), F.col(KEY), F.col(VALUE), F.col(HEADERS))
    synthetic = F.lit(-1) - h.bitwiseAND(F.lit(_MAX_LONG))
    return F.when(F.col(PARTITION).isNull() | F.col(OFFSET).isNull(), synthetic).otherwise(F.col(OFFSET))


def fingerprint(col: Callable[[str], Column] = F.col) -> Column:
    """A record's content fingerprint: a 64-bit ``xxhash64`` of key, value, headers and timestamp.

    Which of them are NULL is hashed too (Spark's hash skips a NULL input, so
    ``(NULL, x)`` and ``(x, NULL)`` would otherwise hash alike). Two records with
    other content get the same fingerprint with a chance of about 2**-64.

    Args:
        col: how to reach a column by name (``F.col`` for a frame; a table's
            columns in a MERGE condition).
    """
    key, value, headers, ts = (col(c) for c in (KEY, VALUE, HEADERS, TIMESTAMP))
    return F.xxhash64(key, value, headers, ts, key.isNull(), value.isNull(), headers.isNull(), ts.isNull())


def identify(df: DataFrame) -> DataFrame:
    """Apply the identity rules to a Kafka-shaped frame (pure; one shuffle by coordinates).

    Returns:
        ``df`` with unkeyed offsets made synthetic, copies with the same content
        (:func:`fingerprint`) dropped, and a :data:`VARIANTS` column (1, or the
        number of records with other content that share the row's coordinates,
        each of which is kept) for :class:`SourceCheck`.
    """
    keyed = df.withColumn(OFFSET, synthetic_offset()).withColumn("_q_content", fingerprint())
    by_key = Window.partitionBy(*SOURCE_KEY)
    by_content = by_key.orderBy("_q_content")
    ranked = keyed.select(
        "*",
        F.dense_rank().over(by_content).alias("_q_variant"),
        F.row_number().over(Window.partitionBy(*SOURCE_KEY, "_q_content").orderBy(
            "_q_content")).alias("_q_copy"),
    )
    return (
        ranked.withColumn(VARIANTS, F.max("_q_variant").over(by_key))
        .where(F.col("_q_copy") == 1)
        .drop("_q_variant", "_q_copy", "_q_content")
    )


def coordinate_groups(df: DataFrame) -> DataFrame:
    """``df``'s coordinates grouped by ``topic``, ``partition`` and the offset's bitmap bucket (pure).

    Each group is one bucket of 32,768 offsets (Spark's ``bitmap_bucket_number``). The
    distinct offsets are counted exactly, in a bitmap per group (``bitmap_bit_position``
    maps every ``long``, negative ones included, to one bucket and bit), so the map side
    folds a partition's rows into a few bitmaps and only those are shuffled: the
    records' bytes never are.

    Returns:
        one row per group: ``topic``, ``partition``, ``_q_bucket``, ``_q_rows``,
        ``_q_offsets``, ``_q_unkeyed`` (whether an offset is NULL) and ``_q_suspect``:
        whether the identity rules would change something in the group (its
        ``partition`` or an offset is NULL, or it holds fewer distinct offsets than rows).
    """
    offset = F.col(OFFSET)
    per_bucket = df.groupBy(TOPIC, PARTITION, F.bitmap_bucket_number(offset).alias("_q_bucket")).agg(
        F.count(F.lit(1)).alias("_q_rows"),
        F.bitmap_count(F.bitmap_construct_agg(F.bitmap_bit_position(offset))).alias("_q_offsets"),
        F.max(offset.isNull()).alias("_q_unkeyed"),
    )
    return per_bucket.withColumn(
        "_q_suspect",
        F.col(PARTITION).isNull() | F.col("_q_unkeyed") | (F.col("_q_rows") != F.col("_q_offsets")),
    )


def suspect_groups(df: DataFrame) -> DataFrame:
    """The groups of :func:`coordinate_groups` where the identity rules would change something (pure)."""
    return coordinate_groups(df).where(F.col("_q_suspect")).drop("_q_suspect")


def unique_coordinates(df: DataFrame) -> bool:
    """Whether every row of ``df`` has a ``partition`` and an ``offset`` that no other row shares.

    Runs one Spark job over the coordinates (:func:`suspect_groups`). ``topic`` may be
    NULL; rows with NULL topics share it, as in every key comparison here (``<=>``).
    """
    return suspect_groups(df).isEmpty()


def identified_topics(df: DataFrame) -> tuple[DataFrame, frozenset[str | None]]:
    """:func:`identified`'s frame, and the topics ``df`` holds, from the same one job."""
    rows = coordinate_groups(df).groupBy(TOPIC).agg(F.max("_q_suspect").alias("s")).collect()
    topics = frozenset(r[TOPIC] for r in rows)
    if not any(r["s"] for r in rows):
        return df.withColumn(VARIANTS, F.lit(1)), topics
    return identify(df), topics


def identified(df: DataFrame) -> DataFrame:
    """:func:`identify`'s result, without its shuffle when the rules change nothing (one job).

    When :func:`unique_coordinates` holds, no offset is made synthetic, no copy is
    dropped and no coordinates are shared: ``df`` comes back with :data:`VARIANTS`
    = 1 on every row, and its plan has no shuffle. Otherwise :func:`identify`.
    ``df`` must read the same rows each time it runs (a pinned Delta version, a
    listed set of files, a micro-batch): the check and the batch read it apart.
    """
    return identified_topics(df)[0]


def null_safe_key_match(left: str, right: str, columns: tuple[str, ...]) -> Column:
    """``left.c <=> right.c AND …`` over ``columns``, as a Column (no SQL text)."""
    cond: Column | None = None
    for c in columns:
        term = F.col(f"{left}.{c}").eqNullSafe(F.col(f"{right}.{c}"))
        cond = term if cond is None else cond & term
    assert cond is not None
    return cond


#: ``settled``'s status of a record in the target (the quarantine table's are :class:`QuarantineStatus`' values).
DELIVERED = "delivered"


def against_settled(df: DataFrame, settled: DataFrame) -> DataFrame:
    """``df``'s records that are not settled yet, each marked open or reused (pure; one join).

    Args:
        df: identified records (:func:`identified`) with a :data:`~quarantine.columns.FINGERPRINT`
            column.
        settled: the records the tables hold for this pipeline, one row per table row:
            ``topic``, ``partition``, ``offset``, ``_s_fp`` (fingerprint; NULL: compare by
            ``_s_ts``, then by coordinates alone), ``_s_ts`` (timestamp), ``_s_status``
            (``open``, ``replayed``, ``discarded`` or :data:`DELIVERED`), ``_s_first``
            (when the row was first seen; NULL for the target's rows) and ``_s_where``
            (a sentence naming the table and the row's state).

    Returns:
        ``df`` less the records that are closed in quarantine or in the target (and not
        open), with :data:`~quarantine.columns.OPEN` (open in quarantine: closed once it
        passes) and :data:`~quarantine.columns.REUSED` (``_s_where`` of a settled record
        with other content under the same coordinates that was there first, else NULL:
        a record's own open row was first seen at some time, and only rows first seen
        then or before, or in the target, were there first; so a record quarantined
        before a recreated topic's record at its offset runs as before).
        ``settled`` is grouped by coordinates first, so ``df``'s rows are joined once
        each and its bytes are not shuffled by the grouping.
    """
    fp, ts = F.col(FINGERPRINT), F.col(TIMESTAMP)

    def same(status: Column) -> list[Column]:
        both = F.col("_s_fp").isNotNull()
        return [
            F.collect_set(F.when(status & both, F.col("_s_fp"))),
            F.collect_set(F.when(status & ~both & F.col("_s_ts").isNotNull(), F.col("_s_ts"))),
            F.max(status & ~both & F.col("_s_ts").isNull()),
        ]

    status = F.col("_s_status")
    groups = {"c": status.isin("replayed", "discarded"), "o": status == F.lit("open"), "d": status == F.lit(DELIVERED)}
    aggs: list[Column] = []
    for g, cond in groups.items():
        fps, tss, any_ = same(cond)
        aggs += [fps.alias(f"_s_{g}_fp"), tss.alias(f"_s_{g}_ts"), any_.alias(f"_s_{g}_any")]
    per_key = settled.groupBy(*[F.col(c).alias(f"_s_{c}") for c in SOURCE_KEY]).agg(
        *aggs,
        F.collect_list(F.struct(F.col("_s_fp").alias("fp"), F.col("_s_ts").alias("ts"),
                                F.col("_s_first").alias("first"), F.col("_s_where").alias("where"))).alias("_s_all"),
    )
    joined = df.join(
        per_key, [df[c].eqNullSafe(per_key[f"_s_{c}"]) for c in SOURCE_KEY], "left"
    )

    def held(g: str) -> Column:
        return F.coalesce(
            F.array_contains(F.col(f"_s_{g}_fp"), fp) | F.array_contains(F.col(f"_s_{g}_ts"), ts)
            | F.col(f"_s_{g}_any"),
            F.lit(False),
        )

    closed, opened, delivered = held("c"), held("o"), held("d")
    # when this record's own row was first seen (NULL: it has none yet)
    mine = F.array_min(F.transform(F.filter(F.col("_s_all"), lambda s: s["fp"] == fp), lambda s: s["first"]))
    # another record that was there first: a row whose fingerprint differs, or (no fingerprint)
    # whose timestamp does, first seen no later than this record's own row
    others = F.filter(
        F.col("_s_all"),
        lambda s: F.when(s["fp"].isNotNull(), s["fp"] != fp)
        .when(s["ts"].isNotNull(), ~s["ts"].eqNullSafe(ts))
        .otherwise(F.lit(False))
        & (mine.isNull() | s["first"].isNull() | (s["first"] <= mine)),
    )
    reused = F.array_min(F.transform(others, lambda s: s["where"]))
    return joined.where(~closed & ~(delivered & ~opened)).select(
        *df.columns, opened.alias(OPEN), reused.alias(REUSED)
    )


@dataclass(frozen=True)
class Floors:
    """The lowest offset a batch holds in each topic-partition.

    A settled record below its topic-partition's floor has other coordinates than every
    record of the batch, so it cannot be one of them, nor share their coordinates: the
    comparison with what the tables settled (:func:`against_settled`) and the target's
    insert-only MERGE read only the rows at or above the floors, and Delta skips the
    files whose offsets all lie below (their statistics). A recreated topic's records
    (offsets from 0 again) have low floors: everything settled above them is compared.

    Attributes:
        lowest: ``(topic, partition, lowest offset)`` per topic-partition of the batch.
    """

    lowest: tuple[tuple[str, int, int], ...]

    #: Above this many topic-partitions the batch is compared with everything (one predicate each).
    MOST = 256

    @classmethod
    def of(cls, rows: Iterable[tuple[str | None, int | None, int | None]]) -> Floors | None:
        """The floors of ``(topic, partition, lowest offset)`` rows; None when a coordinate is NULL
        (records without coordinates get synthetic ones: compare with everything) or there are
        more than :attr:`MOST`."""
        lowest = []
        for topic, partition, offset in rows:
            if topic is None or partition is None or offset is None:
                return None
            lowest.append((str(topic), int(partition), int(offset)))
        return cls(tuple(sorted(lowest))) if 0 < len(lowest) <= cls.MOST else None

    def above(self, topic: Column, partition: Column, offset: Column) -> Column:
        """Whether a row's coordinates are at or above its topic-partition's floor (pure)."""
        out = F.lit(False)
        for t, p, o in self.lowest:
            out = out | ((topic == F.lit(t)) & (partition == F.lit(p)) & (offset >= F.lit(o)))
        return out

    def sql(self, alias: str, topic: str, partition: str, offset: str) -> str:
        """:meth:`above` as SQL over ``alias``'s columns (for a MERGE's condition)."""
        return "(" + " OR ".join(
            f"({alias}.{topic} = {sql_literal(t)} AND {alias}.{partition} = {p} AND {alias}.{offset} >= {o})"
            for t, p, o in self.lowest
        ) + ")"
