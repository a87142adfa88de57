"""The config's closed choices: each enumerated value a config key takes (tolerance, formats…)."""

from __future__ import annotations

from enum import StrEnum

from quarantine.errorhandling.settings import RateDuration, ReusedCoordinates, Tolerance

__all__ = [
    "RateDuration", "ReusedCoordinates", "SchemaEvolution", "SourceFormat", "Tolerance", "TriggerKind", "WrittenBy",
]


class SchemaEvolution(StrEnum):
    """``target.schema_evolution``: what a field the target table lacks (a field the pipeline's
    output gained), or a number Delta's type widening takes, does. A field is never dropped: it
    is added (a column widened), or the run refuses before any write."""

    ADD_COLUMNS = "add_columns"
    FAIL = "fail"


class WrittenBy(StrEnum):
    """``target.written_by``: who appends the target and quarantine tables."""

    JOB = "job"
    PIPELINE = "pipeline"


class SourceFormat(StrEnum):
    """Where records come from. Delta and Parquet sources must be Kafka-shaped."""

    KAFKA = "kafka"
    DELTA = "delta"
    PARQUET = "parquet"


class TriggerKind(StrEnum):
    """Streaming trigger: drain what is there and stop, or run every interval."""

    AVAILABLE_NOW = "available_now"
    PROCESSING_TIME = "processing_time"
