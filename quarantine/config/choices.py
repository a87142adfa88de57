"""The config's closed choices: each enumerated value a config key takes (tolerance, formats…)."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "RateDuration", "ReusedCoordinates", "SchemaEvolution", "SourceFormat", "Tolerance", "TriggerKind", "WrittenBy",
]


class Tolerance(StrEnum):
    """``errors.tolerance``: fail on the first error, or tolerate all of them."""

    NONE = "none"
    ALL = "all"


class RateDuration(StrEnum):
    """``errors.tolerance.rate.duration``: the window of the rate limit."""

    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"

    @property
    def seconds(self) -> int:
        return {"minute": 60, "hour": 3600, "day": 86400}[self.value]


class ReusedCoordinates(StrEnum):
    """``errors.coordinates.reused``: what a record whose coordinates an earlier record with
    other content already holds does (a recreated topic, a rewritten source)."""

    QUARANTINE = "quarantine"
    PROCESS = "process"
    FAIL = "fail"


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
