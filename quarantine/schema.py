"""The tables' types, defined once: the Kafka source, the per-stage result struct, the quarantine and metrics tables.

SQL users and the replay job rely on these; change them only with a migration. The
column names they are built from are :mod:`quarantine.columns`' (the one home of every
name: import a name from there). The Spark types (:data:`KAFKA_SOURCE_SCHEMA`,
:data:`ERROR_STRUCT`, :data:`QUARANTINE_SCHEMA`…) are built the first time one is read, so
importing this module imports no pyspark; reading a type imports ``pyspark.sql.types``
(no JVM).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, cast

from quarantine.columns import (
    ATTEMPTS,
    BATCH_ID,
    ENCRYPTION_KEY_ID,
    ERROR_CLASS,
    ERROR_COUNT,
    ERROR_HISTORY,
    FIRST_SEEN_AT,
    FIRST_SEEN_DATE,
    HEADER_KEY,
    HEADER_VALUE,
    HEADERS,
    HISTORY_AT,
    KAFKA_SOURCE_COLUMNS,
    KEY,
    KIND,
    LAST_SEEN_AT,
    MESSAGE,
    METRIC,
    METRIC_VALUE,
    OFFSET,
    PARTITION,
    PIPELINE,
    QUARANTINE_FINGERPRINT,
    QUARANTINE_KEY,
    RECORDED_AT,
    RESOLUTION,
    RESOLVED_AT,
    RETRIABLE,
    RUN_ID,
    RUN_KIND,
    SOURCE_KEY,
    SOURCE_PAYLOAD,
    STACKTRACE,
    STAGE,
    STATUS,
    TARGET_FINGERPRINT,
    TARGET_OFFSET,
    TARGET_PARTITION,
    TARGET_TIMESTAMP,
    TARGET_TOPIC,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
)
from quarantine.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql.types import ArrayType, DataType, StructType

__all__ = [
    "ERROR_HISTORY_ENTRY",
    "ERROR_STRUCT",
    "HEADERS_TYPE",
    "KAFKA_SOURCE_SCHEMA",
    "METRICS_SCHEMA",
    "QUARANTINE_REQUIRED",
    "QUARANTINE_SCHEMA",
    "TARGET_SOURCE_COLUMNS",
    "check_quarantine_columns",
    "kafka_shape_problems",
    "result_struct",
    "source_column_type",
    "target_columns",
]


# The Spark types, declared for type checkers; :func:`__getattr__` builds them on first use.
#: The target's columns after the result's when ``target.source_columns`` (the default): where
#: each good row came from, with their types.
TARGET_SOURCE_COLUMNS: StructType
#: The type of the Kafka source's ``headers`` column.
HEADERS_TYPE: ArrayType
#: The columns exactly as ``spark.readStream.format("kafka")`` gives them
#: (with ``includeHeaders=true``), in :data:`quarantine.columns.KAFKA_SOURCE_COLUMNS`' order.
#: Batch sources must have these columns.
KAFKA_SOURCE_SCHEMA: StructType
#: The error half of every stage's result column. ``stacktrace`` is null unless
#: ``errors.deadletterqueue.context.stacktrace.enable`` is true.
ERROR_STRUCT: StructType
#: One entry of the quarantine table's ``error_history``.
ERROR_HISTORY_ENTRY: StructType
#: One row per source record per pipeline; key :data:`QUARANTINE_KEY`.
#: ``error_history`` is bounded (see :mod:`quarantine.sinks.quarantine`);
#: ``error_count`` counts every failure of the record.
#: ``first_seen_date`` is derived from ``first_seen_at`` and exists so the table
#: can be clustered by (pipeline, topic, date).
QUARANTINE_SCHEMA: StructType
#: One row per batch per metric (per stage / topic where the metric has one). ``run_kind``
#: (:class:`~quarantine.columns.RunKind`: run, replay, discard) came later: NULL in older rows is ``run``.
METRICS_SCHEMA: StructType


#: The names :func:`__getattr__` answers (any other, ``__path__`` included, is not built).
_SPARK_TYPE_NAMES = frozenset({
    "TARGET_SOURCE_COLUMNS", "HEADERS_TYPE", "KAFKA_SOURCE_SCHEMA", "ERROR_STRUCT", "ERROR_HISTORY_ENTRY",
    "QUARANTINE_SCHEMA", "METRICS_SCHEMA",
})


def __getattr__(name: str) -> DataType:
    """A Spark type of this module (:func:`_spark_types`), built with the others on first use."""
    if name in _SPARK_TYPE_NAMES:
        return _spark_types()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _spark_types() -> dict[str, DataType]:
    """The module's Spark types by name, built once (the one place this module imports pyspark)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        DateType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    target_source = StructType([
        StructField(TARGET_TOPIC, StringType()),
        StructField(TARGET_PARTITION, IntegerType()),
        StructField(TARGET_OFFSET, LongType()),
        StructField(TARGET_TIMESTAMP, TimestampType()),
        StructField(TARGET_FINGERPRINT, LongType()),
    ])
    headers = ArrayType(StructType([StructField(HEADER_KEY, StringType()), StructField(HEADER_VALUE, BinaryType())]))
    kafka_types: dict[str, DataType] = {
        KEY: BinaryType(), VALUE: BinaryType(), TOPIC: StringType(), PARTITION: IntegerType(), OFFSET: LongType(),
        TIMESTAMP: TimestampType(), TIMESTAMP_TYPE: IntegerType(), HEADERS: headers,
    }
    kafka = StructType([StructField(name, kafka_types[name]) for name in KAFKA_SOURCE_COLUMNS])
    error = StructType([
        StructField(STAGE, StringType()),
        StructField(KIND, StringType()),
        StructField(ERROR_CLASS, StringType()),
        StructField(MESSAGE, StringType()),
        StructField(STACKTRACE, StringType()),
        StructField(RETRIABLE, BooleanType()),
        StructField(ATTEMPTS, IntegerType()),
    ])
    history_entry = StructType([
        StructField(HISTORY_AT, TimestampType()),
        StructField(RUN_ID, StringType()),
        StructField(STAGE, StringType()),
        StructField(ERROR_CLASS, StringType()),
        StructField(MESSAGE, StringType()),
    ])
    quarantine = StructType([
        StructField(PIPELINE, StringType(), False),
        # where the record came from, and its raw bytes: the Kafka source's own fields
        *[kafka[name] for name in (*SOURCE_KEY, TIMESTAMP, TIMESTAMP_TYPE, *SOURCE_PAYLOAD)],
        # the latest failure: the error struct's fields
        *error.fields,
        StructField(ERROR_HISTORY, ArrayType(history_entry)),
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
        # the id of the key key, value and the header values are encrypted under (quarantine.encryption);
        # NULL: stored as read
        StructField(ENCRYPTION_KEY_ID, StringType()),
    ])
    metrics = StructType([
        StructField(PIPELINE, StringType(), False),
        StructField(RUN_ID, StringType()),
        StructField(BATCH_ID, LongType()),
        StructField(RECORDED_AT, TimestampType()),
        StructField(METRIC, StringType(), False),
        StructField(STAGE, StringType()),
        StructField(TOPIC, StringType()),
        StructField(METRIC_VALUE, DoubleType()),
        StructField(RUN_KIND, StringType()),
    ])
    return {
        "TARGET_SOURCE_COLUMNS": target_source,
        "HEADERS_TYPE": headers,
        "KAFKA_SOURCE_SCHEMA": kafka,
        "ERROR_STRUCT": error,
        "ERROR_HISTORY_ENTRY": history_entry,
        "QUARANTINE_SCHEMA": quarantine,
        "METRICS_SCHEMA": metrics,
    }


def _struct(name: str) -> StructType:
    """The struct type ``name`` of :func:`_spark_types`."""
    return cast("StructType", _spark_types()[name])


def target_columns(result_type: DataType, last_stage: str) -> StructType:
    """The target's columns that hold a good row: the **last** stage's result, nothing earlier.

    A struct result's fields are the target's columns, by their names; any other result
    is one column named after the last stage (a ``python`` stage returning ``DOUBLE``
    gives a target of one ``DOUBLE`` column). :data:`TARGET_SOURCE_COLUMNS` follow them
    when ``target.source_columns``.
    """
    from pyspark.sql.types import StructField, StructType

    if isinstance(result_type, StructType):
        return result_type
    return StructType([StructField(last_stage, result_type)])


def result_struct(result_type: DataType) -> StructType:
    """The type of a stage's column: ``STRUCT<result: T, error: ERROR_STRUCT>``.

    Exactly one of ``result`` and ``error`` is non-null in every row.
    """
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField("result", result_type), StructField("error", _struct("ERROR_STRUCT"))])


def source_column_type(name: str) -> DataType:
    """The type of the Kafka source's column ``name`` (one of :data:`KAFKA_SOURCE_COLUMNS`).

    Raises:
        KeyError: not a column of the Kafka source.
    """
    return _struct("KAFKA_SOURCE_SCHEMA")[name].dataType


def kafka_shape_problems(schema: StructType) -> list[str]:
    """What keeps ``schema`` from being Kafka-shaped: each missing column and each column of
    another type (``column value: expected binary, found string``); empty when it is one.
    Columns beyond :data:`KAFKA_SOURCE_SCHEMA`'s are allowed."""
    have = {f.name: f.dataType for f in schema.fields}
    problems = []
    for f in _struct("KAFKA_SOURCE_SCHEMA").fields:
        if f.name not in have:
            problems.append(f"missing column {f.name} {f.dataType.simpleString()}")
        elif have[f.name] != f.dataType:
            problems.append(
                f"column {f.name}: expected {f.dataType.simpleString()}, found {have[f.name].simpleString()}"
            )
    return problems


#: The columns a table needs to be read as a quarantine table: its key and status.
QUARANTINE_REQUIRED: tuple[str, ...] = (*QUARANTINE_KEY, STATUS)


def check_quarantine_columns(name: str, columns: Sequence[str]) -> None:
    """Check that the table ``name``, with ``columns``, can be read as a quarantine table.

    Raises:
        ConfigError: ``errors.deadletterqueue.table.name`` names a table without
            :data:`QUARANTINE_REQUIRED` (before anything is read from it or written to it).
    """
    missing = [c for c in QUARANTINE_REQUIRED if c not in columns]
    if missing:
        raise ConfigError(
            "errors.deadletterqueue.table.name", name,
            "a quarantine table (with the columns " + ", ".join(QUARANTINE_REQUIRED) + ", …) or a table that does "
            f"not exist yet; found a table without {', '.join(missing)} (its columns: {', '.join(columns)})",
        )
