"""A Kafka stream's offset watermark: when its failed records can be appended, not MERGEd.

Per topic-partition, the highest offset the quarantine table holds for a pipeline; a
streaming query's micro-batches pass it, and from then on no key of theirs can be in
the table (:func:`~quarantine.sinks.quarantine.append_quarantine`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from quarantine.columns import OFFSET, PARTITION, PIPELINE, TOPIC, WATERMARK_PREFIX
from quarantine.sinks.quarantine import read_quarantine
from quarantine.tables import table_exists

__all__ = ["OffsetWatermark"]


@dataclass
class OffsetWatermark:
    """When a Kafka stream's failed records can be appended to the quarantine table.

    Kafka offsets only grow within a streaming query, so once the stream has
    read past the highest offset the table holds for this pipeline in every
    topic-partition, no key of a later micro-batch can be in the table, and its
    failed rows can be appended (:func:`~quarantine.sinks.quarantine.append_quarantine`) instead of MERGEd:
    the MERGE's join against the whole table is the largest fixed cost of a
    micro-batch.

    Loaded once per query start (:meth:`load`): per topic-partition, the highest
    offset of this pipeline's rows. Until the stream passes all of them
    (:attr:`passed`), batches are MERGEd and :meth:`observed` adds, to the
    batch's one observed pass, the highest offset it read in each
    topic-partition still ahead; :meth:`advance` drops those it has reached.
    A restart after a crash loads again, so a micro-batch replayed after a
    crash, whose rows may be in the table, is always MERGEd.

    Attributes:
        ahead: ``(topic, partition) -> offset`` not reached yet.
    """

    ahead: dict[tuple[str, int], int] = field(default_factory=dict)
    #: the observed columns' name prefix (two watermarks can observe one pass)
    prefix: str = WATERMARK_PREFIX
    _order: tuple[tuple[str, int], ...] = field(default=(), init=False, repr=False)

    @classmethod
    def load(cls, spark: SparkSession, name: str, pipeline: str) -> OffsetWatermark:
        """The table's highest offset per topic-partition for ``pipeline`` (one aggregate query)."""
        if not table_exists(spark, name):
            return cls()
        rows = (
            read_quarantine(spark, name)
            .where((F.col(PIPELINE) == F.lit(pipeline)) & F.col(PARTITION).isNotNull())
            .groupBy(TOPIC, PARTITION)
            .agg(F.max(OFFSET).alias(OFFSET))
            .collect()
        )
        return cls({(r[TOPIC], int(r[PARTITION])): int(r[OFFSET]) for r in rows if r[OFFSET] is not None})

    @property
    def passed(self) -> bool:
        """Whether the stream is past every offset the table held: batches may be appended."""
        return not self.ahead

    def observed(self) -> list[Column]:
        """Aggregates for the batch's observed pass: its highest offset per topic-partition still ahead."""
        self._order = tuple(sorted(self.ahead))
        return [
            F.max(F.when((F.col(TOPIC) == F.lit(t)) & (F.col(PARTITION) == F.lit(p)), F.col(OFFSET)))
            .alias(f"{self.prefix}{i}")
            for i, (t, p) in enumerate(self._order)
        ]

    def advance(self, counts: Mapping[str, Any]) -> None:
        """Drop the topic-partitions the batch read up to (from :meth:`observed`'s values)."""
        for i, tp in enumerate(self._order):
            seen = counts.get(f"{self.prefix}{i}")
            if seen is not None and int(seen) >= self.ahead.get(tp, -1):
                self.ahead.pop(tp, None)
        self._order = ()
