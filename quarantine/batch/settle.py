"""What a batch runs on: its records identified and compared with what the two tables settled.

The I/O half of a batch's preparation, beside the run that does it (:mod:`quarantine.batch.run`);
the pure half (the stages, the split) is :class:`~quarantine.batch.plan.Plan`'s. Here the
quarantine and target tables are read, the pipeline's topics in the target are checked and
claimed (:func:`~quarantine.batch.agreement.check_and_claim`), and under
``errors.coordinates.reused: fail`` one job looks for a record whose coordinates other
content holds.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.batch.agreement import check_and_claim, check_tables_agree
from quarantine.batch.plan import Plan
from quarantine.columns import (
    FINGERPRINT,
    OFFSET,
    OPEN,
    PARTITION,
    REUSED,
    SOURCE_KEY,
    TARGET_FINGERPRINT,
    TARGET_KEY,
    TARGET_TIMESTAMP,
    TOPIC,
)
from quarantine.config import ReusedCoordinates, SourceFormat
from quarantine.errors import CoordinatesReusedError
from quarantine.identity import DELIVERED, VARIANTS, Floors, against_settled, fingerprint, identified_topics
from quarantine.sinks.quarantine import settled_records
from quarantine.tables import read_table, table_exists

__all__ = ["floors_of", "prepare", "unsettled"]

log = logging.getLogger("quarantine")


def prepare(plan: Plan, df: DataFrame, *, streaming: bool = False, floors: Floors | None = None) -> DataFrame:
    """What a batch runs on: identified records not settled yet (see :mod:`quarantine.identity`).

    * Not a Kafka topic (or a replay): coordinates made total, copies of one
      record dropped (:func:`~quarantine.identity.identified`: one narrow job
      checks the coordinates; only a batch with duplicates or unkeyed records is
      shuffled).
    * A batch run or a replay: records already in the target, or closed in
      quarantine (``replayed``, ``discarded``), are left out: a re-run does not
      run them again, so the two tables stay disjoint. A record is the same
      record when its coordinates and its content's fingerprint are
      (:func:`~quarantine.identity.against_settled`); ``_q_open`` marks
      records open in quarantine, which are closed once their good row is in
      the target, and ``_q_reused`` records whose coordinates an earlier record
      with other content holds.
    * A micro-batch of a stream: offsets are new, nothing is looked up.

    With ``floors`` (a batch of what the source added since the last run), only the settled
    rows at or above them are read and compared: no row below can be one of the batch's.

    Raises:
        TablesDisagreeError: the target does not exist while the quarantine table
            says records of this pipeline were replayed into it
            (:func:`~quarantine.batch.agreement.check_tables_agree`), or a target that
            has no record of this pipeline writing it lacks some of them
            (:func:`~quarantine.batch.agreement.check_target_holds_replayed`), or another pipeline
            writes one of the batch's topics into the target
            (:mod:`quarantine.sinks.ownership`; not with ``target.shared``).
        CoordinatesReusedError: ``errors.coordinates.reused: fail`` and a record's
            coordinates are held by other content (one Spark job looks, under
            ``fail`` only), before anything is written.
    """
    config, spark = plan.config, plan.spark
    topics: frozenset[str | None] = frozenset()
    if config.source.format is not SourceFormat.KAFKA or not streaming:
        df, topics = identified_topics(df)
    if streaming:
        return df
    df = df.withColumn(FINGERPRINT, fingerprint())
    quarantined = settled_records(spark, plan.quarantine_table, config.pipeline)
    delivered = _delivered(plan)
    check_tables_agree(spark, config, target_exists=delivered is not None,
                       quarantine_exists=quarantined is not None)
    if delivered is not None:
        check_and_claim(spark, config, topics, plan.write_operator)
    settled = _union(quarantined, delivered)
    if settled is not None and floors is not None:
        settled = settled.where(floors.above(F.col(TOPIC), F.col(PARTITION), F.col(OFFSET)))
    if settled is None:
        df = df.withColumn(OPEN, F.lit(False)).withColumn(REUSED, F.lit(None).cast("string"))
    else:
        df = against_settled(df, settled)
    if config.errors.coordinates_reused is ReusedCoordinates.FAIL:
        _refuse_reused(df)
    return df


def floors_of(df: DataFrame) -> Floors | None:
    """``df``'s lowest offset per topic-partition (one job over its coordinates); None when a
    coordinate is NULL or there are too many (:meth:`Floors.of <quarantine.identity.Floors.of>`)."""
    found = df.groupBy(TOPIC, PARTITION).agg(
        F.min(OFFSET), F.count(F.when(F.col(OFFSET).isNull(), 1))
    ).collect()
    if any(r[3] for r in found):
        return None
    return Floors.of((r[0], r[1], r[2]) for r in found)


def unsettled(plan: Plan, split: DataFrame, floors: Floors | None = None) -> DataFrame:
    """A Kafka stream's staged micro-batch less the records the tables already settled.

    For a query started from a new checkpoint (a reset, or after a topic was
    recreated) over tables that hold records of its topics: until the stream
    has read past them (the runner's overlap :class:`OffsetWatermark`), each
    micro-batch is compared with them as a batch run's records are
    (:func:`~quarantine.identity.against_settled`): records in the target or
    closed in quarantine are left out, open ones run again into their own rows
    (``_q_open``: closed once they pass), and records whose coordinates other
    content holds (``_q_reused``) run as new records. With ``floors`` (the micro-batch's own), only
    the settled rows at or above them are read.
    """
    settled = _union(settled_records(plan.spark, plan.quarantine_table, plan.config.pipeline), _delivered(plan))
    if settled is not None and floors is not None:
        settled = settled.where(floors.above(F.col(TOPIC), F.col(PARTITION), F.col(OFFSET)))
    return split if settled is None else against_settled(split.drop(OPEN), settled)


def _delivered(plan: Plan) -> DataFrame | None:
    """The target's records in :func:`~quarantine.identity.against_settled`'s ``settled`` shape."""
    if not table_exists(plan.spark, plan.target_table):
        return None
    target = read_table(plan.spark, plan.target_table)
    fp = F.col(TARGET_FINGERPRINT) if TARGET_FINGERPRINT in target.columns else F.lit(None).cast("bigint")
    return target.select(
        *[F.col(t).alias(c) for t, c in zip(TARGET_KEY, SOURCE_KEY, strict=True)],
        fp.alias("_s_fp"), F.col(TARGET_TIMESTAMP).alias("_s_ts"),
        F.lit(DELIVERED).alias("_s_status"), F.lit(None).cast("timestamp").alias("_s_first"),
        F.lit(f"in the target table {plan.target_table}").alias("_s_where"),
    )


def _refuse_reused(df: DataFrame) -> None:
    """Raise :class:`CoordinatesReusedError` naming a record of ``df`` whose coordinates other content shares."""
    shared = F.col(REUSED).isNotNull() | (F.col(VARIANTS) > 1 if VARIANTS in df.columns else F.lit(False))
    found = df.where(shared).select(*SOURCE_KEY, REUSED).limit(1).collect()
    if found:
        r = found[0]
        where = r[REUSED] or "in this read, with other content"
        raise CoordinatesReusedError(
            f"errors.coordinates.reused is fail: the record at topic={r[TOPIC]} partition={r[PARTITION]} "
            f"offset={r[OFFSET]} has other content than the record {where}; nothing was written. "
            "If the topic was recreated or the source rewritten, set errors.coordinates.reused to "
            "quarantine (the default: such records are quarantined as CoordinatesReused) or process "
            "(they are taken as new records)"
        )


def _union(quarantined: DataFrame | None, delivered: DataFrame | None) -> DataFrame | None:
    """The settled records of both tables (:func:`_delivered`'s shape), None when neither exists."""
    if quarantined is None or delivered is None:
        return quarantined if delivered is None else delivered
    return quarantined.unionByName(delivered)
