"""The errant record reporter (Kafka KIP-610) for custom sinks inside ``foreachBatch``.

A pipeline's own stages quarantine what they cannot process; a *sink* written
by the user — rows pushed to a JDBC database, an HTTP API — fails after that,
one record at a time. Kafka Connect gives sink tasks an ``ErrantRecordReporter``
whose ``report(record, error)`` sends the record to the dead letter queue; this
is the same for Spark::

    def write_batch(df, batch_id):
        with ErrantRecordReporter(run, batch_id) as report:
            for row in df.toLocalIterator():
                try:
                    send(row)
                except Exception as e:
                    report(row, e)

    query = stream.writeStream.foreachBatch(write_batch).start()

and, for sinks that work on a whole DataFrame (``mapInPandas`` calling an API,
a JDBC write that returns the rejected rows)::

    with ErrantRecordReporter(run, batch_id) as report:
        report.report_failed(rejected)          # a column ``error_message``

Contract:

* **What a record is.** A Spark ``Row`` or a mapping with either the Kafka
  source columns (``topic``, ``partition``, ``offset``, ``timestamp``,
  ``timestampType``, ``key``, ``value``, ``headers``) — then the raw bytes are
  quarantined as they are — or the target table's source coordinates
  (``_source_topic``, ``_source_partition``, ``_source_offset``,
  ``_source_timestamp``) — then ``value`` holds the record's other fields as
  UTF-8 JSON (the raw bytes are not in the target), which the pipeline's own
  ``json`` stage reads back on replay.
* **Where it goes.** The quarantine table (MERGE on
  ``(pipeline, topic, partition, offset)`` via :mod:`quarantine.sinks.quarantine`),
  with ``kind = sink``, ``stage`` = the reporter's stage name (default ``sink``),
  ``error_class`` = the exception's class name, ``message`` = its text with
  every configured secret and ``password=…`` pair redacted; the stack trace only
  with ``errors.deadletterqueue.context.stacktrace.enable``.
* **Durability.** Reported records are buffered and MERGEd when the buffer
  fills, on :meth:`ErrantRecordReporter.flush`, and when the ``with`` block
  ends — also when it ends with an exception. Leaving the block therefore means
  every reported record is durable; ``foreachBatch`` returns (and the batch's
  offsets commit) only after that. A MERGE that still fails after the write
  retries raises :class:`~quarantine.errors.QuarantineWriteError`, so the batch
  fails and is replayed. Re-running a batch (same run id and batch id) changes
  nothing already written.
* **Tolerance.** With ``errors.tolerance=none`` (and no explicit
  ``errors.handler.sink: continue``), ``report`` first makes the record durable,
  then raises :class:`~quarantine.errors.ToleranceExceededError` (chained from
  the sink's exception). ``errors.handler.sink: fail`` does the same under any
  tolerance. With ``all``, reporting returns and the sink goes on. The run's
  count and rate limits (``errors.tolerance.limit``/``rate.limit``) are not
  applied to reported records.
* **Metrics.** As in KIP-610, the dead letter queue metrics count reported
  records: :meth:`ErrantRecordReporter.metrics` gives ``total-record-errors``,
  ``records-quarantined`` (per the reporter's stage),
  ``deadletterqueue-produce-requests`` / ``-failures``; they are added to the
  run's :attr:`~quarantine.batch.run.Run.metrics` on close.

Not thread safe: use one reporter per batch, from the driver.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StructField, StructType

from quarantine.columns import (
    ERROR,
    HEADERS,
    KEY,
    OFFSET,
    PARTITION,
    SOURCE_KEY,
    TARGET_OFFSET,
    TARGET_PARTITION,
    TARGET_SOURCE_PREFIX,
    TARGET_TIMESTAMP,
    TARGET_TOPIC,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
    ErrorKind,
)
from quarantine.errorhandling.policy import Scope
from quarantine.errorhandling.reporter import FailedRecords, report_errors
from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import (
    QuarantineWriteError,
    SourceError,
    ToleranceExceededError,
    message_of,
)
from quarantine.metrics.cells import BatchMetrics, MetricNames, MetricPoint
from quarantine.redaction import redact_text
from quarantine.schema import ERROR_STRUCT, KAFKA_SOURCE_SCHEMA
from quarantine.stage import error_column

if TYPE_CHECKING:
    from quarantine.batch.run import Run

__all__ = ["DEFAULT_STAGE", "ErrantRecordReporter", "Record"]

#: The ``stage`` of reported records unless the reporter is given another name.
DEFAULT_STAGE = "sink"

#: What :meth:`ErrantRecordReporter.report` accepts: a Spark ``Row`` or a mapping.
Record = Any

_ERR = ERROR
_KAFKA = SOURCE_KEY
_TARGET = (TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET)
_ROW_SCHEMA = StructType([*KAFKA_SOURCE_SCHEMA.fields, StructField(_ERR, ERROR_STRUCT)])


def _as_dict(record: Record) -> dict[str, Any]:
    if isinstance(record, Mapping):
        return dict(record)
    as_dict = getattr(record, "asDict", None)
    if callable(as_dict):
        out: dict[str, Any] = as_dict(recursive=False)
        return out
    raise SourceError(f"reported record: expected a pyspark Row or a mapping, found {type(record).__name__}")


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, default=str, ensure_ascii=False).encode("utf-8")


def _source_fields(rec: Mapping[str, Any]) -> tuple[Any, ...]:
    """The Kafka source columns of a reported record (see the module doc)."""
    if all(c in rec for c in _KAFKA):
        headers = rec.get(HEADERS)
        return (
            _bytes(rec.get(KEY)),
            _bytes(rec.get(VALUE)),
            rec[TOPIC],
            rec[PARTITION],
            rec[OFFSET],
            rec.get(TIMESTAMP),
            rec.get(TIMESTAMP_TYPE),
            [(h[0], _bytes(h[1])) for h in headers] if headers is not None else None,
        )
    if all(c in rec for c in _TARGET):
        payload = {k: v for k, v in rec.items() if not k.startswith(TARGET_SOURCE_PREFIX)}
        value = json.dumps(payload, default=str, ensure_ascii=False).encode("utf-8")
        return (
            None,
            value,
            rec[TARGET_TOPIC],
            rec[TARGET_PARTITION],
            rec[TARGET_OFFSET],
            rec.get(TARGET_TIMESTAMP),
            None,
            None,
        )
    raise SourceError(
        "reported record: expected the Kafka source columns (topic, partition, offset, …) "
        "or the target's source coordinates (_source_topic, _source_partition, "
        f"_source_offset); found {', '.join(sorted(rec)) or 'no columns'}"
    )


class ErrantRecordReporter:
    """Reports records a custom sink could not write to the quarantine table.

    Use as a context manager (see the module doc for the full contract)::

        with ErrantRecordReporter(run, batch_id) as report:
            ...
            report(row, exc)

    Args:
        run: the run the records belong to (``pipeline.start_run()``; its pipeline
            gives the config, session and quarantine table).
        batch_id: the micro-batch being written (the ``foreachBatch`` batch id).
        stage: the ``stage`` written for reported records.
        max_buffered: records buffered before an automatic flush.
        clock: the wall clock (the quarantine rows' times); the pipeline's by default.
        write_retry: the retry operator of the MERGE; the pipeline's write policy by default.
    """

    def __init__(
        self,
        run: Run,
        batch_id: int,
        *,
        stage: str = DEFAULT_STAGE,
        max_buffered: int = 1000,
        clock: Callable[[], dt.datetime] | None = None,
        write_retry: RetryWithToleranceOperator | None = None,
    ) -> None:
        if max_buffered < 1:
            raise ValueError(f"max_buffered: expected ≥ 1, found {max_buffered}")
        plan = run.plan
        cfg = plan.config
        self.run = run
        self.plan = plan
        self.batch_id = batch_id
        self.stage = stage
        self.max_buffered = max_buffered
        self.clock = clock or plan.clock
        self._writer = plan.quarantine_writer(write_retry)
        self.retry = self._writer.retry
        self._secrets = cfg.secrets()
        self._stacktrace = cfg.errors.dlq_context_stacktrace_enable
        self._retriable = RetriableClassifier.of(cfg.errors.retry_retriable)
        self._policy = plan.policy()
        # every report of a key, in order: a record reported twice is two failures
        self._buffer: dict[tuple[Any, Any, Any], list[tuple[Any, ...]]] = {}
        self._buffered = 0
        self._last_error_at: dt.datetime | None = None
        self._reported = 0
        self._requests = 0
        self._failures = 0
        self._closed = False

    # ------------------------------------------------------------------ the context manager

    def __enter__(self) -> ErrantRecordReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Flush what is buffered (durable on return) and add the metrics to the run."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self.run.metrics.add(self.metrics())

    # ------------------------------------------------------------------ reporting

    def __call__(self, record: Record, error: BaseException, *, attempts: int = 1) -> None:
        """Report one record the sink could not write (alias of :meth:`report`)."""
        self.report(record, error, attempts=attempts)

    def report(self, record: Record, error: BaseException, *, attempts: int = 1) -> None:
        """Report one record the sink could not write, and the exception it raised.

        Args:
            record: a ``Row`` or mapping (see the module doc for its columns).
            error: what the sink raised for it.
            attempts: how many times the sink tried the record.

        Raises:
            SourceError: the record has neither the Kafka columns nor the target's
                source coordinates (nothing is buffered).
            ToleranceExceededError: ``errors.tolerance=none`` (or
                ``errors.handler.sink: fail``); raised after the record is durable.
            QuarantineWriteError: the quarantine MERGE failed after its retries.
        """
        if self._closed:
            raise RuntimeError("ErrantRecordReporter: report() after close()")
        fields = _source_fields(_as_dict(record))
        message = redact_text(message_of(error), self._secrets)
        stack = None
        if self._stacktrace:
            text = "".join(traceback.format_exception(error))
            stack = redact_text(text, self._secrets)
        err = (
            self.stage,
            ErrorKind.SINK.value,
            type(error).__name__,
            message,
            stack,
            self._retriable(error),
            max(attempts, 1),
        )
        self._buffer.setdefault((fields[2], fields[3], fields[4]), []).append((*fields, err))
        self._buffered += 1
        self._reported += 1
        self._last_error_at = self.clock()
        try:
            self._enforce(1, error)
        except ToleranceExceededError:
            self.flush()  # durable first, then the run fails
            raise
        if self._buffered >= self.max_buffered:
            self.flush()

    def report_failed(
        self,
        failed: DataFrame,
        *,
        message: str = "error_message",
        error_class: str | None = "error_class",
    ) -> int:
        """Report a DataFrame of records a vectorised sink rejected; durable on return.

        ``failed`` has the Kafka source columns or the target's ``_source_*``
        coordinates (as for :meth:`report`), a string column ``message`` with the
        sink's error, and optionally a string column ``error_class`` (else
        ``SinkError``). ``failed`` is evaluated exactly once (a local checkpoint),
        so a sink's side effects in its plan are not repeated.

        Returns:
            The number of records reported.

        Raises:
            SourceError: a required column is missing.
            ToleranceExceededError: as for :meth:`report`, after the records are durable.
            QuarantineWriteError: the quarantine MERGE failed after its retries.
        """
        cols = set(failed.columns)
        if message not in cols:
            raise SourceError(f"report_failed: expected a message column {message!r}; found {', '.join(sorted(cols))}")
        klass: Column = F.col(error_class) if error_class and error_class in cols else F.lit("SinkError")
        err = error_column(self.stage, ErrorKind.SINK, klass, F.col(message).cast("string"), retriable=False)
        shaped = failed.select(
            *self._source_columns(failed, {message, error_class or message}),
            err.alias(_ERR),  # the quarantine writer masks secrets in it
        )
        # One evaluation of the user's plan: the count and the MERGEs read the checkpoint.
        # A record reported more than once is written in rounds (a MERGE source holds a key once).
        by_key = Window.partitionBy(*_KAFKA).orderBy(F.monotonically_increasing_id())
        checkpoint = shaped.withColumn("_q_round", F.row_number().over(by_key)).localCheckpoint(eager=True)
        totals = checkpoint.agg(F.count(F.lit(1)), F.max("_q_round")).first()
        n, rounds = (int(totals[0]), int(totals[1] or 0)) if totals is not None else (0, 0)
        if n:
            for i in range(1, rounds + 1):
                batch = checkpoint.where(F.col("_q_round") == i).drop("_q_round")
                self._merge(batch, n if rounds == 1 else batch.count())
            self._reported += n
            self._last_error_at = self.clock()
            self._enforce(n, None)
        return n

    def flush(self) -> int:
        """MERGE the buffered records into the quarantine table; durable on return.

        Returns:
            The number of records written.

        Raises:
            QuarantineWriteError: the MERGE failed after its retries (the records
                stay buffered, so a later flush retries them).
        """
        if not self._buffer:
            return 0
        written = 0
        # Round i writes every key's i-th report: a MERGE source holds each key once, and a
        # key reported again adds to its row's history instead of overwriting the first report.
        while self._buffer:
            rows = [reports.pop(0) for reports in self._buffer.values()]
            self._merge(self.plan.spark.createDataFrame(rows, _ROW_SCHEMA), len(rows))
            self._buffer = {k: v for k, v in self._buffer.items() if v}
            self._buffered -= len(rows)
            written += len(rows)
        return written

    # ------------------------------------------------------------------ results

    @property
    def reported(self) -> int:
        """Records reported so far (durable once flushed)."""
        return self._reported

    @property
    def pending(self) -> int:
        """Records buffered and not yet durable."""
        return self._buffered

    def metrics(self) -> BatchMetrics:
        """This reporter's dead letter queue metrics (KIP-610 reuses KIP-298's)."""
        m = MetricNames
        n = float(self._reported)
        # one cell per metric: the reporter's stage (topic not tracked), or the batch
        stage = self.stage if self._reported else None
        # As Kafka Connect's executeFailed: each reported record is a failure and an error
        # (total-record-failures, total-record-errors) and moves last-error-timestamp.
        last = float(int(self._last_error_at.timestamp() * 1000)) if self._last_error_at else 0.0
        points = [
            MetricPoint(m.TOTAL_RECORD_FAILURES, n, stage=stage),
            MetricPoint(m.TOTAL_RECORD_ERRORS, n, stage=stage),
            MetricPoint(m.RECORDS_QUARANTINED, n, stage=stage),
            MetricPoint(m.LAST_ERROR_TIMESTAMP, last),
            MetricPoint(m.DEADLETTERQUEUE_PRODUCE_REQUESTS, float(self._requests)),
            MetricPoint(m.DEADLETTERQUEUE_PRODUCE_FAILURES, float(self._failures)),
        ]
        return BatchMetrics(tuple(points))

    # ------------------------------------------------------------------ internals

    def _source_columns(self, df: DataFrame, exclude: set[str]) -> list[Column]:
        """The Kafka source columns of ``df`` (``exclude``: the error columns, kept out of ``value``)."""
        cols = set(df.columns)
        if all(c in cols for c in _KAFKA):

            def opt(name: str, dtype: Any) -> Column:
                return F.col(name) if name in cols else F.lit(None).cast(dtype)

            return [opt(f.name, f.dataType).cast(f.dataType).alias(f.name) for f in KAFKA_SOURCE_SCHEMA.fields]
        if all(c in cols for c in _TARGET):
            payload = [F.col(c) for c in df.columns if not c.startswith(TARGET_SOURCE_PREFIX) and c not in exclude]
            value = F.to_json(F.struct(*payload)).cast(BinaryType()) if payload else F.lit(None)
            ts = F.col(TARGET_TIMESTAMP) if TARGET_TIMESTAMP in cols else F.lit(None)
            coords = {
                KEY: F.lit(None),
                VALUE: value,
                TOPIC: F.col(TARGET_TOPIC),
                PARTITION: F.col(TARGET_PARTITION),
                OFFSET: F.col(TARGET_OFFSET),
                TIMESTAMP: ts,
                TIMESTAMP_TYPE: F.lit(None),
                HEADERS: F.lit(None),
            }
            return [coords[f.name].cast(f.dataType).alias(f.name) for f in KAFKA_SOURCE_SCHEMA.fields]
        raise SourceError(
            "report_failed: expected the Kafka source columns (topic, partition, offset, …) or "
            f"the target's _source_topic/_source_partition/_source_offset; found {', '.join(sorted(cols))}"
        )

    def _merge(self, df: DataFrame, n: int) -> None:
        try:
            written = self._writer.write(
                df, run_id=self.run.run_id, batch_id=self.batch_id, now=self.clock(), error=_ERR,
                action=f"quarantine MERGE of {n} reported record(s)", records=n,
            )
        except QuarantineWriteError as exc:
            self._requests += n * exc.attempts
            self._failures += n * exc.attempts
            raise QuarantineWriteError(
                f"{exc}; the reported records are not durable: fail the batch so it is replayed",
                attempts=exc.attempts,
            ) from exc.__cause__
        reported = report_errors(self.plan.error_reporters(), FailedRecords(
            df, written.rows, self.plan.config.pipeline, self.run.run_id, self.batch_id, error=_ERR,
        ))
        self._requests += n * (written.attempts + reported.produce_attempts)
        self._failures += n * (written.attempts - 1 + reported.produce_failures)

    def _enforce(self, n: int, cause: BaseException | None) -> None:
        """The error policy's verdict on ``n`` reported records (``Scope.SINK``).

        Raises:
            ToleranceExceededError: ``errors.handler.sink`` said fail, or
                ``errors.tolerance=none`` and no explicit handler continued them.
        """
        decision = self._policy.decide(
            {ErrorKind.SINK: n}, run_id=self.run.run_id, batch_id=self.batch_id,
            by_stage={self.stage: n}, stage_kinds={self.stage: ErrorKind.SINK},
        )
        self._policy.enforce(
            decision, scope=Scope.SINK, errors=n, now=self.clock(), batch_id=self.batch_id,
            what=f"reported by the sink (stage {self.stage!r})", cause=cause,
        )
