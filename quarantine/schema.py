"""The table and column contracts, defined once.

Everything a user sees by name lives here: the columns of Spark's Kafka source,
the per-stage result struct, the quarantine table and the metrics table. SQL
users and the replay job rely on these names; change them only with a
migration.
"""

from __future__ import annotations

from enum import StrEnum

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

__all__ = [
    "ATTEMPTS",
    "BATCH_ID",
    "CHECK_INPUT_PREFIX",
    "CLOSING",
    "DRIFT_PREFIX",
    "ERROR",
    "ERROR_CLASS",
    "ERROR_COUNT",
    "ERROR_HISTORY",
    "ERROR_HISTORY_ENTRY",
    "ERROR_STRUCT",
    "FINGERPRINT",
    "FIRST_SEEN_AT",
    "FIRST_SEEN_DATE",
    "HEADERS",
    "HEADERS_TYPE",
    "HEADER_KEY",
    "HEADER_VALUE",
    "HIDDEN_PREFIX",
    "HISTORY_AT",
    "ITEM_SEP",
    "KAFKA_SOURCE_SCHEMA",
    "KEY",
    "KIND",
    "LAST_SEEN_AT",
    "MESSAGE",
    "METRIC",
    "METRICS_SCHEMA",
    "METRIC_VALUE",
    "OFFSET",
    "OPEN",
    "PARTITION",
    "PIPELINE",
    "QUARANTINE_FINGERPRINT",
    "QUARANTINE_KEY",
    "QUARANTINE_SCHEMA",
    "RECORDED_AT",
    "REOPENED",
    "RESOLUTION",
    "RESOLVED_AT",
    "RESULT",
    "RETRIABLE",
    "RETRIES_PREFIX",
    "REUSED",
    "RUN_ID",
    "RUN_KIND",
    "SOURCE_KEY",
    "SOURCE_PAYLOAD",
    "SOURCE_STAGE",
    "STACKTRACE",
    "STAGE",
    "STATUS",
    "TARGET_FINGERPRINT",
    "TARGET_KEY",
    "TARGET_OFFSET",
    "TARGET_PARTITION",
    "TARGET_SOURCE_COLUMNS",
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
    "kafka_shape_problems",
    "result_struct",
    "target_columns",
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
#: Observed count: records open in quarantine from an earlier run that this batch runs again.
REOPENED = "records_reopened"
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
#: The target's columns after the result's when ``target.source_columns`` (the default): where
#: each good row came from, with their types.
TARGET_SOURCE_COLUMNS = StructType(
    [
        StructField(TARGET_TOPIC, StringType()),
        StructField(TARGET_PARTITION, IntegerType()),
        StructField(TARGET_OFFSET, LongType()),
        StructField(TARGET_TIMESTAMP, TimestampType()),
        StructField(TARGET_FINGERPRINT, LongType()),
    ]
)


def target_columns(result_type: DataType, last_stage: str) -> StructType:
    """The target's columns that hold a good row: the **last** stage's result, nothing earlier.

    A struct result's fields are the target's columns, by their names; any other result
    is one column named after the last stage (a ``python`` stage returning ``DOUBLE``
    gives a target of one ``DOUBLE`` column). :data:`TARGET_SOURCE_COLUMNS` follow them
    when ``target.source_columns``.
    """
    if isinstance(result_type, StructType):
        return result_type
    return StructType([StructField(last_stage, result_type)])


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

# The error struct's fields (every stage's error, and the quarantine table's latest failure).
STAGE = "stage"
KIND = "kind"
ERROR_CLASS = "error_class"
MESSAGE = "message"
STACKTRACE = "stacktrace"
RETRIABLE = "retriable"
ATTEMPTS = "attempts"

#: The error half of every stage's result column. ``stacktrace`` is null unless
#: ``errors.deadletterqueue.context.stacktrace.enable`` is true.
ERROR_STRUCT = StructType(
    [
        StructField(STAGE, StringType()),
        StructField(KIND, StringType()),
        StructField(ERROR_CLASS, StringType()),
        StructField(MESSAGE, StringType()),
        StructField(STACKTRACE, StringType()),
        StructField(RETRIABLE, BooleanType()),
        StructField(ATTEMPTS, IntegerType()),
    ]
)


def result_struct(result_type: DataType) -> StructType:
    """The type of a stage's column: ``STRUCT<result: T, error: ERROR_STRUCT>``.

    Exactly one of ``result`` and ``error`` is non-null in every row.
    """
    return StructType(
        [StructField("result", result_type), StructField("error", ERROR_STRUCT)]
    )


# The quarantine table's own columns (beside Kafka's and the error struct's); the metrics
# table shares PIPELINE, RUN_ID, BATCH_ID and STAGE with it.
PIPELINE = "pipeline"
RUN_ID = "run_id"
BATCH_ID = "batch_id"
ERROR_HISTORY = "error_history"
ERROR_COUNT = "error_count"
STATUS = "status"
FIRST_SEEN_AT = "first_seen_at"
LAST_SEEN_AT = "last_seen_at"
RESOLVED_AT = "resolved_at"
RESOLUTION = "resolution"
FIRST_SEEN_DATE = "first_seen_date"
#: When an ``error_history`` entry's failure happened.
HISTORY_AT = "at"

ERROR_HISTORY_ENTRY = StructType(
    [
        StructField(HISTORY_AT, TimestampType()),
        StructField(RUN_ID, StringType()),
        StructField(STAGE, StringType()),
        StructField(ERROR_CLASS, StringType()),
        StructField(MESSAGE, StringType()),
    ]
)

#: One row per source record per pipeline; key :data:`QUARANTINE_KEY`.
#: ``error_history`` is bounded (see :mod:`quarantine.sinks.quarantine`);
#: ``error_count`` counts every failure of the record.
#: ``first_seen_date`` is derived from ``first_seen_at`` and exists so the table
#: can be clustered by (pipeline, topic, date).
QUARANTINE_SCHEMA = StructType(
    [
        StructField(PIPELINE, StringType(), False),
        # where the record came from, and its raw bytes: the Kafka source's own fields
        *[KAFKA_SOURCE_SCHEMA[name] for name in (*SOURCE_KEY, TIMESTAMP, TIMESTAMP_TYPE, *SOURCE_PAYLOAD)],
        # the latest failure: the error struct's fields
        *ERROR_STRUCT.fields,
        StructField(ERROR_HISTORY, ArrayType(ERROR_HISTORY_ENTRY)),
        StructField(ERROR_COUNT, IntegerType()),
        StructField(STATUS, StringType()),
        StructField(FIRST_SEEN_AT, TimestampType()),
        StructField(LAST_SEEN_AT, TimestampType()),
        StructField(RUN_ID, StringType()),
        StructField(BATCH_ID, LongType()),
        StructField(RESOLVED_AT, TimestampType()),
        StructField(RESOLUTION, StringType()),
        StructField(FIRST_SEEN_DATE, DateType()),
        # the record's content (quarantine.identity.fingerprint); NULL in rows written before it
        # existed (computed from their raw bytes when read) and in rows a custom sink reported
        StructField(QUARANTINE_FINGERPRINT, LongType()),
    ]
)

QUARANTINE_KEY: tuple[str, ...] = (PIPELINE, *SOURCE_KEY)

#: The metrics table's measurement column (not Kafka's :data:`VALUE`, though spelled alike).
METRIC_VALUE = "value"
#: The metrics table's other own columns: when a row was written, its metric's name, the run's kind.
RECORDED_AT = "recorded_at"
METRIC = "metric"
RUN_KIND = "run_kind"

#: One row per batch per metric (per stage / topic where the metric has one). ``run_kind``
#: (:class:`~quarantine.listeners.events.RunKind`: run, replay, discard) came later: NULL in older rows is ``run``.
METRICS_SCHEMA = StructType(
    [
        StructField(PIPELINE, StringType(), False),
        StructField(RUN_ID, StringType()),
        StructField(BATCH_ID, LongType()),
        StructField(RECORDED_AT, TimestampType()),
        StructField(METRIC, StringType(), False),
        StructField(STAGE, StringType()),
        StructField(TOPIC, StringType()),
        StructField(METRIC_VALUE, DoubleType()),
        StructField(RUN_KIND, StringType()),
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
