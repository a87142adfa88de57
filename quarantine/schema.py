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

from quarantine.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "CHECK_INPUT_PREFIX",
    "CLOSING",
    "DRIFT_PREFIX",
    "ERROR",
    "ERROR_HISTORY_ENTRY",
    "ERROR_STRUCT",
    "FINGERPRINT",
    "HEADERS",
    "HEADERS_TYPE",
    "HEADER_KEY",
    "HEADER_VALUE",
    "HIDDEN_PREFIX",
    "ITEM_SEP",
    "KAFKA_SOURCE_SCHEMA",
    "KEY",
    "METRICS_SCHEMA",
    "METRIC_VALUE",
    "OFFSET",
    "OPEN",
    "PARTITION",
    "QUARANTINE_FINGERPRINT",
    "QUARANTINE_KEY",
    "QUARANTINE_SCHEMA",
    "RESULT",
    "RETRIES_PREFIX",
    "REUSED",
    "SOURCE_KEY",
    "SOURCE_PAYLOAD",
    "SOURCE_STAGE",
    "TARGET_FINGERPRINT",
    "TARGET_KEY",
    "TARGET_OFFSET",
    "TARGET_PARTITION",
    "TARGET_SOURCE_PREFIX",
    "TARGET_TIMESTAMP",
    "TARGET_TOPIC",
    "TIMESTAMP",
    "TIMESTAMP_TYPE",
    "TOPIC",
    "VALUE",
    "VARIANTS",
    "WATERMARK_PREFIX",
    "ErrorKind",
    "QuarantineStatus",
    "check_kafka_shaped",
    "kafka_shape_problems",
    "result_struct",
]


# ----------------------------------------------------------------- internal column names
# The columns a batch carries between the stages and the writes, spelled once here.

#: The chain's final result (the batch's projection for the two writes).
RESULT = "_q_result"
#: The chain's final error: NULL for a good row.
ERROR = "_q_error"
#: True where the record is open in quarantine from an earlier run (batch runs and replay).
OPEN = "_q_open"
#: Observed count: records open in quarantine that passed in this batch (their rows get closed).
CLOSING = "records_closing"
#: How many byte-different records share a non-Kafka source's coordinates (:mod:`quarantine.identity`).
VARIANTS = "_q_variants"
#: The stage (the error's ``stage``) that fails records whose coordinates other content shares
#: (:class:`quarantine.stages.source.SourceCheck`).
SOURCE_STAGE = "source"
#: A record's content fingerprint in a batch (:func:`quarantine.identity.fingerprint`).
FINGERPRINT = "_q_fingerprint"
#: Where the record's coordinates are held by an earlier record with other content (a sentence), else NULL.
REUSED = "_q_reused"
#: The prefix of the target's copies of a record's source columns: ``_source_<column>``.
TARGET_SOURCE_PREFIX = "_source_"
#: The target's copies of the source coordinates and timestamp.
TARGET_TOPIC = "_source_topic"
TARGET_PARTITION = "_source_partition"
TARGET_OFFSET = "_source_offset"
TARGET_TIMESTAMP = "_source_timestamp"
#: The target's copy of :data:`SOURCE_KEY` (a record's coordinates), in the same order.
TARGET_KEY: tuple[str, ...] = (TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET)
#: The fingerprint's column in the quarantine table, and in the target (with the coordinates).
QUARANTINE_FINGERPRINT = "fingerprint"
TARGET_FINGERPRINT = "_source_fingerprint"
#: Prefix of a judging stage's input column in the persisted batch (:mod:`quarantine.batch.verdict`).
CHECK_INPUT_PREFIX = "_q_check_"
#: Prefix of the hidden columns of values a stage computes once per row (dropped after the stages).
HIDDEN_PREFIX = "__q_"
#: Prefix of a stage's per-row retry count column.
RETRIES_PREFIX = "_q_retries_"
#: Prefix of a stage's per-row undeclared fields column (schema drift).
DRIFT_PREFIX = "_q_drift_"
#: Joins names inside one string value: a drift column's field names, a metrics sketch item's
#: stage and topic (in no stage, topic or field name a pipeline uses).
ITEM_SEP = "\x1f"
#: Prefix of the observed per-partition offset maxima of a Kafka stream's watermark.
WATERMARK_PREFIX = "_q_watermark:"


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


# ----------------------------------------------------------------- Kafka's source columns
# The names Spark's Kafka source gives its columns; the quarantine table keeps them (its raw
# record), the demo sources and the errant record reporter produce them.

#: The record's key and value bytes.
KEY = "key"
VALUE = "value"
#: A record's coordinates: topic, partition, offset (:data:`SOURCE_KEY`).
TOPIC = "topic"
PARTITION = "partition"
OFFSET = "offset"
#: The record's timestamp and its kind (0 create time, 1 log append time).
TIMESTAMP = "timestamp"
TIMESTAMP_TYPE = "timestampType"
#: The record's headers: an array of :data:`HEADER_KEY` / :data:`HEADER_VALUE` structs.
HEADERS = "headers"
#: The fields of one header (Kafka's header struct, also the DLQ topic's headers).
HEADER_KEY = "key"
HEADER_VALUE = "value"

HEADERS_TYPE = ArrayType(
    StructType([StructField(HEADER_KEY, StringType()), StructField(HEADER_VALUE, BinaryType())])
)

#: The columns exactly as ``spark.readStream.format("kafka")`` gives them
#: (with ``includeHeaders=true``). Batch sources must have these columns.
KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField(KEY, BinaryType()),
        StructField(VALUE, BinaryType()),
        StructField(TOPIC, StringType()),
        StructField(PARTITION, IntegerType()),
        StructField(OFFSET, LongType()),
        StructField(TIMESTAMP, TimestampType()),
        StructField(TIMESTAMP_TYPE, IntegerType()),
        StructField(HEADERS, HEADERS_TYPE),
    ]
)

#: A source record's identity.
SOURCE_KEY: tuple[str, ...] = (TOPIC, PARTITION, OFFSET)
#: A source record's raw content: what the quarantine keeps (and the target does not).
SOURCE_PAYLOAD: tuple[str, ...] = (KEY, VALUE, HEADERS)

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
        *[KAFKA_SOURCE_SCHEMA[name] for name in (*SOURCE_KEY, TIMESTAMP, TIMESTAMP_TYPE, *SOURCE_PAYLOAD)],
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
        # the record's content (quarantine.identity.fingerprint); NULL in rows written before it
        # existed (computed from their raw bytes when read) and in rows a custom sink reported
        StructField("fingerprint", LongType()),
    ]
)

QUARANTINE_KEY: tuple[str, ...] = ("pipeline", *SOURCE_KEY)

#: The metrics table's measurement column (not Kafka's :data:`VALUE`, though spelled alike).
METRIC_VALUE = "value"

#: One row per batch per metric (per stage / topic where the metric has one). ``run_kind``
#: (:class:`~quarantine.listeners.events.RunKind`: run, replay, discard) came later: NULL in older rows is ``run``.
METRICS_SCHEMA = StructType(
    [
        StructField("pipeline", StringType(), False),
        StructField("run_id", StringType()),
        StructField("batch_id", LongType()),
        StructField("recorded_at", TimestampType()),
        StructField("metric", StringType(), False),
        StructField("stage", StringType()),
        StructField(TOPIC, StringType()),
        StructField(METRIC_VALUE, DoubleType()),
        StructField("run_kind", StringType()),
    ]
)


def kafka_shape_problems(schema: StructType) -> list[str]:
    """What keeps ``schema`` from being Kafka-shaped: each missing column and each column of
    another type (``column value: expected binary, found string``); empty when it is one.
    Columns beyond :data:`KAFKA_SOURCE_SCHEMA`'s are allowed."""
    have = {f.name: f.dataType for f in schema.fields}
    problems = []
    for f in KAFKA_SOURCE_SCHEMA.fields:
        if f.name not in have:
            problems.append(f"missing column {f.name} {f.dataType.simpleString()}")
        elif have[f.name] != f.dataType:
            problems.append(
                f"column {f.name}: expected {f.dataType.simpleString()}, found {have[f.name].simpleString()}"
            )
    return problems


def check_kafka_shaped(df: DataFrame, where: str) -> None:
    """Raise :class:`~quarantine.errors.SourceError` unless ``df`` has the Kafka source's columns and types."""
    problems = kafka_shape_problems(df.schema)
    if problems:
        raise SourceError(
            f"source {where} is not Kafka-shaped (the columns of Spark's Kafka source): " + "; ".join(problems)
        )
