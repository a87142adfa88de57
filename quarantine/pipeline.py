"""Run a pipeline: stages → split → quarantine MERGE + target write, per batch.

:meth:`Pipeline.process_batch` is the one place where a batch is split and
written. It is used as-is by the batch runner (the whole input is batch 0) and
by the streaming runner (:mod:`quarantine.runners.streaming`, inside ``foreachBatch``).

Order of a batch, and why:

1. Stages run and the batch is projected to what the two writes need (raw
   bytes kept only for failed rows), then persisted; one noop pass builds the
   cache and observes every count (records in, failed per stage…) — the only
   pass over the source data.
2. Failed rows are MERGEd into the quarantine table first, so a tolerance
   breach can fail the run *after* the failed records are durable.
3. The tolerance guard decides; a breach raises before the target write, so
   the batch's good rows and its offsets are not committed.
4. Good rows are written to the target exactly once (txn append in streaming,
   insert-only MERGE in batch).
5. Listeners (metrics table, MLflow, logs) get the batch report.

A crash anywhere in 1-5 leaves the offsets uncommitted; the replayed batch
rewrites nothing twice (see :mod:`quarantine.sinks`).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from quarantine.config import BreachAction, PipelineConfig, SourceFormat
from quarantine.coordinates import VARIANTS, SourceCheck, identify
from quarantine.errorlog import ErrorContextLogger, sample_errors
from quarantine.errors import (
    ExpectationBreachError,
    HandlerError,
    QuarantineWriteError,
    RetriesExhaustedError,
    TableWriteError,
    ToleranceExceededError,
    describe_write_failure,
)
from quarantine.expectations.stage import (
    expectation_counts,
    keeps_whole_batch,
    validate_expectations,
    validation_columns,
)
from quarantine.handlers import ErrorHandlers, counts_by_kind
from quarantine.metrics import MetricNames, RunMetrics, batch_metrics, observed_counts, retry_column_names
from quarantine.policy import ErrorPolicy, Scope
from quarantine.redaction import redact_text
from quarantine.report import BatchReport, RunInfo, RunListener, RunSummary, fan_out
from quarantine.retry import RetryPolicy, RetryWithToleranceOperator
from quarantine.schema import SOURCE_KEY, QuarantineStatus
from quarantine.sinks import read_table, table_exists
from quarantine.sinks.quarantine import OffsetWatermark, QuarantineWriter, close_records, settled_keys
from quarantine.sinks.target import append_batch, merge_new_rows
from quarantine.stage import BatchWideStageError, Stage, apply_stages, final_error, final_result
from quarantine.tolerance import DeltaWindowStore, window_state_table

__all__ = ["Pipeline", "default_listeners"]

log = logging.getLogger("quarantine")

_ERR = "_q_error"
_RES = "_q_result"
#: True where the record is open in quarantine from an earlier run (batch runs and replay).
_OPEN = "_q_open"
#: Observed: records open in quarantine that passed in this batch (their rows get closed).
_CLOSING = "records_closing"


def _without(df: DataFrame, keys: DataFrame) -> DataFrame:
    """``df`` less the rows whose coordinates are in ``keys`` (NULL-safe anti join)."""
    k = keys.select(*[F.col(c).alias(f"_x_{c}") for c in SOURCE_KEY])
    return df.join(k, [df[c].eqNullSafe(k[f"_x_{c}"]) for c in SOURCE_KEY], "left_anti")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Pipeline:
    """A configured pipeline, ready to process batches.

    Build with :meth:`from_config`. Stages may be replaced with Python-built
    ones (:meth:`with_stages`) for notebooks.

    Attributes:
        config: the validated config.
        spark: the session (injected; never a global).
        stages: the built stages, in order.
        run_id: this run's id (streaming replaces it with the query id).
        listeners: receivers of run/batch reports.
        clock: the wall clock (injected for tests).
        write_retry: the retry operator for the batch's table writes; None builds
            :meth:`RetryWithToleranceOperator.for_writes` from ``errors.retry.*``.
        error_policy: handlers and tolerance (:mod:`quarantine.policy`); None builds
            it from the config on first use (:meth:`from_config` builds it up
            front, so a bad handler path fails before any data is read).
    """

    config: PipelineConfig
    spark: SparkSession
    stages: list[Stage]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    listeners: list[RunListener] = field(default_factory=list)
    clock: Callable[[], dt.datetime] = _utcnow
    write_retry: RetryWithToleranceOperator | None = None
    error_policy: ErrorPolicy | None = None
    _run: RunInfo | None = field(default=None, init=False, repr=False)
    _run_metrics: RunMetrics | None = field(default=None, init=False, repr=False)
    _error_log: ErrorContextLogger | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_config(
        cls,
        config: PipelineConfig,
        spark: SparkSession | None = None,
        *,
        run_id: str | None = None,
        listeners: Iterable[RunListener] | None = None,
        stages: Sequence[Stage] | None = None,
    ) -> Pipeline:
        """Build the stages and the default listeners for a config.

        Raises:
            ConfigError: a stage option is bad (before anything is read or written).
        """
        from quarantine.session import get_spark
        from quarantine.stages import build_stages

        spark = spark or get_spark(f"quarantine:{config.pipeline}", config.spark_conf)
        built = list(stages) if stages is not None else build_stages(config.stages)
        pipe = cls(
            config=config,
            spark=spark,
            stages=built,
            run_id=run_id or uuid.uuid4().hex,
            listeners=list(listeners) if listeners is not None else default_listeners(config, spark),
        )
        pipe.error_policy = pipe.policy()
        return pipe

    def with_stages(self, stages: Sequence[Stage]) -> Pipeline:
        """A copy of this pipeline running ``stages`` instead."""
        return replace(self, stages=list(stages))

    @property
    def quarantine_table(self) -> str:
        return self.config.errors.dlq_table_name

    @property
    def target_table(self) -> str:
        return self.config.target.table

    @property
    def run_metrics(self) -> RunMetrics:
        """This run's metric totals so far (a new run id starts from zero)."""
        if self._run_metrics is None or self._run_metrics.run_id != self.run_id:
            self._run_metrics = RunMetrics(run_id=self.run_id)
        return self._run_metrics

    def run_info(self) -> RunInfo:
        """The current run (created on first use)."""
        if self._run is None or self._run.run_id != self.run_id:
            self._run = RunInfo(
                pipeline=self.config.pipeline,
                run_id=self.run_id,
                source=self.config.source.location,
                config=self.config.redacted(),
                started_at=self.clock(),
            )
        return self._run

    # ------------------------------------------------------------------ pure parts

    def chain(self, df: DataFrame) -> list[Stage]:
        """The stages a frame runs through: :class:`SourceCheck` first when ``df`` was identified."""
        return [SourceCheck(), *self.stages] if VARIANTS in df.columns else list(self.stages)

    def transform(self, df: DataFrame) -> DataFrame:
        """Apply the stages: ``df`` plus one result column per stage (no I/O)."""
        return apply_stages(
            df, self.chain(df),
            stacktrace=self.config.errors.dlq_context_stacktrace_enable,
            retry=RetryPolicy.from_config(self.config.errors),
        )

    def split_frame(self, df: DataFrame) -> DataFrame:
        """The staged batch, projected to what the two writes need.

        Columns: the source coordinates, the raw ``key``/``value``/``headers``
        (only for failed rows — good rows do not need them, which keeps the
        persisted batch small), the chain's result ``_q_result`` and error ``_q_error``,
        and ``_q_open`` (the record is open in quarantine) when ``df`` has it.
        """
        staged = self.transform(df)
        chain = self.chain(df)
        err = final_error(chain)
        # an expectation breach with on_breach=quarantine_batch may send every row to quarantine
        failed = err.isNotNull() | F.lit(keeps_whole_batch(chain))
        return staged.select(
            "topic", "partition", "offset", "timestamp", "timestampType",
            F.when(failed, F.col("key")).alias("key"),
            F.when(failed, F.col("value")).alias("value"),
            F.when(failed, F.col("headers")).alias("headers"),
            final_result(chain).alias(_RES),
            err.alias(_ERR),
            (F.col(_OPEN) if _OPEN in df.columns else F.lit(False)).alias(_OPEN),
            *retry_column_names(chain),  # retried successes, for total-retries (metrics.py)
            *validation_columns(chain),  # expectation stages' input, for GX (expectations/stage.py)
        )

    def stage_stream(self, stream: DataFrame) -> DataFrame | None:
        """A Kafka stream's :meth:`split_frame`, built once for the query (None: stage per batch).

        Building the staged plan takes thousands of Py4J calls (every stage's
        expressions, every error message); on the streaming DataFrame that is
        once per query instead of once per micro-batch. Only for Kafka sources,
        whose micro-batches need no :meth:`prepare` (offsets are new, coordinates
        unique); other streams are identified per batch first, and so is a stream with
        a stage that counts over the batch (``unique``: :class:`BatchWideStageError`).
        """
        if self.config.source.format is not SourceFormat.KAFKA:
            return None
        try:
            return self.split_frame(self.prepare(stream, streaming=True))
        except BatchWideStageError:  # a stage counts over the batch (unique): per micro-batch
            return None

    def target_rows(self, split: DataFrame) -> DataFrame:
        """Good rows in the target's shape: the final result's fields + source coordinates."""
        res_type = split.schema[_RES].dataType
        from pyspark.sql.types import StructType

        if isinstance(res_type, StructType):
            payload = [F.col(f"{_RES}.{f.name}").alias(f.name) for f in res_type.fields]
        else:
            payload = [F.col(_RES).alias(self.stages[-1].name)]
        extra: list[Column] = []
        if self.config.target.source_columns:
            extra = [
                F.col("topic").alias("_source_topic"),
                F.col("partition").alias("_source_partition"),
                F.col("offset").alias("_source_offset"),
                F.col("timestamp").alias("_source_timestamp"),
            ]
        return split.where(F.col(_ERR).isNull()).select(*payload, *extra)

    # ------------------------------------------------------------------ the batch

    def prepare(self, df: DataFrame, *, streaming: bool = False) -> DataFrame:
        """What a batch runs on: identified records not settled yet (see :mod:`quarantine.coordinates`).

        * Not a Kafka topic (or a replay): coordinates made total and unique (:func:`identify`).
        * A batch run or a replay: records already in the target, or closed in
          quarantine (``replayed``, ``discarded``), are left out: a re-run does not
          run them again, so the two tables stay disjoint; ``_q_open`` marks records
          open in quarantine, which are closed once their good row is in the target.
        * A micro-batch of a stream: offsets are new, nothing is looked up.
        """
        if self.config.source.format is not SourceFormat.KAFKA or not streaming:
            df = identify(df)
        if streaming:
            return df
        known = settled_keys(self.spark, self.quarantine_table, self.config.pipeline)
        opened = None
        if known is not None:
            opened = known.where(F.col("status") == QuarantineStatus.OPEN.value).select(*SOURCE_KEY)
            closed = known.where(F.col("status") != QuarantineStatus.OPEN.value).select(*SOURCE_KEY)
            df = _without(df, closed)
        if table_exists(self.spark, self.target_table):
            delivered = read_table(self.spark, self.target_table).select(
                *[F.col(f"_source_{c}").alias(c) for c in SOURCE_KEY]
            )
            # a record delivered but still open (a crash before its row was closed) runs
            # again: it passes, the target MERGE adds nothing, and its row is closed
            df = _without(df, delivered if opened is None else _without(delivered, opened))
        if opened is None:
            return df.withColumn(_OPEN, F.lit(False))
        flags = opened.select(*[F.col(c).alias(f"_k_{c}") for c in SOURCE_KEY])
        flagged = df.join(flags, [df[c].eqNullSafe(flags[f"_k_{c}"]) for c in SOURCE_KEY], "left")
        return flagged.select(*df.columns, F.col(f"_k_{SOURCE_KEY[-1]}").isNotNull().alias(_OPEN))

    def process_batch(
        self,
        df: DataFrame,
        batch_id: int,
        *,
        streaming: bool = False,
        replaying: bool = False,
        watermark: OffsetWatermark | None = None,
        staged: bool = False,
    ) -> BatchReport:
        """Split one batch and write both tables from one read of it.

        Args:
            df: the batch, Kafka-shaped.
            batch_id: the micro-batch id (0 for a batch run).
            streaming: write the target with ``txnAppId``/``txnVersion`` = batch id
                (streaming), else with an insert-only MERGE (batch).
            replaying: the batch is a replay (:mod:`quarantine.replay`): records that
                pass are closed as ``replayed by run …``.
            watermark: a Kafka stream's :class:`OffsetWatermark`: once it has
                passed, failed rows are appended to the quarantine table instead
                of MERGEd; until then the batch advances it.
            staged: ``df`` is already :meth:`split_frame` of a prepared batch (a
                Kafka stream stages its streaming DataFrame once per query, see
                :meth:`stage_stream`, instead of building the same plan for
                every micro-batch).

        Returns:
            The batch report (also sent to the listeners, also when the batch fails
            on tolerance: its metrics are published first, then it raises).

        Raises:
            ToleranceExceededError: after the quarantine write, before the target write.
            TableWriteError: a write failed after its retries (``QuarantineWriteError``
                for the quarantine table); nothing after it was written.
        """
        run = self.run_info()
        now = self.clock()
        prepared = df if staged else self.prepare(df, streaming=streaming)
        chain = self.chain(prepared)
        # Serialized on purpose: _DESER saved ~1-2 s per 1M rows but ran out of a 2 GiB heap
        # unrolling a 5M-record, 50%-poison batch (benchmarks/README.md, memory).
        split = persisted = (prepared if staged else self.split_frame(prepared)).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        failure: BaseException | None = None
        logged = 0
        dlq_attempts = 1
        append = watermark is not None and watermark.passed
        try:
            obs = Observation(f"quarantine_{uuid.uuid4().hex}")
            # The one pass: builds the persisted batch and counts everything on the way.
            observed = [
                *observed_counts(chain, _ERR), *expectation_counts(chain, F.col(_ERR)),
                F.count(F.when(F.col(_ERR).isNull() & F.col(_OPEN), 1)).alias(_CLOSING),
                *(watermark.observed() if watermark is not None and not append else ()),
            ]
            split.observe(obs, *observed).write.format("noop").mode("overwrite").save()
            counts: Mapping[str, Any] = obs.get
            quarantined = int(counts["records_quarantined"])
            if watermark is not None and not append:
                watermark.advance(counts)

            # GX validates the expectation stages' input on the persisted batch (not the source).
            expect = validate_expectations(split, chain, batch_id)
            whole_batch_error = expect.batch_error(chain)
            if whole_batch_error is not None:
                # on_breach=quarantine_batch: every row goes to quarantine; recount over the cache
                split = split.withColumn(_ERR, F.coalesce(F.col(_ERR), whole_batch_error))
                obs = Observation(f"quarantine_{uuid.uuid4().hex}")
                split.observe(obs, *observed).write.format("noop").mode("overwrite").save()
                counts = obs.get
                quarantined = int(counts["records_quarantined"])

            try:
                if quarantined:
                    dlq_attempts = self._write_quarantine(split, run.run_id, batch_id, now, append=append)
                logged = self._check_tolerance(counts, chain, quarantined, now, batch_id, split, replaying)
                failing = () if replaying else expect.with_action(BreachAction.FAIL)
                if failing:
                    raise ExpectationBreachError(
                        "expectation breach (on_breach=fail): " + "; ".join(b.message for b in failing)
                        + f"; failed records are in {self.quarantine_table}; the target was not written",
                        breaches=failing, count=len(failing),
                    )
                self._write_target(split, run.run_id, batch_id, streaming)
                if int(counts[_CLOSING]):
                    self._close_passed(split, replaying, now)
            except (ToleranceExceededError, HandlerError) as exc:
                failure = exc  # published with the batch's metrics below, then raised
        finally:
            persisted.unpersist()

        # a tolerance/handler breach is one more breach than the expectation breaches GX found
        broke = failure is not None and not isinstance(failure, ExpectationBreachError)
        metrics = batch_metrics(
            counts, stages=chain, now=now, errors_logged=logged, dlq_attempts=dlq_attempts,
            breaches=len(expect.breaches) + int(broke),
        )
        self.run_metrics.add(metrics)
        records_in = int(counts["records_in"])
        by_stage = {s.name: int(counts[f"stage:{s.name}"]) for s in chain}
        report = BatchReport(
            run=run,
            batch_id=batch_id,
            records_in=records_in,
            records_ok=records_in - quarantined,
            records_quarantined=quarantined,
            quarantined_by_stage={k: v for k, v in by_stage.items() if v},
            quarantined_by_topic=metrics.topic_counts(MetricNames.RECORDS_QUARANTINED),
            quarantined_by_expectation={
                k.split(":", 1)[1]: int(v) for k, v in counts.items() if k.startswith("expectation:") and int(v)
            },
            metrics=metrics.as_report(),
            breaches=expect.breaches,
            untranslated_expectations=expect.untranslated,
            finished_at=self.clock(),
        )
        for problem in fan_out(self.listeners, "on_batch", report):
            log.warning("listener failed on batch %s: %s", batch_id, redact_text(str(problem), self.config.secrets()))
        if failure is not None:
            raise failure
        return report

    def quarantine_writer(self, retry: RetryWithToleranceOperator | None = None) -> QuarantineWriter:
        """The pipeline's quarantine writer (its batches and its errant record reporters use it).

        Args:
            retry: the write retry operator; by default :attr:`write_retry`, else
                :meth:`RetryWithToleranceOperator.for_writes` from ``errors.retry.*``.
        """
        cfg = self.config
        return QuarantineWriter(
            spark=self.spark,
            table=self.quarantine_table,
            pipeline=cfg.pipeline,
            retry=retry or self.write_retry or RetryWithToleranceOperator.for_writes(cfg.errors),
            secrets=cfg.secrets(),
            stacktrace=cfg.errors.dlq_context_stacktrace_enable,
        )

    def _write_quarantine(
        self, split: DataFrame, run_id: str, batch_id: int, now: dt.datetime, *, append: bool = False
    ) -> int:
        """Write the batch's failed rows to the quarantine table; returns the attempts made."""
        failed = split.where(F.col(_ERR).isNotNull())
        return self.quarantine_writer().write(
            failed, run_id=run_id, batch_id=batch_id, now=now, error=_ERR, append=append
        )

    def _write_target(self, split: DataFrame, run_id: str, batch_id: int, streaming: bool) -> None:
        """Write the batch's good rows to the target exactly once."""
        good = self.target_rows(split)
        if streaming:
            self.write(
                "target append", self.target_table, batch_id,
                # txnAppId carries the run (= streaming query) id: a new checkpoint restarts
                # batch ids at 0, and Delta would silently skip those appends otherwise.
                lambda: append_batch(
                    good, self.target_table, pipeline=f"{self.config.pipeline}:{run_id}", batch_id=batch_id,
                ),
            )
        else:
            self.write(
                "target MERGE", self.target_table, batch_id,
                lambda: merge_new_rows(self.spark, good, self.target_table),
            )

    def _close_passed(self, split: DataFrame, replaying: bool, now: dt.datetime) -> None:
        """Close the open quarantine rows of the batch's records that passed.

        Each record's outcome is its own result in this batch, never who wrote its
        quarantine row last. Runs after the target write: a crash in between leaves
        the row open, and the next run or replay runs the record again and closes it.
        """
        passed = split.where(F.col(_ERR).isNull() & F.col(_OPEN)).select(*SOURCE_KEY)
        how = "replayed by run" if replaying else "passed on re-run, run"
        self.write(
            "quarantine close", self.quarantine_table, 0,
            lambda: close_records(
                self.spark, self.quarantine_table, passed, pipeline=self.config.pipeline,
                status=QuarantineStatus.REPLAYED, resolution=f"{how} {self.run_id}", now=now,
            ),
        )

    def write(
        self, action: str, table: str, batch_id: int, write: Callable[[], None], *, quarantine: bool = False
    ) -> int:
        """Run a table write under the write retry policy (see :mod:`quarantine.retry`).

        Returns the attempts made. A write that still fails raises a
        :class:`TableWriteError` (:class:`QuarantineWriteError` for the quarantine
        table) whose message names the table, the batch, Delta's/Spark's reason in
        one line and what to do (:func:`quarantine.errors.describe_write_failure`);
        the Java stack stays on ``__cause__``.
        """
        retry = self.write_retry or RetryWithToleranceOperator.for_writes(self.config.errors)
        try:
            _, attempts = retry.call(write, name=f"{action} into {table}")
        except RetriesExhaustedError as exc:
            kind = QuarantineWriteError if quarantine else TableWriteError
            raise kind(
                describe_write_failure(exc.last, action=action, table=table, batch_id=batch_id, attempts=exc.attempts),
                attempts=exc.attempts,
            ) from exc.last
        return attempts

    def _check_tolerance(
        self, counts: Mapping[str, Any], chain: Sequence[Stage], errors: int, now: dt.datetime, batch_id: int,
        split: DataFrame, replaying: bool = False,
    ) -> int:
        """Handlers, error-context log, then the tolerance guard; returns lines logged.

        Runs after the batch's quarantine rows are durable and before the target
        write (see :mod:`quarantine.handlers`, :mod:`quarantine.errorlog`,
        :mod:`quarantine.tolerance`).

        A replay has its own policy: a record that fails again is its expected
        outcome, so no handler, limit or tolerance fails it (it stays open with
        the new error); the error-context log still runs.

        Raises:
            HandlerError: a custom handler raised or returned no HandlerResponse.
            ToleranceExceededError: a handler said fail, or a tolerance limit broke.
        """
        if not errors:
            return 0
        cfg = self.config.errors
        policy = self.policy()
        by_stage = {s.name: int(counts[f"stage:{s.name}"]) for s in chain}
        decision = policy.decide(
            counts_by_kind(chain, by_stage), run_id=self.run_id, batch_id=batch_id, by_stage=by_stage,
            stage_kinds={s.name: s.kind for s in chain},
        )
        # a failing kind is always logged: the run stops, and the log says which records and why
        kinds = set(decision.logged_kinds) | set(decision.failed_kinds)
        logged = 0
        if kinds:
            if self._error_log is None:
                self._error_log = ErrorContextLogger.from_config(
                    cfg, config=self.config.redacted(), secrets=self.config.secrets()
                )
            # a bounded sample (limit + collect) of the persisted batch, never a count
            sample = sample_errors(
                split, error=_ERR, kinds={k.value for k in kinds},
                include_messages=cfg.log_include_messages,
            ).collect()
            logged = self._error_log.log_batch(
                [r.asDict() for r in sample], pipeline=self.config.pipeline, run_id=self.run_id,
                batch_id=batch_id, total=sum(decision.counts[k] for k in kinds),
            )
        policy.enforce(
            decision, scope=Scope.REPLAY if replaying else Scope.RUN, errors=errors, now=now,
            run_id=self.run_id, batch_id=batch_id,
        )
        return logged

    def policy(self) -> ErrorPolicy:
        """The pipeline's :class:`~quarantine.policy.ErrorPolicy` (built on first use)."""
        if self.error_policy is None:
            cfg = self.config.errors
            self.error_policy = ErrorPolicy(
                cfg, self.config.pipeline, ErrorHandlers.from_config(cfg, self.config.secrets()),
                window_store=(
                    DeltaWindowStore(self.spark, window_state_table(cfg.dlq_table_name))
                    if cfg.tolerance_rate_limit >= 0 else None
                ),
            )
        return self.error_policy

    # ------------------------------------------------------------------ runs

    def run(self) -> RunSummary:
        """Run the pipeline once: :func:`~quarantine.runners.batch.run_batch`, or
        :func:`~quarantine.runners.streaming.run_stream` for streaming sources."""
        from quarantine.runners import run_batch, run_stream

        return run_stream(self) if self.config.source.streaming else run_batch(self)


def default_listeners(config: PipelineConfig, spark: SparkSession) -> list[RunListener]:
    """The listeners a config asks for (metrics table, MLflow, error log)."""
    from quarantine.sinks.metrics import metrics_listener
    from quarantine.tracking import tracker_for

    return [metrics_listener(config, spark), tracker_for(config)]

