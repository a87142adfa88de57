"""A pipeline's plan: its configuration and the pure functions a batch runs through.

A :class:`Plan` holds configuration (the config, the session, the built stages,
the listeners, the error policy) and no run state: a run's id, counts and
tolerance live in :class:`quarantine.batch.run.Run` (:func:`quarantine.batch.run.start_run`).
Nothing here reads or writes a table or collects: what a batch runs on is
prepared against the tables by :mod:`quarantine.batch.settle`, beside the run that
does it. The runs and the runners read a plan; the facade above them all is
:class:`quarantine.pipeline.Pipeline`, a plan that can run itself. What is here,
in the order a record meets it:

1. :meth:`Plan.transform` — the stages (:func:`quarantine.batch.chain.apply_stages`);
2. :meth:`Plan.split_frame` — the projection the two writes need;
3. :meth:`Plan.quarantine_writer` and :meth:`Plan.target_rows` — what
   goes to quarantine and what to the target (written by the run);
4. :meth:`Plan.policy` — the error policy that decides in between.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Self

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from quarantine.batch.chain import StageAnalysisError, apply_stages, final_error, final_result
from quarantine.batch.verdict import carried_columns, keeps_raw_bytes
from quarantine.columns import (
    ERROR,
    FINGERPRINT,
    HEADERS,
    KEY,
    OFFSET,
    OPEN,
    PARTITION,
    RESULT,
    REUSED,
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
from quarantine.config import PipelineConfig, ReusedCoordinates, SourceFormat, WrittenBy
from quarantine.errorhandling.handlers import ErrorHandlers
from quarantine.errorhandling.policy import ErrorPolicy
from quarantine.errorhandling.reporter import ErrorReporter
from quarantine.errorhandling.retry import RetryPolicy, RetryWithToleranceOperator
from quarantine.errorhandling.tolerance import DeltaWindowStore, window_state_table
from quarantine.errors import (
    ConfigError,
)
from quarantine.identity import (
    VARIANTS,
    fingerprint,
)
from quarantine.keyring import KeyRing
from quarantine.listeners.error_log import ErrorContextLogger
from quarantine.listeners.events import RunListener
from quarantine.schema import target_columns
from quarantine.sinks.dlq_topic import dlq_topic
from quarantine.sinks.quarantine import QuarantineWriter
from quarantine.stage import BatchWideStageError, Stage, drift_column_names, retry_column_names
from quarantine.stages.source import SourceCheck

__all__ = ["Plan", "refuse_pipeline_tables"]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Plan:
    """A configured pipeline's plan, ready to process batches (:class:`~quarantine.pipeline.Pipeline` runs it).

    Built by :func:`quarantine.assemble.assemble` from a config. Stages may be replaced
    with Python-built ones (:meth:`with_stages`) for notebooks.

    Attributes:
        config: the validated config.
        spark: the session (injected; never a global).
        stages: the built stages, in order.
        listeners: receivers of run/batch reports.
        clock: the wall clock (injected for tests).
        write_retry: the retry operator for the batch's table writes; None builds
            :meth:`RetryWithToleranceOperator.for_writes` from ``errors.retry.*``.
        error_policy: handlers and tolerance (:mod:`quarantine.errorhandling.policy`); None builds
            it from the config on first use (:func:`~quarantine.assemble.assemble` builds it up
            front, so a bad handler path fails before any data is read).
        keys: the quarantine table's encryption keys, read where they are kept; None reads them on
            first use (:meth:`key_ring`).
    """

    config: PipelineConfig
    spark: SparkSession
    stages: list[Stage]
    listeners: list[RunListener] = field(default_factory=list)
    clock: Callable[[], dt.datetime] = _utcnow
    write_retry: RetryWithToleranceOperator | None = None
    error_policy: ErrorPolicy | None = None
    keys: KeyRing | None = None

    # ------------------------------------------------------------------ building

    def with_stages(self, stages: Sequence[Stage]) -> Self:
        """A copy of this pipeline running ``stages`` instead."""
        return replace(self, stages=list(stages))

    @property
    def quarantine_table(self) -> str:
        return self.config.errors.dlq_table_name

    @property
    def target_table(self) -> str:
        return self.config.target.table

    @property
    def write_operator(self) -> RetryWithToleranceOperator:
        """The retry operator of the plan's table writes: :attr:`write_retry`, else ``errors.retry.*``'s
        (:meth:`RetryWithToleranceOperator.for_writes`)."""
        return self.write_retry or RetryWithToleranceOperator.for_writes(self.config.errors)

    # ------------------------------------------------------------------ pure parts

    def chain(self, df: DataFrame) -> list[Stage]:
        """The stages a frame runs through: :class:`SourceCheck` first when ``df`` was identified
        (unless ``errors.coordinates.reused: process``)."""
        if VARIANTS not in df.columns or self.config.errors.coordinates_reused is ReusedCoordinates.PROCESS:
            return list(self.stages)
        return [SourceCheck(reads_reused=REUSED in df.columns), *self.stages]

    def transform(self, df: DataFrame) -> DataFrame:
        """Apply the stages: ``df`` plus one result column per stage (no I/O).

        Raises:
            ConfigError: Spark cannot analyse a stage (an ``expr`` rule naming a column the
                row does not have…), named by the stage's config key (``stages[2].options.rules[1].expr``).
        """
        try:
            return apply_stages(
                df, self.chain(df),
                stacktrace=self.config.errors.dlq_context_stacktrace_enable,
                retry=RetryPolicy.from_config(self.config.errors),
            )
        except StageAnalysisError as exc:
            index = next((s.index for s in self.config.stages if s.name == exc.stage), None)
            if index is None:  # a stage built in Python (with_stages): named by its name
                raise
            raise exc.keyed(index) from exc

    def split_frame(self, df: DataFrame) -> DataFrame:
        """The staged batch, projected to what the two writes need.

        Columns: the source coordinates, the raw ``key``/``value``/``headers``
        (only for failed rows — good rows do not need them, which keeps the
        persisted batch small), the chain's result ``_q_result`` and error ``_q_error``,
        ``_q_open`` (the record is open in quarantine) and the record's content
        fingerprint ``_q_fingerprint``.
        """
        staged = self.transform(df)
        chain = self.chain(df)
        err = final_error(chain)
        # a judging stage's breach (on_breach=quarantine_batch) may send every row to quarantine
        failed = err.isNotNull() | F.lit(keeps_raw_bytes(chain))
        return staged.select(
            TOPIC, PARTITION, OFFSET, TIMESTAMP, TIMESTAMP_TYPE,
            F.when(failed, F.col(KEY)).alias(KEY),
            F.when(failed, F.col(VALUE)).alias(VALUE),
            F.when(failed, F.col(HEADERS)).alias(HEADERS),
            final_result(chain).alias(RESULT),
            err.alias(ERROR),
            (F.col(OPEN) if OPEN in df.columns else F.lit(False)).alias(OPEN),
            (F.col(FINGERPRINT) if FINGERPRINT in df.columns else fingerprint()).alias(FINGERPRINT),
            *retry_column_names(chain),  # retried successes, for total-retries (metrics/)
            *drift_column_names(chain),  # undeclared fields, for schema-drift-records (metrics/)
            *carried_columns(chain),  # judging stages' input, for their verdicts (batch/verdict.py)
        )

    def stage_stream(self, stream: DataFrame) -> DataFrame | None:
        """A Kafka stream's :meth:`split_frame`, built once for the query (None: stage per batch).

        Building the staged plan takes thousands of Py4J calls (every stage's
        expressions, every error message); on the streaming DataFrame that is
        once per query instead of once per micro-batch. Only for Kafka sources,
        whose micro-batches need no :func:`~quarantine.batch.settle.prepare` (offsets are new, coordinates
        unique); other streams are identified per batch first, and so is a stream with
        a stage that counts over the batch (``unique``: :class:`BatchWideStageError`)
        or a stage that may be refreshed between micro-batches (:meth:`refresh`: an
        ``avro`` stage reading a registry), so that a refreshed stage runs from the next one.
        """
        if self.config.source.format is not SourceFormat.KAFKA or any(s.refreshes() for s in self.stages):
            return None
        try:
            return self.split_frame(stream)
        except BatchWideStageError:  # a stage counts over the batch (unique): per micro-batch
            return None

    def target_rows(self, split: DataFrame, *, result_type: DataType | None = None) -> DataFrame:
        """Good rows in the target's shape (:func:`quarantine.schema.target_columns`): the last stage's
        result (a struct's fields, or one column named after the stage) + the source coordinates.

        ``result_type``: the type of ``split``'s result column, when the caller knows it (None:
        ``split`` is analysed for it; a declarative pipeline's query function may not)."""
        from pyspark.sql.types import StructType

        res_type = split.schema[RESULT].dataType if result_type is None else result_type

        columns = target_columns(res_type, self.stages[-1].name)
        if isinstance(res_type, StructType):
            payload = [F.col(f"{RESULT}.{f.name}").alias(f.name) for f in columns.fields]
        else:
            payload = [F.col(RESULT).alias(f.name) for f in columns.fields]
        extra: list[Column] = []
        if self.config.target.source_columns:
            extra = [
                F.col(TOPIC).alias(TARGET_TOPIC),
                F.col(PARTITION).alias(TARGET_PARTITION),
                F.col(OFFSET).alias(TARGET_OFFSET),
                F.col(TIMESTAMP).alias(TARGET_TIMESTAMP),
                F.col(FINGERPRINT).alias(TARGET_FINGERPRINT),
            ]
        return split.where(F.col(ERROR).isNull()).select(*payload, *extra)

    def quarantine_writer(self, retry: RetryWithToleranceOperator | None = None) -> QuarantineWriter:
        """The pipeline's quarantine writer (its batches and its errant record reporters use it).

        Args:
            retry: the write retry operator; by default :attr:`write_operator`.
        """
        cfg = self.config
        return QuarantineWriter(
            spark=self.spark,
            table=self.quarantine_table,
            pipeline=cfg.pipeline,
            retry=retry or self.write_operator,
            secrets=cfg.secrets(),
            stacktrace=cfg.errors.dlq_context_stacktrace_enable,
            keys=self.key_ring(),
        )

    def error_reporters(self) -> tuple[ErrorReporter, ...]:
        """Where failed records are reported after the quarantine write, in order: the DLQ topic
        (``errors.deadletterqueue.topic.*``), if one is set, then the error-context log (``errors.log.*``).

        Built from the config each time it is called (once per batch written): the secrets masked
        are those the process holds then.
        """
        cfg = self.config
        topic = dlq_topic(cfg)
        log = ErrorContextLogger.from_config(cfg.errors, config=cfg.redacted(), secrets=cfg.secrets())
        return (log,) if topic is None else (topic, log)

    def key_ring(self) -> KeyRing:
        """The quarantine table's encryption keys (``errors.deadletterqueue.encryption.*``), read once.

        Raises:
            ConfigError: a key that is set has not 16, 24 or 32 bytes.
        """
        if self.keys is None:
            self.keys = KeyRing.from_errors(self.config.errors)
        return self.keys

    def policy(self) -> ErrorPolicy:
        """The pipeline's :class:`~quarantine.errorhandling.policy.ErrorPolicy` (built on first use)."""
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


def refuse_pipeline_tables(plan: Plan, command: str) -> None:
    """Raise :class:`ConfigError` when ``plan``'s tables are a declarative pipeline's
    (``target.written_by: pipeline``): ``command`` would write them beside its runtime."""
    if plan.config.target.written_by is WrittenBy.PIPELINE:
        raise ConfigError("target.written_by", "pipeline", f"job for {command}: a declarative pipeline's "
                          "updates write this config's tables (spark-pipelines run, or the Lakeflow "
                          "pipeline); quarantine replay queues records for its next update")
