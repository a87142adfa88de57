"""The quarantine table and its one writer: one row per source record per pipeline, by MERGE.

Key: ``(pipeline, topic, partition, offset)``, compared NULL-safe. An open
record seen again (a re-run of the same input, a replay that failed again)
updates the latest-error columns, adds to the bounded ``error_history``,
counts in ``error_count`` and bumps ``last_seen_at``; a closed one
(``replayed``, ``discarded``) stays closed. A MERGE of the same
``(run_id, batch_id)`` twice — a streaming micro-batch replayed after a
crash — changes nothing, so restarts never grow the history.

The raw ``key``, ``value`` and ``headers`` are the source bytes, unchanged.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.columns import (
    BATCH_ID,
    ENCRYPTION_KEY_ID,
    ERROR,
    ERROR_CLASS,
    ERROR_COUNT,
    ERROR_HISTORY,
    FINGERPRINT,
    FIRST_SEEN_AT,
    FIRST_SEEN_DATE,
    HEADERS,
    HISTORY_AT,
    KEY,
    KIND,
    LAST_SEEN_AT,
    MESSAGE,
    OFFSET,
    PARTITION,
    PIPELINE,
    QUARANTINE_FINGERPRINT,
    RESOLUTION,
    RESOLVED_AT,
    RUN_ID,
    SOURCE_KEY,
    STACKTRACE,
    STAGE,
    STATUS,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
    ErrorKind,
    QuarantineStatus,
)
from quarantine.encryption import seal_rows
from quarantine.errorhandling.retry import RetryWithToleranceOperator, retried_write
from quarantine.errors import QuarantineWriteError
from quarantine.identity import Floors, fingerprint, null_safe_key_match
from quarantine.keyring import KeyRing
from quarantine.schema import ERROR_STRUCT, QUARANTINE_SCHEMA, check_quarantine_columns
from quarantine.sinks.redacted_error import redact_error
from quarantine.tables import (
    add_missing_columns,
    create_table,
    read_table,
    save,
    table_column,
    table_exists,
    table_ref,
)

__all__ = [
    "HISTORY_FIRST",
    "HISTORY_LATEST",
    "ROWS_PER_FILE",
    "STATS_PROPERTY",
    "STRIPPED",
    "QuarantineWrite",
    "QuarantineWriter",
    "close_records",
    "ensure_quarantine_table",
    "merge_quarantine",
    "quarantine_rows",
    "read_quarantine",
    "record_match",
    "row_fingerprint",
    "settled_records",
    "stats_columns",
    "stored_fingerprint",
    "strip_settled",
    "stripped",
]

#: ``error_history`` keeps the first entries of a record's failures ...
HISTORY_FIRST = 1
#: ... and the latest ones; ``error_count`` counts them all.
HISTORY_LATEST = 9

#: Failed records per file a write makes at most, when their count is known (see
#: :meth:`QuarantineWriter.write`): a few MB of raw bytes and errors for small events; fewer,
#: larger files put the write's work on fewer cores (measured: benchmarks/README.md).
ROWS_PER_FILE = 10_000

#: Columns the MERGE refreshes when a record fails again.
_LATEST = tuple(ERROR_STRUCT.fieldNames())


def ensure_quarantine_table(spark: SparkSession, name: str) -> bool:
    """Create the quarantine table if it does not exist; return whether this call created it.

    Schema :data:`~quarantine.schema.QUARANTINE_SCHEMA`, Change Data Feed on,
    liquid-clustered by ``(pipeline, topic, first_seen_date)``, Delta's statistics taken of
    :func:`stats_columns` only. Safe to call concurrently (see
    :func:`quarantine.tables.create_table`): True only when this call committed the table's
    first version, so the table is known to be empty.
    """
    return create_table(
        spark, name, QUARANTINE_SCHEMA,
        comment="quarantine: failed records with their raw bytes and the reason",
        cluster_by=(PIPELINE, TOPIC, FIRST_SEEN_DATE),
        properties={"delta.enableChangeDataFeed": "true", STATS_PROPERTY: ",".join(stats_columns())},
    )


#: The table property naming the columns whose statistics (each file's min and max) Delta keeps in the log.
STATS_PROPERTY = "delta.dataSkippingStatsColumns"


def stats_columns() -> tuple[str, ...]:
    """The columns Delta keeps statistics of in the table's log: the ones it can skip files by (strings,
    numbers, dates, times), but what a record carried or a person wrote (message, stacktrace, resolution).

    Delta keeps each file's smallest and largest value of a string column (its first 32
    characters) in the commit that adds the file, in checkpoints and in checksums; a message
    quotes the record it failed, so the log would keep a copy of it that no UPDATE reaches.
    """
    content = {*STRIPPED, ERROR_HISTORY, RESOLUTION}
    skippable = ("string", "int", "bigint", "timestamp", "date")
    return tuple(f.name for f in QUARANTINE_SCHEMA.fields
                 if f.name not in content and f.dataType.simpleString() in skippable)


def quarantine_rows(
    failed: DataFrame,
    *,
    pipeline: str,
    run_id: str,
    batch_id: int,
    now: dt.datetime,
    error: Column | str = ERROR,
    fingerprint: bool | None = None,
) -> DataFrame:
    """Shape failed records into quarantine-table rows (pure; no I/O).

    Args:
        failed: rows with the Kafka source columns and an error struct column.
        pipeline: the pipeline's name.
        run_id: the run writing these rows.
        batch_id: the micro-batch writing these rows.
        now: the write time (``first_seen_at``/``last_seen_at``, history ``at``).
        error: the error struct column.
        fingerprint: whether ``failed`` has the fingerprint column (None: look at its
            columns, which analyses ``failed``).

    ``fingerprint`` is ``failed``'s :data:`~quarantine.columns.FINGERPRINT` column, or NULL
    without one (rows a custom sink reports from target rows, whose bytes are not the source's).
    """
    err = F.col(error) if isinstance(error, str) else error
    at = F.lit(now).cast("timestamp")
    cols: list[Column] = [
        F.lit(pipeline).alias(PIPELINE),
        F.col(TOPIC), F.col(PARTITION), F.col(OFFSET),
        F.col(TIMESTAMP), F.col(TIMESTAMP_TYPE),
        F.col(KEY), F.col(VALUE), F.col(HEADERS),
        *[err.getField(c).alias(c) for c in _LATEST],
        F.array(
            F.struct(
                at.alias(HISTORY_AT), F.lit(run_id).alias(RUN_ID), err.getField(STAGE).alias(STAGE),
                err.getField(ERROR_CLASS).alias(ERROR_CLASS), err.getField(MESSAGE).alias(MESSAGE),
            )
        ).alias(ERROR_HISTORY),
        F.lit(1).alias(ERROR_COUNT),
        F.lit(QuarantineStatus.OPEN.value).alias(STATUS),
        at.alias(FIRST_SEEN_AT),
        at.alias(LAST_SEEN_AT),
        F.lit(run_id).alias(RUN_ID),
        F.lit(batch_id).cast("bigint").alias(BATCH_ID),
        F.lit(None).cast("timestamp").alias(RESOLVED_AT),
        F.lit(None).cast("string").alias(RESOLUTION),
        # the UTC date of the UTC instant (to_date would take the session time zone's date)
        F.lit(now.astimezone(dt.UTC).date()).alias(FIRST_SEEN_DATE),
        (F.col(FINGERPRINT) if (FINGERPRINT in failed.columns if fingerprint is None else fingerprint)
         else F.lit(None)).alias(QUARANTINE_FINGERPRINT),
        F.lit(None).cast("string").alias(ENCRYPTION_KEY_ID),
    ]
    rows = failed.select(*cols)
    # Cast each column to the contract's type (nullability aside) so MERGE sees one schema.
    return rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in QUARANTINE_SCHEMA.fields])


def _history(existing: Column, new: Column) -> Column:
    """``existing ++ new``, cut to the first :data:`HISTORY_FIRST` and latest :data:`HISTORY_LATEST`;
    ``existing`` alone when ``new``'s one entry repeats the latest (the same stage, class and
    message): the history records each change of error, ``error_count`` every failure."""
    prior = F.coalesce(existing, F.array())
    latest, entry = F.get(prior, F.size(prior) - 1), F.get(new, 0)
    repeats = F.size(prior) > 0
    for c in (STAGE, ERROR_CLASS, MESSAGE):
        repeats = repeats & latest[c].eqNullSafe(entry[c])
    both = F.when(repeats, prior).otherwise(F.concat(prior, new))
    keep = HISTORY_FIRST + HISTORY_LATEST
    return F.when(F.size(both) <= keep, both).otherwise(
        F.concat(F.slice(both, 1, HISTORY_FIRST), F.slice(both, -HISTORY_LATEST, HISTORY_LATEST))
    )


def stored_fingerprint(col: Any = F.col) -> Column:
    """A quarantine row's fingerprint: its ``fingerprint``, or for a row written before that
    column existed, the :func:`~quarantine.identity.fingerprint` of its raw bytes (kept byte
    for byte); NULL for a row a custom sink reported (kind ``sink``: its bytes are not the source's).

    Args:
        col: how to reach the row's columns by name (``F.col``, or a table's in a MERGE).
    """
    return F.coalesce(
        col(QUARANTINE_FINGERPRINT),
        F.when(~col(KIND).eqNullSafe(F.lit(ErrorKind.SINK.value)), fingerprint(col)),
    )


def row_fingerprint(rows: DataFrame) -> Column:
    """:func:`stored_fingerprint` of quarantine rows read from the table, whatever columns the
    table has yet (one written before ``fingerprint`` existed; a column it lacks reads as NULL)."""
    return stored_fingerprint(_column_of(rows))


def _column_of(rows: DataFrame) -> Any:
    """A column getter over ``rows``: a column ``rows`` lacks is a NULL of the quarantine schema's type."""
    types = {f.name: f.dataType for f in QUARANTINE_SCHEMA.fields}
    return lambda c: F.col(c) if c in rows.columns else F.lit(None).cast(types[c])


def record_match(name: str, pipeline: str) -> Column:
    """The MERGE condition: this pipeline's row of the same record as source ``s`` (NULL-safe, no SQL text).

    The same record: the same coordinates and the same fingerprint; a row or a source
    without one (a custom sink's report) is the same record by its coordinates.
    """
    t_fp = stored_fingerprint(lambda c: table_column(name, c))
    s_fp = F.col(f"s.{QUARANTINE_FINGERPRINT}")
    same = t_fp.isNull() | s_fp.isNull() | (t_fp == s_fp)
    return (
        (table_column(name, "pipeline") == F.lit(pipeline))
        & null_safe_key_match(table_ref(name), "s", ("pipeline", *SOURCE_KEY))
        & same
    )


def merge_quarantine(
    spark: SparkSession, name: str, rows: DataFrame, *, pipeline: str, floors: Floors | None = None
) -> None:
    """MERGE quarantine rows into the table on ``(pipeline, topic, partition, offset)``.

    ``rows`` must hold each key at most once (:func:`quarantine.identity.identify`
    guarantees it for a batch). For a key already in the table:

    * an ``open`` row last written by this same ``(run_id, batch_id)`` with the same
      error is left as it is (a replayed micro-batch is a no-op);
    * another ``open`` row gets the latest error, one more ``error_history`` entry when the
      error is not the latest entry's again (the same stage, class and message: a record
      failing the same way keeps one entry), bounded (the first :data:`HISTORY_FIRST` and the
      latest :data:`HISTORY_LATEST`), and ``error_count + 1``;
    * a ``replayed`` or ``discarded`` row stays closed and unchanged: only replay
      re-runs closed records' outcomes, and a discard is an operator's decision.

    The pipeline name is a literal value in the condition, never SQL text. With ``floors``
    (every row at or above them), the condition reads only the table's rows at or above them.
    """
    if ensure_quarantine_table(spark, name):
        # Created empty just now: nothing can match, and a plain append is the same
        # commit as the MERGE without its join (the largest phase of a first batch).
        save(rows.write.format("delta").mode("append"), name)
        return
    _add_missing_columns(spark, name)
    # The same write again: a replayed micro-batch (same run, batch and error) changes nothing.
    # A different error in the same batch (a sink reporting a record twice) is a new failure.
    def t(c: str) -> Column:
        return table_column(name, c)

    same_write = null_safe_key_match(table_ref(name), "s", ("run_id", "batch_id", "stage", "error_class", "message"))
    update: dict[str, Column] = {c: F.col(f"s.{c}") for c in _LATEST}
    update.update(
        {
            "error_history": _history(t("error_history"), F.col("s.error_history")),
            "error_count": F.coalesce(t("error_count"), F.size(t("error_history"))) + F.lit(1),
            "last_seen_at": F.col("s.last_seen_at"),
            "run_id": F.col("s.run_id"),
            "batch_id": F.col("s.batch_id"),
            QUARANTINE_FINGERPRINT: F.coalesce(t(QUARANTINE_FINGERPRINT), F.col(f"s.{QUARANTINE_FINGERPRINT}")),
        }
    )
    open_row = t("status") == F.lit(QuarantineStatus.OPEN.value)
    (
        rows.alias("s").mergeInto(table_ref(name), record_match(name, pipeline) & (
            F.lit(True) if floors is None else floors.above(*(table_column(name, c) for c in SOURCE_KEY))
        ))
        .whenMatched(open_row & ~same_write).update(update)
        .whenNotMatched().insertAll()
        .merge()
    )


@dataclass(frozen=True)
class QuarantineWriter:
    """The one writer of failed records into the quarantine table.

    The pipeline's batches and the errant record reporter both write through it,
    so both get the same rows (:func:`quarantine_rows`), the same masking of
    configured secrets in ``message``/``stacktrace``, the same MERGE
    (:func:`merge_quarantine`: idempotent per ``(run_id, batch_id)``) and the same
    retries and failure message. What else learns of the records (the DLQ topic, the
    error-context log) is told by the caller after the write
    (:func:`~quarantine.errorhandling.reporter.report_errors`).

    Attributes:
        spark: the session.
        table: the quarantine table (path or catalog name).
        pipeline: the pipeline name (the first part of the key).
        retry: the write retry operator (:meth:`RetryWithToleranceOperator.for_writes`).
        secrets: configured secret values, masked in the error text.
        stacktrace: whether stack traces can be non-null (else their redaction is skipped).
        keys: the encryption keys (``errors.deadletterqueue.encryption.*``): rows are written
            encrypted under the writing key, if one is configured (:func:`quarantine.encryption.seal_rows`).
    """

    spark: SparkSession
    table: str
    pipeline: str
    retry: RetryWithToleranceOperator
    secrets: tuple[str, ...] = ()
    stacktrace: bool = False
    keys: KeyRing = field(default_factory=KeyRing.none)

    def rows(
        self, failed: DataFrame, *, run_id: str, batch_id: int, now: dt.datetime, error: str = ERROR,
        fingerprint: bool | None = None,
    ) -> DataFrame:
        """The quarantine table's rows of ``failed``, its error redacted, encrypted under the writing key
        if one is configured (no job runs).

        Args:
            failed: rows with the Kafka source columns and the error struct ``error``.
            run_id: the run writing them.
            batch_id: the micro-batch writing them.
            now: the write time.
            error: the error struct column of ``failed``.
            fingerprint: whether ``failed`` has the fingerprint column (None: look at its
                columns, which analyses it; a declarative pipeline's query function may not).
        """
        if fingerprint is None:
            fingerprint = FINGERPRINT in failed.columns
        masked = failed.withColumn(error, redact_error(F.col(error), self.masked(), stacktrace=self.stacktrace))
        rows = quarantine_rows(masked, pipeline=self.pipeline, run_id=run_id, batch_id=batch_id, now=now, error=error,
                               fingerprint=fingerprint)
        return seal_rows(rows, self.keys, fingerprint=stored_fingerprint())

    def masked(self) -> tuple[str, ...]:
        """The secrets masked in a row's message and stack trace: every configured one, except the writing
        key's own spellings when the rows are encrypted under it (:meth:`KeyRing.secret_spellings`).

        A text sealed under a key opens only for whoever holds that key, so masking the key in it hides
        nothing, and any secret at all moves the redaction from Spark's expressions into a Python pass
        over every failed row (:func:`~quarantine.sinks.redacted_error.redact_column`): about twice
        the write's time (benchmarks/README.md, issue 63). Other secrets, old keys among them, stay masked.
        """
        sealing = self.keys.sealing()
        if sealing is None:
            return self.secrets
        own = set(self.keys.secret_spellings(sealing[0]))
        return tuple(s for s in self.secrets if s not in own)

    def write(
        self,
        failed: DataFrame,
        *,
        run_id: str,
        batch_id: int,
        now: dt.datetime,
        error: str = ERROR,
        action: str = "quarantine MERGE",
        append: bool = False,
        records: int | None = None,
        floors: Floors | None = None,
    ) -> QuarantineWrite:
        """Write failed records; durable on return.

        Args:
            failed: rows with the Kafka source columns and the error struct ``error``;
                each ``(topic, partition, offset)`` at most once.
            run_id: the run writing them.
            batch_id: the micro-batch writing them.
            now: the write time.
            error: the error struct column of ``failed``.
            action: what the write is called in its failure message.
            append: the caller knows no key of ``failed`` can be in the table yet (see
                :class:`~quarantine.sinks.offset_watermark.OffsetWatermark`): a plain append instead
                of a MERGE, no join against the table.
            records: how many rows ``failed`` holds, when the caller knows: they are
                written from at most ``ceil(records / ROWS_PER_FILE)`` partitions, not
                from every partition of the batch they came from: an append makes that many
                files at most (a micro-batch's few failed records make one). A MERGE writes
                what its own join gives (``tests/integration/test_quarantine_files.py``).
            floors: every row of ``failed`` is at or above them
                (:class:`~quarantine.identity.Floors`): the MERGE reads only the table's rows at
                or above them too (Delta skips the files below by their statistics).

        Returns:
            The attempts the table's write took, and the rows it wrote.

        Raises:
            QuarantineWriteError: the write still failed after its retries; its
                ``attempts`` says how many were made and the message names the
                table, the batch and what to do.
        """
        if records is not None:
            failed = failed.coalesce(max(1, math.ceil(records / ROWS_PER_FILE)))
        rows = self.rows(failed, run_id=run_id, batch_id=batch_id, now=now, error=error)
        action = action.replace("MERGE", "append") if append else action
        write = (lambda: append_quarantine(self.spark, self.table, rows)) if append else (
            lambda: merge_quarantine(self.spark, self.table, rows, pipeline=self.pipeline, floors=floors))
        attempts = retried_write(self.retry, action, self.table, batch_id, write, failure=QuarantineWriteError)
        return QuarantineWrite(attempts, rows)


@dataclass(frozen=True)
class QuarantineWrite:
    """What :meth:`QuarantineWriter.write` did.

    Attributes:
        attempts: attempts the table's write took (1: the first succeeded).
        rows: the quarantine rows written (:meth:`QuarantineWriter.rows`), for the error reporters.
    """

    attempts: int
    rows: DataFrame


def append_quarantine(spark: SparkSession, name: str, rows: DataFrame) -> None:
    """Append quarantine rows whose keys are new to the table.

    Only for rows no key of which can be in the table
    (:class:`~quarantine.sinks.offset_watermark.OffsetWatermark` says when): the append does not
    look. Once-only needs no Delta transaction id here (checking one reconstructs the
    table's transactions on every write): a micro-batch is only run again after its query
    restarted, and a restarted query MERGEs until it is past every offset the table holds,
    those of a batch appended before the crash included.
    """
    ensure_quarantine_table(spark, name)
    save(rows.write.format("delta").mode("append"), name)


def close_records(
    spark: SparkSession,
    name: str,
    keys: DataFrame,
    *,
    pipeline: str,
    status: QuarantineStatus,
    resolution: str,
    now: dt.datetime,
) -> None:
    """Close this pipeline's ``open`` rows whose coordinates are in ``keys``.

    Args:
        keys: distinct ``topic``, ``partition``, ``offset``, and the records' fingerprints
            in :data:`~quarantine.columns.FINGERPRINT` when known (other columns ignored).
        status: ``replayed`` (the record is in the target now) or ``discarded``.
        resolution: the text kept in ``resolution``.
        now: ``resolved_at``.

    Rows that are not ``open`` any more (closed by a concurrent writer) are left as
    they are, so a record is closed exactly once.
    """
    _add_missing_columns(spark, name)
    fp = F.col(FINGERPRINT) if FINGERPRINT in keys.columns else F.lit(None).cast("bigint")
    source = keys.select(F.lit(pipeline).alias(PIPELINE), *SOURCE_KEY, fp.alias(QUARANTINE_FINGERPRINT))
    (
        source.alias("s").mergeInto(table_ref(name), record_match(name, pipeline))
        .whenMatched(table_column(name, "status") == F.lit(QuarantineStatus.OPEN.value))
        .update({
            "status": F.lit(status.value),
            "resolved_at": F.lit(now).cast("timestamp"),
            "resolution": F.lit(resolution),
        })
        .merge()
    )


#: What retention strips from a closed row (``quarantine maintain``): the record's bytes and the
#: failure's words. The row's identity stays: pipeline, coordinates, timestamp, fingerprint, and
#: its status, stage, kind, error class, counts and times, so a re-run still leaves the record out.
#: ``error_history`` stays too, its entries' ``message`` stripped (their times and classes feed the
#: SQL library's ``error_rate``).
STRIPPED: tuple[str, ...] = (KEY, VALUE, HEADERS, MESSAGE, STACKTRACE)


def _stripped(col: Any) -> Column:
    cond = F.forall(F.coalesce(col(ERROR_HISTORY), F.array()), lambda h: h[MESSAGE].isNull())
    for c in STRIPPED:
        cond = cond & col(c).isNull()
    return cond


def stripped(col: Any = F.col) -> Column:
    """True for a row whose :data:`STRIPPED` columns and history messages are all NULL (retention kept it).

    Args:
        col: how to reach the row's columns by name (``F.col``, or a table's in a MERGE).
    """
    return _stripped(col)


def strip_settled(spark: SparkSession, name: str, keys: DataFrame, *, pipeline: str, before: dt.datetime) -> None:
    """Strip the :data:`STRIPPED` columns (and the history's messages) of this pipeline's closed rows
    in ``keys`` resolved before ``before``.

    Each row keeps its fingerprint: one a row lacks (written before the column existed) is
    computed from its bytes first (:func:`stored_fingerprint`), so the record is still known
    by its content once its bytes are gone, and :func:`settled_records` leaves it out of every
    later batch. ``open`` rows, rows closed at or after ``before`` (a concurrent writer's) and
    rows stripped already are left as they are.

    Args:
        keys: ``topic``, ``partition``, ``offset`` (other columns ignored), each key once.
        before: the cutoff, as maintain computed it.
    """
    source = keys.select(F.lit(pipeline).alias(PIPELINE), *SOURCE_KEY,
                         F.lit(None).cast("bigint").alias(QUARANTINE_FINGERPRINT))

    def t(c: str) -> Column:
        return table_column(name, c)

    closed = t(STATUS).isin(QuarantineStatus.REPLAYED.value, QuarantineStatus.DISCARDED.value)
    old = t(RESOLVED_AT) < F.lit(before).cast("timestamp")
    update: dict[str, Column] = {c: F.lit(None) for c in STRIPPED}
    update[ERROR_HISTORY] = F.transform(t(ERROR_HISTORY), lambda h: h.withField(MESSAGE, F.lit(None).cast("string")))
    update[QUARANTINE_FINGERPRINT] = stored_fingerprint(t)
    (
        source.alias("s").mergeInto(table_ref(name), record_match(name, pipeline))
        .whenMatched(closed & old & ~_stripped(t)).update(update)
        .merge()
    )


def read_quarantine(spark: SparkSession, name: str) -> DataFrame:
    """The quarantine table, checked to be one (it has the key and ``status`` columns).

    Raises:
        ConfigError: ``errors.deadletterqueue.table.name`` names a table that is
            not a quarantine table (before anything is written to it).
    """
    df = read_table(spark, name)
    check_quarantine_columns(name, df.columns)
    return df


def settled_records(spark: SparkSession, name: str, pipeline: str) -> DataFrame | None:
    """This pipeline's quarantined records in the shape of
    :func:`quarantine.identity.against_settled`'s ``settled`` (None: no table yet).

    ``_s_fp`` is :func:`stored_fingerprint`, ``_s_where`` names the table, the row's
    status and when it was first seen.
    """
    if not table_exists(spark, name):
        return None
    df = read_quarantine(spark, name).where(F.col(PIPELINE) == F.lit(pipeline))
    col = _column_of(df)
    first_seen = F.to_utc_timestamp(col(FIRST_SEEN_AT), spark.conf.get("spark.sql.session.timeZone") or "UTC")
    where = F.format_string(
        "in the quarantine table %s (status %s, first seen %s UTC)",
        F.lit(name), F.col(STATUS), F.date_format(first_seen, "yyyy-MM-dd HH:mm:ss"),
    )
    return df.select(
        *SOURCE_KEY, row_fingerprint(df).alias("_s_fp"), col(TIMESTAMP).alias("_s_ts"),
        F.col(STATUS).alias("_s_status"), col(FIRST_SEEN_AT).alias("_s_first"), where.alias("_s_where"),
    )


_checked: set[str] = set()


def _add_missing_columns(spark: SparkSession, name: str) -> None:
    """Bring a table created by an older version up to :data:`QUARANTINE_SCHEMA` (once per process)."""
    if name in _checked:
        return
    read_quarantine(spark, name)  # a quarantine table, or a ConfigError naming the key
    add_missing_columns(spark, name, QUARANTINE_SCHEMA)
    _checked.add(name)
