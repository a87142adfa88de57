"""Which pipeline writes which topics into a target: the target's own table properties.

A record's identity in the target is its source coordinates and content, not
the pipeline that wrote it. Two pipelines reading one topic into one target
with different stages would each settle the same records their own way (one
delivers a record the other keeps open in its quarantine), so a target records,
per topic, the pipeline that writes it: the table property
``quarantine.writer.topic.<topic> = <pipeline>`` (``SHOW TBLPROPERTIES`` shows it).
A pipeline about to write a topic another pipeline owns in the same target is
refused before it writes anything (:func:`check_owners`), unless its config says
``target.shared: true``; other topics into one target are fine.

Pure of the batch: reading the properties is a metadata read, claiming a topic
one ``ALTER TABLE … SET TBLPROPERTIES`` commit, made only for a topic the target
has no writer for yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import SparkSession

from quarantine.errors import TablesDisagreeError
from quarantine.sinks import read_table, sql_literal, table_ref

__all__ = ["WRITER_PREFIX", "check_owners", "claim_topics", "claim_written_topics", "owners"]

#: The table property that names a topic's writer: ``quarantine.writer.topic.<topic>``.
WRITER_PREFIX = "quarantine.writer.topic."


def owners(spark: SparkSession, table: str) -> dict[str, str]:
    """``topic -> pipeline`` from the target's table properties (no Spark job)."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {table_ref(table)}").collect()
    return {r["key"][len(WRITER_PREFIX):]: r["value"] for r in rows if r["key"].startswith(WRITER_PREFIX)}


def check_owners(
    table: str, pipeline: str, topics: Iterable[str | None], known: Mapping[str, str], *, shared: bool
) -> list[str]:
    """The batch's topics no pipeline owns in ``table`` yet (to claim once written).

    Args:
        table: the target.
        pipeline: the pipeline about to write.
        topics: the topics of the batch (NULL topics have no owner).
        known: :func:`owners` of the target.
        shared: ``target.shared``: writing another pipeline's topic is meant.

    Raises:
        TablesDisagreeError: a topic is owned by another pipeline and ``shared`` is
            false; the message names both pipelines, the topic and the key to set.
    """
    new: list[str] = []
    for topic in sorted(t for t in topics if t is not None):
        owner = known.get(topic)
        if owner is None:
            new.append(topic)
        elif owner != pipeline and not shared:
            raise TablesDisagreeError(
                f"pipeline {pipeline} would write topic {topic} into the target {table}, which pipeline "
                f"{owner} already writes (table property {WRITER_PREFIX}{topic}); two pipelines settling one "
                "topic's records in one target with different stages would leave records in the target and "
                "open in the other's quarantine. Nothing was written. Use another target, or set "
                "target.shared: true in both configs if the target is shared on purpose (README: Guarantees)"
            )
    return new


def claim_topics(spark: SparkSession, table: str, pipeline: str, topics: Iterable[str]) -> None:
    """Record ``pipeline`` as the writer of ``topics`` in ``table`` (one commit; none for no topic)."""
    props = ", ".join(f"{sql_literal(WRITER_PREFIX + t)} = {sql_literal(pipeline)}" for t in topics)
    if props:
        spark.sql(f"ALTER TABLE {table_ref(table)} SET TBLPROPERTIES ({props})")


def claim_written_topics(spark: SparkSession, table: str, pipeline: str) -> None:
    """Record ``pipeline`` as the writer of every topic a target it just created holds (one job;
    none for a target without the source columns, ``target.source_columns: false``)."""
    rows = read_table(spark, table)
    if "_source_topic" not in rows.columns:
        return
    topics = [r[0] for r in rows.select("_source_topic").distinct().collect()]
    claim_topics(spark, table, pipeline, [t for t in topics if t is not None])
