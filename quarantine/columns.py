"""Every column name of the tables and of a batch, and the closed vocabularies stored in them: THE home of both.

The names users see (the Kafka source's columns, the error struct's fields, the quarantine
and metrics tables' columns) and the internal ones a batch carries between the stages and
the writes, spelled once. This module imports nothing but the standard library, so code
that only reads the tables by name (the JVM-free read path, :mod:`quarantine.ops.duck`)
needs no Spark; :mod:`quarantine.schema` builds the Spark types from these names. Import a name from here.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ATTEMPTS",
    "BATCH_ID",
    "CHECK_INPUT_PREFIX",
    "CLOSING",
    "DRIFT_PREFIX",
    "ENCRYPTION_KEY_ID",
    "ERROR",
    "ERROR_CLASS",
    "ERROR_COUNT",
    "ERROR_HISTORY",
    "FINGERPRINT",
    "FIRST_SEEN_AT",
    "FIRST_SEEN_DATE",
    "HEADERS",
    "HEADER_KEY",
    "HEADER_VALUE",
    "HIDDEN_PREFIX",
    "HISTORY_AT",
    "ITEM_SEP",
    "KAFKA_SOURCE_COLUMNS",
    "KEY",
    "KIND",
    "LAST_SEEN_AT",
    "MESSAGE",
    "METRIC",
    "METRIC_VALUE",
    "OFFSET",
    "OPEN",
    "PARTITION",
    "PIPELINE",
    "QUARANTINE_FINGERPRINT",
    "QUARANTINE_KEY",
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
    "RunKind",
]


# ----------------------------------------------------------------- internal column names
# The columns a batch carries between the stages and the writes.

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
#: The quarantine table's id of the key its row's bytes are encrypted under (NULL: kept as read).
ENCRYPTION_KEY_ID = "encryption_key_id"
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


class RunKind(StrEnum):
    """What a run does (the metrics table's ``run_kind``, MLflow's ``quarantine.run_kind`` tag).

    A metrics row written before the column existed has NULL: a pipeline run.
    """

    RUN = "run"
    """A pipeline run: source records through the stages."""
    REPLAY = "replay"
    """A replay of open quarantine rows (:func:`quarantine.runners.replay.replay`)."""
    DISCARD = "discard"
    """A discard of open quarantine rows (:func:`quarantine.runners.replay.discard`)."""


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
#: A source record's identity.
SOURCE_KEY: tuple[str, ...] = (TOPIC, PARTITION, OFFSET)
#: A source record's raw content: what the quarantine keeps (and the target does not).
SOURCE_PAYLOAD: tuple[str, ...] = (KEY, VALUE, HEADERS)
#: Spark's Kafka source's columns, in its order (their types: :data:`quarantine.schema.KAFKA_SOURCE_SCHEMA`).
KAFKA_SOURCE_COLUMNS: tuple[str, ...] = (KEY, VALUE, TOPIC, PARTITION, OFFSET, TIMESTAMP, TIMESTAMP_TYPE, HEADERS)

# The error struct's fields (every stage's error, and the quarantine table's latest failure).
STAGE = "stage"
KIND = "kind"
ERROR_CLASS = "error_class"
MESSAGE = "message"
STACKTRACE = "stacktrace"
RETRIABLE = "retriable"
ATTEMPTS = "attempts"

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
#: The quarantine table's key: one row per source record per pipeline.
QUARANTINE_KEY: tuple[str, ...] = (PIPELINE, *SOURCE_KEY)

#: The metrics table's measurement column (not Kafka's :data:`VALUE`, though spelled alike).
METRIC_VALUE = "value"
#: The metrics table's other own columns: when a row was written, its metric's name, the run's kind.
RECORDED_AT = "recorded_at"
METRIC = "metric"
RUN_KIND = "run_kind"
