"""The table and column contracts, defined once.

Everything a user sees by name lives here: the columns of Spark's Kafka source,
the per-stage result struct, the quarantine table and the metrics table. SQL
users and the replay job rely on these names; change them only with a
migration.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ERROR_HISTORY_ENTRY",
    "ERROR_STRUCT",
    "HEADERS_TYPE",
    "KAFKA_SOURCE_SCHEMA",
    "METRICS_SCHEMA",
    "QUARANTINE_KEY",
    "QUARANTINE_SCHEMA",
    "SOURCE_KEY",
    "ErrorKind",
    "QuarantineStatus",
    "check_kafka_shaped",
    "result_struct",
]


class ErrorKind(StrEnum):
    """Where in the pipeline a record failed (the error struct's ``kind``)."""

    DESERIALIZE = "deserialize"
    TRANSFORM = "transform"
    VALIDATE = "validate"
    EXPECTATION = "expectation"
    SINK = "sink"


class QuarantineStatus(StrEnum):
    """Lifecycle of a quarantine row (the ``status`` column)."""

    OPEN = "open"
    REPLAYED = "replayed"
    DISCARDED = "discarded"


HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

#: The columns exactly as ``spark.readStream.format("kafka")`` gives them
#: (with ``includeHeaders=true``). Batch sources must have these columns.
KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", HEADERS_TYPE),
    ]
)

#: A source record's identity.
SOURCE_KEY: tuple[str, ...] = ("topic", "partition", "offset")

#: The error half of every stage's result column. ``stacktrace`` is null unless
#: ``errors.deadletterqueue.context.stacktrace.enable`` is true.
ERROR_STRUCT = StructType(
    [
        StructField("stage", StringType()),
        StructField("kind", StringType()),
        StructField("error_class", StringType()),
        StructField("message", StringType()),
        StructField("stacktrace", StringType()),
        StructField("retriable", BooleanType()),
        StructField("attempts", IntegerType()),
    ]
)


def result_struct(result_type: DataType) -> StructType:
    """The type of a stage's column: ``STRUCT<result: T, error: ERROR_STRUCT>``.

    Exactly one of ``result`` and ``error`` is non-null in every row.
    """
    return StructType(
        [StructField("result", result_type), StructField("error", ERROR_STRUCT)]
    )


ERROR_HISTORY_ENTRY = StructType(
    [
        StructField("at", TimestampType()),
        StructField("run_id", StringType()),
        StructField("stage", StringType()),
        StructField("error_class", StringType()),
        StructField("message", StringType()),
    ]
)

#: One row per source record per pipeline; key :data:`QUARANTINE_KEY`.
#: ``error_history`` is bounded (see :mod:`quarantine.sinks.quarantine`);
#: ``error_count`` counts every failure of the record.
#: ``first_seen_date`` is derived from ``first_seen_at`` and exists so the table
#: can be clustered by (pipeline, topic, date).
QUARANTINE_SCHEMA = StructType(
    [
        StructField("pipeline", StringType(), False),
        # where the record came from, and its raw bytes: the Kafka source's own fields
        *[KAFKA_SOURCE_SCHEMA[name] for name in (*SOURCE_KEY, "timestamp", "timestampType", "key", "value", "headers")],
        # the latest failure: the error struct's fields
        *ERROR_STRUCT.fields,
        StructField("error_history", ArrayType(ERROR_HISTORY_ENTRY)),
        StructField("error_count", IntegerType()),
        StructField("status", StringType()),
        StructField("first_seen_at", TimestampType()),
        StructField("last_seen_at", TimestampType()),
        StructField("run_id", StringType()),
        StructField("batch_id", LongType()),
        StructField("resolved_at", TimestampType()),
        StructField("resolution", StringType()),
        StructField("first_seen_date", DateType()),
    ]
)

QUARANTINE_KEY: tuple[str, ...] = ("pipeline", "topic", "partition", "offset")

#: One row per batch per metric (per stage / topic where the metric has one).
METRICS_SCHEMA = StructType(
    [
        StructField("pipeline", StringType(), False),
        StructField("run_id", StringType()),
        StructField("batch_id", LongType()),
        StructField("recorded_at", TimestampType()),
        StructField("metric", StringType(), False),
        StructField("stage", StringType()),
        StructField("topic", StringType()),
        StructField("value", DoubleType()),
    ]
)


def check_kafka_shaped(df: DataFrame, where: str) -> None:
    """Raise :class:`~quarantine.errors.SourceError` unless ``df`` has the Kafka source's columns and types."""
    from quarantine.errors import SourceError

    have = {f.name: f.dataType for f in df.schema.fields}
    problems = []
    for f in KAFKA_SOURCE_SCHEMA.fields:
        if f.name not in have:
            problems.append(f"missing column {f.name} {f.dataType.simpleString()}")
        elif have[f.name] != f.dataType:
            problems.append(
                f"column {f.name}: expected {f.dataType.simpleString()}, found {have[f.name].simpleString()}"
            )
    if problems:
        raise SourceError(
            f"source {where} is not Kafka-shaped (the columns of Spark's Kafka source): " + "; ".join(problems)
        )
