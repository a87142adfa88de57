"""The streaming runner: Kafka (or a Kafka-shaped Delta table) → one ``foreachBatch``.

``run_stream(plan)`` reads the source with ``readStream``, and for every
micro-batch calls :meth:`Run.process_batch(df, batch_id, BatchMode.micro_batch(…))
<quarantine.batch.run.Run.process_batch>`, which splits the batch once and
writes both tables from one persisted read of it (target then quarantine, or both at
once: :class:`~quarantine.batch.writes.BatchWriter`; exactly once rests on neither order).

Exactly-once contract, and what it rests on:

* Spark commits a micro-batch's offsets to the checkpoint only after its
  ``foreachBatch`` function returned. A crash anywhere inside it (before,
  between or after the two writes, during a MERGE) makes the restarted query
  run the same batch id over the same offsets again.
* The replayed batch writes nothing twice: as the first micro-batch after the
  start it is compared with the tables by coordinates and content (records in the
  target or closed in quarantine are left out), and its quarantine write is a
  MERGE. Later micro-batches read offsets no table holds and append plainly. A
  target without the source coordinates is appended with ``txnAppId``/``txnVersion``
  = batch id instead (README, Guarantees).
* That needs a ``run_id`` that survives restarts: it is the streaming query's
  ``id``, which Spark persists in the checkpoint (``<checkpoint>/metadata``).
  A fresh checkpoint is a new query id, hence a new run.

Triggers: ``available_now`` drains what is there (respecting
``max.offsets.per.trigger``) and stops; ``processing_time`` runs every
interval until stopped (``max_duration_s``) or killed.

Over Spark Connect (Databricks serverless, shared clusters, Databricks Connect) the
``foreachBatch`` function runs in a Python worker the server starts, attached to the
client's session: :class:`~quarantine.runners.foreach_batch.ConnectBatches` is sent
there with the config and the stages, builds the pipeline on the worker's session at
the first batch and runs every batch as above. The run's start, end, listeners and summary stay with the client,
which receives each batch's report through the session (:mod:`quarantine.runners.relay`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from quarantine.batch.agreement import check_and_claim
from quarantine.batch.plan import Plan
from quarantine.config import SourceConfig, SourceFormat, TriggerConfig, TriggerKind
from quarantine.errors import QuarantineError, SourceError
from quarantine.listeners.events import RunStatus, RunSummary
from quarantine.redaction import redact, redact_text, unlogged_jvm_calls
from quarantine.runners.foreach_batch import BatchRunner, ConnectBatches, shippable_stages
from quarantine.runners.relay import RelayReader, relay_prefix
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.source_contract import check_kafka_shaped
from quarantine.tables import is_connect, table_exists

__all__ = [
    "StreamFailedError",
    "is_kafka_metrics_npe",
    "kafka_options",
    "options_summary",
    "query_name",
    "read_stream",
    "run_stream",
    "trigger_options",
]

log = logging.getLogger("quarantine.runners.streaming")

#: In-process restarts allowed after Spark's Kafka metrics NPE (see :func:`is_kafka_metrics_npe`).
_MAX_METRICS_RESTARTS = 3


class StreamFailedError(QuarantineError):
    """The streaming query stopped with an error that did not come from the pipeline.

    Typical causes: the Kafka broker is unreachable, or offsets the checkpoint
    expects are gone (``failOnDataLoss``). Restarting from the same checkpoint
    resumes at the last committed batch; nothing committed is lost or repeated.
    """


# ---------------------------------------------------------------------- pure parts


def kafka_options(source: SourceConfig) -> dict[str, str]:
    """Spark Kafka source options for a ``kafka`` :class:`SourceConfig` (pure).

    ``source.options`` are passed through verbatim and win over the derived ones
    (e.g. ``kafka.security.protocol``, ``failOnDataLoss``, ``minPartitions``).

    Raises:
        SourceError: the source is not a Kafka source.
    """
    if source.format is not SourceFormat.KAFKA:
        raise SourceError(f"kafka options asked for a {source.format} source ({source.location})")
    opts: dict[str, str] = {
        "kafka.bootstrap.servers": source.bootstrap_servers or "",
        "startingOffsets": source.starting_offsets,
        "includeHeaders": str(source.include_headers).lower(),
    }
    if source.topics:
        opts["subscribe"] = ",".join(source.topics)
    else:
        opts["subscribePattern"] = source.topic_pattern or ""
    if source.max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(source.max_offsets_per_trigger)
    opts.update(source.options)
    return opts


def trigger_options(trigger: TriggerConfig) -> dict[str, Any]:
    """Keyword arguments for ``DataStreamWriter.trigger`` (pure)."""
    if trigger.kind is TriggerKind.PROCESSING_TIME:
        return {"processingTime": trigger.interval}
    return {"availableNow": True}


def query_name(pipeline: str) -> str:
    """The streaming query's name (shown in the Spark UI and listener events)."""
    return f"quarantine_{pipeline.replace('-', '_')}"


# ---------------------------------------------------------------------- I/O edges


def read_stream(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """The source as a streaming DataFrame with the Kafka source's columns.

    ``kafka``: ``readStream.format("kafka")`` with :func:`kafka_options`.
    ``delta``: ``readStream.format("delta")`` of a Kafka-shaped table (path or
    catalog name), ``source.options`` passed through (``startingVersion``,
    ``maxFilesPerTrigger``…). ``parquet``: a Kafka-shaped directory of files.

    Raises:
        SourceError: a Delta/Parquet source does not have the Kafka columns.
    """
    with unlogged_jvm_calls():  # the options hold credentials (JAAS, SSL keys)
        if source.format is SourceFormat.KAFKA:
            return spark.readStream.format("kafka").options(**kafka_options(source)).load()
        reader = spark.readStream.format(source.format.value).options(**dict(source.options))
        if source.format is SourceFormat.PARQUET:
            df = reader.schema(KAFKA_SOURCE_SCHEMA).load(source.path)
        elif source.table:
            df = reader.table(source.table)
        else:
            df = reader.load(source.path)
    check_kafka_shaped(df, source.location)
    return df


def _relay_to(spark: SparkSession, query: StreamingQuery, runner: BatchRunner) -> Callable[[], None]:
    """Client side over Connect: a function that hands the worker's reports to the run's listeners."""
    reader = RelayReader(spark, relay_prefix(str(query.runId)))

    def collect() -> None:
        run = runner.run
        assert run is not None
        for report in reader.reports():
            runner.reports.append(report)
            run.report_batch(report)
            log.info(
                "batch %s: %s in, %s ok, %s quarantined",
                report.batch_id, report.records_in, report.records_ok, report.records_quarantined,
            )
        if runner.error is None:
            runner.error = reader.error()

    def collect_and_close() -> None:
        # Whether the query ended is asked *before* the read: the last batch may commit and
        # the query end during a read, and removing the settings then would lose that batch's
        # report (published after the read began). A read that begins once the query ended
        # finds every report the worker published.
        ended = not query.isActive
        try:
            collect()
        finally:
            if ended:
                reader.close()

    return collect_and_close


def _writer(df: DataFrame, runner: Callable[[DataFrame, int], None], plan: Plan) -> DataStreamWriter:
    cfg = plan.config
    assert cfg.target.checkpoint is not None  # PipelineConfig guarantees it for streaming
    return (
        df.writeStream.queryName(query_name(cfg.pipeline))
        .option("checkpointLocation", cfg.target.checkpoint)
        .trigger(**trigger_options(cfg.trigger))
        .foreachBatch(runner)
    )


def run_stream(
    plan: Plan,
    *,
    max_duration_s: float | None = None,
    on_started: Any = None,
) -> RunSummary:
    """Run the pipeline as a streaming query until it ends.

    Args:
        plan: the configured pipeline; the run's id is the query id (stable
            across restarts from the same checkpoint).
        max_duration_s: for a ``processing_time`` trigger, stop the query cleanly
            after this long (None: run until the process is stopped). An
            ``available_now`` query stops by itself once drained.
        on_started: called with the :class:`StreamingQuery` once it started
            (tests and the soak script use it to watch progress).

    Returns:
        The run summary: the batches this process ran (a replayed batch counts again).

    Raises:
        QuarantineError: a batch failed in the pipeline (tolerance exceeded, a
            write failed); the failing batch's offsets are not committed.
        StreamFailedError: the query failed outside the pipeline (e.g. the broker
            is unreachable); restart from the same checkpoint to resume.
    """
    cfg = plan.config
    connect = is_connect(plan.spark)
    secrets = cfg.secrets()
    # listed topics into an existing target are checked and claimed before the stream starts (a
    # topic pattern's topics, and a target the stream creates, are not known here)
    topics = cfg.source.topics if cfg.source.format is SourceFormat.KAFKA else ()
    if topics and table_exists(plan.spark, plan.target_table):
        check_and_claim(plan.spark, cfg, topics, plan.write_operator)
    runner = BatchRunner(plan)
    deadline = None if max_duration_s is None else time.monotonic() + max_duration_s
    run = None
    restarts = 0
    while True:
        df = read_stream(plan.spark, cfg.source)
        staged = plan.stage_stream(df)
        runner.staged = staged is not None
        batches = (
            ConnectBatches(cfg, shippable_stages(list(plan.stages)), query_name(cfg.pipeline), runner.staged)
            if connect else runner
        )
        query: StreamingQuery = _writer(df if staged is None else staged, batches, plan).start()
        started = runner.start(str(query.id))
        if run is None:
            run = started.info
            started.begin()
        opts = kafka_options(cfg.source) if cfg.source.format is SourceFormat.KAFKA else cfg.source.options
        log.info(
            "%s",
            redact_text(
                f"streaming query {query.name} (run {run.run_id}) started on {cfg.source.location} "
                f"[{options_summary(opts)}]",
                secrets,
            ),
        )
        if on_started is not None:
            on_started(query)
        collect = _relay_to(plan.spark, query, runner) if connect else None
        failure = _run_query(query, runner, deadline, cfg.source.location, secrets, collect)
        if (
            isinstance(failure, StreamFailedError)
            and runner.error is None
            and is_kafka_metrics_npe(str(failure))
            and restarts < _MAX_METRICS_RESTARTS
        ):
            # SPARK-55271: the query died in progress reporting *after* committing the
            # batch it replayed from the offset log; restarting from the checkpoint is safe.
            restarts += 1
            log.warning("restarting the query after Spark's Kafka metrics NPE (SPARK-55271)")
            continue
        break
    status = RunStatus.FAILED if failure else RunStatus.SUCCEEDED
    assert runner.run is not None
    runner.run.end(status, failure)
    if failure is not None:
        raise failure
    return RunSummary(run=run, batches=tuple(runner.reports), status=status, notes=runner.run.notes)


def is_kafka_metrics_npe(text: str) -> bool:
    """Whether a query failure is Spark 4.1's NPE in ``KafkaMicroBatchStream.metrics``.

    SPARK-55271 (fixed after 4.1.1): when a restarted query's first batch is one
    replayed from the offset log, ``latestOffset()`` never ran, and progress
    reporting dereferences ``Some(null)`` — after the batch was committed.
    """
    return 'IterableOps.map(scala.Function1)" because the return value of "scala.Option.get()" is null' in text


def _run_query(
    query: StreamingQuery,
    runner: BatchRunner,
    deadline: float | None,
    where: str,
    secrets: tuple[str, ...] = (),
    collect: Callable[[], None] | None = None,
) -> BaseException | None:
    """Wait for the query to end; return what it failed with (the pipeline's own error first).

    ``collect`` (over Spark Connect: the reports the worker relayed) is called about
    every second while the query runs, and once more after it ended.
    """
    failure: BaseException | None = None
    try:
        _await(query, None if deadline is None else max(0.0, deadline - time.monotonic()), collect)
    except BaseException as exc:
        failure = exc
    finally:
        if query.isActive:
            query.stop()
        if collect is not None:
            collect()
    if failure is not None:
        failure = runner.error or _stream_failure(failure, where, secrets)
    elif query.exception() is not None:
        failure = runner.error or _stream_failure(query.exception(), where, secrets)
    return failure


def _await(query: StreamingQuery, max_duration_s: float | None, tick: Callable[[], None] | None = None) -> None:
    if max_duration_s is None and tick is None:
        query.awaitTermination()
        return
    deadline = None if max_duration_s is None else time.monotonic() + max_duration_s
    while query.isActive and (deadline is None or time.monotonic() < deadline):
        query.awaitTermination(1)
        if tick is not None:
            tick()
    if query.isActive:
        query.stop()
    query.awaitTermination()


def _stream_failure(exc: object, where: str, secrets: tuple[str, ...] = ()) -> StreamFailedError:
    """The error for a query that failed outside the pipeline; Spark's text is redacted.

    Spark and the Kafka client echo options (a JAAS line, an SSL key) in their errors.
    """
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "failOnDataLoss" in text:
        # Spark's Kafka source found offsets below its checkpoint's: the same checkpoint fails again
        return StreamFailedError(
            redact_text(
                f"the streaming query over {where} stopped: Spark's Kafka source found a topic-partition's "
                "offsets below those its checkpoint committed, so records were deleted or the topic was "
                f"deleted and recreated ({first[:300]}). Committed batches are durable. If the topic was "
                "recreated, start the query from a new checkpoint (target.checkpoint) with "
                "source.starting.offsets: earliest: records are identified by their coordinates and their "
                "content, so the new topic's records get rows of their own and nothing settled is changed. "
                "To let Spark skip ahead instead, set source.options.failOnDataLoss: false (records between "
                "are then not read).",
                secrets,
            )
        )
    return StreamFailedError(
        redact_text(
            f"the streaming query over {where} failed outside the pipeline: {first[:500]}. "
            "Committed batches are durable; restart from the same checkpoint to resume.",
            secrets,
        )
    )


def options_summary(opts: Mapping[str, str]) -> str:
    """Reader options for logs: ``k=v, …`` with credentials redacted (:func:`~quarantine.redaction.redact`)."""
    return ", ".join(f"{k}={v}" for k, v in redact(dict(opts)).items())
