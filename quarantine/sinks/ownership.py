"""Which pipeline writes which topics into a target: the target's own table properties.

A record's identity in the target is its source coordinates and content, not
the pipeline that wrote it. Two pipelines reading one topic into one target
with different stages would each settle the same records their own way (one
delivers a record the other keeps open in its quarantine), so a target records,
per topic, the pipeline that writes it: the table property
``quarantine.writer.topic.<topic> = <pipeline>`` (``SHOW TBLPROPERTIES`` shows it), and
each pipeline that writes it: ``quarantine.writer.pipeline.<pipeline> = writer``. A
target without its pipeline's record is new to the pipeline: rebuilt by other means,
or written before writers were recorded (:func:`quarantine.batch.agreement.check_target_holds_replayed`
tells the two apart before the pipeline claims it).
A pipeline about to write a topic another pipeline owns in the same target is
refused before it writes anything (:func:`check_owners`), unless its config says
``target.shared: true``; other topics into one target are fine. A batch run and a Kafka
stream's start check and claim through :func:`quarantine.batch.agreement.check_and_claim`.

Pure of the batch: reading the properties is a metadata read, claiming a topic
one ``ALTER TABLE … SET TBLPROPERTIES`` commit, made only for a topic the target
has no writer for yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from quarantine.columns import TARGET_TOPIC
from quarantine.errors import TablesDisagreeError
from quarantine.tables import sql_literal, table_ref

__all__ = [
    "PIPELINE_PREFIX", "WRITER_PREFIX", "Owners", "check_owners", "claim_topics", "claim_written_topics", "owners",
]

#: The table property that names a topic's writer: ``quarantine.writer.topic.<topic>``.
WRITER_PREFIX = "quarantine.writer.topic."
#: The table property that records a pipeline writing the target: ``quarantine.writer.pipeline.<pipeline>``.
PIPELINE_PREFIX = "quarantine.writer.pipeline."


@dataclass(frozen=True)
class Owners:
    """A target's writers, from its table properties.

    Attributes:
        topics: ``topic -> pipeline`` that writes it.
        pipelines: the pipelines recorded as writing the target.
    """

    topics: Mapping[str, str] = field(default_factory=dict)
    pipelines: frozenset[str] = frozenset()

    def writes(self, pipeline: str) -> bool:
        """Whether the target records ``pipeline`` as a writer (of the target, or of one of its topics)."""
        return pipeline in self.pipelines or pipeline in self.topics.values()


def owners(spark: SparkSession, table: str) -> Owners:
    """The target's writers from its table properties (no Spark job)."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {table_ref(table)}").collect()
    return Owners(
        topics={r["key"][len(WRITER_PREFIX):]: r["value"] for r in rows if r["key"].startswith(WRITER_PREFIX)},
        pipelines=frozenset(r["key"][len(PIPELINE_PREFIX):] for r in rows if r["key"].startswith(PIPELINE_PREFIX)),
    )


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
                "target.shared: true in both configs if the target is shared on purpose (docs: Guarantees)"
            )
    return new


def claim_topics(spark: SparkSession, table: str, pipeline: str, topics: Iterable[str]) -> None:
    """Record ``pipeline`` as a writer of ``table`` and of ``topics`` in it (one commit)."""
    props = ", ".join(
        [f"{sql_literal(PIPELINE_PREFIX + pipeline)} = 'writer'",
         *(f"{sql_literal(WRITER_PREFIX + t)} = {sql_literal(pipeline)}" for t in topics)]
    )
    spark.sql(f"ALTER TABLE {table_ref(table)} SET TBLPROPERTIES ({props})")


def claim_written_topics(spark: SparkSession, table: str, pipeline: str, written: DataFrame) -> None:
    """Record ``pipeline`` as the writer of a target it just created and of every topic of the rows
    wrote there, ``written`` (one job over those rows, none for rows without the source columns,
    ``target.source_columns: false``; one commit).

    The topics are read from the rows this pipeline wrote, not from the table: another pipeline
    may append to the table between its creation and this claim, and its topics are not ours.
    """
    topics = [] if TARGET_TOPIC not in written.columns else [
        r[0] for r in written.select(TARGET_TOPIC).distinct().collect()
    ]
    claim_topics(spark, table, pipeline, [t for t in topics if t is not None])
