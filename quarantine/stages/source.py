"""The source check: the identity rules' verdict on a record, as the stage every chain starts with.

The rules themselves (what makes two records one, what an earlier settled record is)
are :mod:`quarantine.identity`'; this stage turns their marks (:data:`VARIANTS`,
:data:`REUSED`) into a record's error.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.columns import OFFSET, OPEN, PARTITION, REUSED, SOURCE_STAGE, TOPIC, VALUE, VARIANTS, ErrorKind
from quarantine.stage import Stage, StageContext, error_column, outcome

__all__ = ["SourceCheck"]


@dataclass(frozen=True)
class SourceCheck(Stage):
    """Fails a record whose coordinates other content shares (kind ``validate``).

    ``ConflictingDuplicate``: other records with the same coordinates are in the same
    read (:data:`VARIANTS` > 1, see :func:`identify`). ``CoordinatesReused``: an earlier
    record with other content is settled under them (:data:`REUSED`, a sentence saying
    where, set by the pipeline's ``prepare``); it wins when both hold. Its result is the
    record's ``value``, unchanged, so the next stage reads what it would have read
    without it.

    Under ``errors.coordinates.reused: process`` the pipeline leaves it out of the chain.

    Attributes:
        reads_reused: the frame has the :data:`REUSED` column (a batch run or a replay).
    """

    reads_reused: bool = False
    name: str = SOURCE_STAGE
    kind: ErrorKind = ErrorKind.VALIDATE
    input: str | None = VALUE

    deterministic = True  # pure Column expressions of the record

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        variants = F.col(VARIANTS)
        reused = F.col(REUSED) if self.reads_reused else F.lit(None).cast("string")
        where = F.concat(
            F.lit("topic="), F.coalesce(F.col(TOPIC), F.lit("NULL")),
            F.lit(" partition="), F.coalesce(F.col(PARTITION).cast("string"), F.lit("NULL")),
            F.lit(" offset="), F.col(OFFSET).cast("string"),
        )
        conflict = F.concat(
            variants.cast("string"),
            F.lit(" records with different key/value/headers/timestamp share "), where,
            F.lit(" in this read; each is quarantined with its own row (column fingerprint)"),
        )
        again = F.concat(
            F.lit("an earlier record with other content holds "), where, F.lit(": "), reused,
            F.lit("; this is a new record (a recreated topic or a rewritten source?); "
                  "errors.coordinates.reused: process takes such records as new ones"),
        )
        error_class = F.when(reused.isNotNull(), F.lit("CoordinatesReused")).otherwise(F.lit("ConflictingDuplicate"))
        message = F.when(reused.isNotNull(), again).otherwise(conflict)
        err = error_column(self.name, self.kind, error_class, message, retriable=False)
        # a record open in quarantine from an earlier run is that row's own record: it runs as before
        settled_here = F.col(OPEN) if self.reads_reused else F.lit(False)
        return outcome(value, reused.isNotNull() | ((variants > 1) & ~settled_here), err)
