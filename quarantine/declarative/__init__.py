"""A pipeline's stages inside a declarative pipeline: one staged view, a target table, a quarantine table.

Spark Declarative Pipelines (``pyspark.pipelines``, the ``spark-pipelines`` command, Spark
4.1) and Databricks' Lakeflow Declarative Pipelines run a source file that declares
datasets; the runtime owns the writes, their checkpoints and exactly-once. :func:`declare`,
called from such a file, declares for one config (the same YAML a job runs):

* a temporary view ``<pipeline>_staged``: the source read as a stream (a Kafka topic, or a
  Kafka-shaped Delta table), every stage's result-or-error column, the record's content
  fingerprint;
* a streaming table for the good rows, named by ``target.table``, with the columns a job's
  target gets (the final result's fields and the ``_source_*`` coordinates);
* a streaming table for the failed rows, named by ``errors.deadletterqueue.table.name``, with
  the quarantine table's columns: the raw key, value and headers byte for byte, the
  coordinates, the error (stage, kind, class, message, redacted as a job redacts it), status
  ``open``, and the fingerprint. ``quarantine inspect``, ``stats``, the SQL library and
  ``report`` read it as they read a job's.

The dataset functions return DataFrames and run no action; they set no session setting,
register no view or function (the runtime forbids it), and may be evaluated several times.
What a job does and a pipeline cannot, :func:`check_declarable` refuses at load, naming why:
count and rate limits of ``errors.tolerance`` (they need a batch's counts), a stage that
judges a whole batch (a suite's batch-level expectations), and tables named by a path (a
pipeline's datasets are catalog tables). ``errors.tolerance: none`` fails the update at the
first failed record, naming its stage and coordinates.

What differs from a job, on purpose: the quarantine table is appended by the runtime, so a
record's row is written once per update that reads it and its status columns are not
updated inside the pipeline; metrics and MLflow runs are not written by the pipeline
(``quarantine stats`` and the metrics command read the quarantine table after an update).
Replay goes through the pipeline: ``quarantine replay`` appends records to the replay queue
(:mod:`quarantine.declarative.replay_queue`), and once that table exists :func:`declare` declares two
append flows that run it through the stages into the same two tables.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.assemble import assemble
from quarantine.batch.plan import Plan
from quarantine.columns import (
    ERROR,
    ERROR_CLASS,
    ERROR_HISTORY,
    FINGERPRINT,
    HISTORY_AT,
    MESSAGE,
    OFFSET,
    PARTITION,
    PIPELINE,
    RESULT,
    STAGE,
    TOPIC,
)
from quarantine.config import PipelineConfig, SourceFormat, Tolerance, WrittenBy, load_config
from quarantine.declarative.replay_queue import queue_table
from quarantine.errors import ConfigError, QuarantineError
from quarantine.identity import fingerprint
from quarantine.runners.streaming import read_stream
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.stage import JudgingStage

__all__ = [
    "SET_PREFIX", "DeclaredPipeline", "check_declarable", "declare", "pipeline_overrides", "quarantine_frame",
    "staged_frame", "staged_table", "target_frame",
]

#: ``run_id`` of the quarantine rows a pipeline writes (the update's id is the runtime's).
DECLARATIVE_RUN = "declarative"


@dataclass(frozen=True)
class DeclaredPipeline:
    """The datasets :func:`declare` declared, by name.

    Attributes:
        staged: the temporary view of the staged source.
        target: the streaming table of good rows.
        quarantine: the streaming table of failed rows.
    """

    staged: str
    target: str
    quarantine: str


def _table_name(key: str, value: str) -> str:
    if "/" in value or "://" in value:
        raise ConfigError(key, value, "a table name (catalog.schema.table or table): a declarative "
                                      "pipeline's datasets are tables in its catalog, not paths")
    return value


def check_declarable(plan: Plan) -> DeclaredPipeline:
    """The names of the datasets ``plan`` declares; refuses what a pipeline cannot do.

    Raises:
        ConfigError: an output a pipeline would not write is configured (a DLQ topic,
            MLflow; ``metrics.table`` is written by ``quarantine metrics`` after an update);
            a table is named by a path; ``errors.tolerance.limit`` or
            ``errors.tolerance.rate.limit`` is set (a limit needs a batch's counts, which a
            dataset function cannot take); a stage judges whole batches (a suite's
            batch-level expectations, which need an action over the batch).
    """
    cfg = plan.config
    errors = cfg.errors
    for key, value in (("errors.tolerance.limit", errors.tolerance_limit),
                       ("errors.tolerance.rate.limit", errors.tolerance_rate_limit)):
        if value >= 0:
            raise ConfigError(key, value, "unset (-1) in a declarative pipeline: a limit counts a batch's "
                                          "failures, and a dataset function runs no action; use tolerance "
                                          "none or all")
    # outputs a job writes and a pipeline would not: refused rather than silently left out
    unwritten: tuple[tuple[str, object, str], ...] = (
        ("errors.deadletterqueue.topic.name", errors.dlq_topic_name, "a DLQ topic is produced after the quarantine "
         "write, which the pipeline's runtime owns"),
        ("mlflow.enabled", cfg.mlflow.enabled or None, "MLflow runs are logged per batch by a job's listeners"),
    )
    for key, output, why in unwritten:
        if output:
            raise ConfigError(key, output, f"unset in a declarative pipeline: {why}")
    if cfg.target.written_by is not WrittenBy.PIPELINE:
        raise ConfigError("target.written_by", cfg.target.written_by.value, "pipeline in a declarative "
                          "pipeline's config: the pipeline's updates write its tables, so quarantine run "
                          "refuses it and quarantine replay queues records for the next update")
    for i, stage in enumerate(plan.stages):
        if isinstance(stage, JudgingStage):
            raise ConfigError(f"stages[{i}]", stage.name, "a stage that judges rows only in a declarative "
                                                          "pipeline: this one also judges whole batches "
                                                          "(batch-level expectations need an action)")
    if cfg.source.format is SourceFormat.PARQUET:
        raise ConfigError("source.format", "parquet", "kafka or delta in a declarative pipeline")
    return DeclaredPipeline(
        staged=f"{cfg.pipeline}_staged",
        target=_table_name("target.table", cfg.target.table),
        quarantine=_table_name("errors.deadletterqueue.table.name", errors.dlq_table_name),
    )


def staged_frame(plan: Plan, source: DataFrame, *, replay: bool = False) -> DataFrame:
    """``source`` (Kafka-shaped, a stream) through the stages: :meth:`Plan.split_frame`'s columns
    (pure: no action). Under ``errors.tolerance: none`` the frame fails at its first failed
    record, naming the stage, the error class and the record's coordinates; not a ``replay``'s
    frame (tolerance never acts on a replay, as in a job's replay)."""
    split = plan.split_frame(source)
    if plan.config.errors.tolerance is Tolerance.NONE and not replay:
        err = F.col(ERROR)
        message = F.concat(
            F.lit(f"quarantine: pipeline {plan.config.pipeline}: errors.tolerance is none and stage "),
            err.getField(STAGE), F.lit(" failed the record at "),
            F.col(TOPIC), F.lit("/"), F.col(PARTITION).cast("string"), F.lit("/"),
            F.col(OFFSET).cast("string"), F.lit(": "), err.getField(ERROR_CLASS), F.lit(": "),
            F.coalesce(err.getField(MESSAGE), F.lit("")),
        )
        # evaluated on every row, before anything filters on the error: a failed one raises
        split = split.where(F.when(err.isNotNull(), F.raise_error(message)).isNull())
    return split


def target_frame(plan: Plan, staged: DataFrame) -> DataFrame:
    """The good rows of ``staged`` in the target's shape (:meth:`Plan.target_rows`)."""
    return plan.target_rows(staged)


def quarantine_frame(plan: Plan, staged: DataFrame, *, fingerprint: bool | None = None) -> DataFrame:
    """The failed rows of ``staged`` as quarantine-table rows, their errors redacted as a job's
    are; the times are each row's write time (``current_timestamp()``), ``batch_id`` NULL.
    ``fingerprint``: whether ``staged`` has the fingerprint column (None: it is analysed)."""
    failed = staged.where(F.col(ERROR).isNotNull())
    rows = plan.quarantine_writer().rows(failed, run_id=DECLARATIVE_RUN, batch_id=0,
                                         now=dt.datetime(1970, 1, 1, tzinfo=dt.UTC), fingerprint=fingerprint)
    now = F.current_timestamp()
    history: Column = F.transform(ERROR_HISTORY, lambda h: h.withField(HISTORY_AT, now))
    return rows.withColumns({
        "error_history": history,
        "first_seen_at": now,
        "last_seen_at": now,
        "first_seen_date": F.to_date(F.convert_timezone(None, F.lit("UTC"), now)),  # the UTC date
        "batch_id": F.lit(None).cast("bigint"),
    })


def staged_table(
    plan: Plan, session: SparkSession, name: str, staged: DataFrame
) -> tuple[Callable[[], DataFrame], Callable[[], DataFrame], Callable[[], DataFrame]]:
    """The query functions of ``declare(..., staged="table")``: ``staged`` as a streaming table
    named ``name``, and the target's and the quarantine table's rows read from it as a stream.

    The stages run once per record and update, in the staged table's flow; the two tables'
    flows filter and project what it wrote. It keeps only the columns their rows are built
    from: the coordinates, the raw bytes (which :meth:`Plan.split_frame` keeps for failed rows
    only), the final result and error, the fingerprint. Its columns are known here, so the
    two flows' frames are built on the table's stream without analysing it: a query function
    may not, and the table does not exist before the first update."""
    query = staged.select(*KAFKA_SOURCE_SCHEMA.fieldNames(), RESULT, ERROR, FINGERPRINT)
    result_type = query.schema[RESULT].dataType

    def read() -> DataFrame:
        return session.readStream.table(name)

    return (lambda: query, lambda: plan.target_rows(read(), result_type=result_type),
            lambda: quarantine_frame(plan, read(), fingerprint=True))


def _pipelines_api() -> Any:
    """The runtime's declarative API: ``pyspark.pipelines`` (Spark 4.1, and Lakeflow where it
    offers it), else Databricks' ``dlt``."""
    try:
        from pyspark import pipelines

        return pipelines
    except ImportError:  # a Databricks runtime that offers only dlt
        try:
            import dlt  # type: ignore[import-not-found]
        except ImportError:
            raise QuarantineError(
                "a declarative pipeline needs Spark 4.1's pyspark.pipelines (pyspark 4.1.1 here is "
                "the local default) or Databricks' dlt; neither is importable in this Python"
            ) from None
        return dlt


def _read(plan: Plan, spark: SparkSession) -> DataFrame:
    """The source as a stream, each record's content fingerprint beside it."""
    return read_stream(spark, plan.config.source).withColumn(FINGERPRINT, fingerprint())


def _read_queue(plan: Plan, spark: SparkSession, queue: str) -> DataFrame:
    """This pipeline's rows of its replay queue as a stream of source records, fingerprinted."""
    rows = spark.readStream.table(queue).where(F.col(PIPELINE) == F.lit(plan.config.pipeline))
    return rows.select(*[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields]).withColumn(FINGERPRINT, fingerprint())


def _table(dp: Any, name: str, comment: str) -> Callable[..., Any]:
    """``dp.table`` for a streaming table in the session's default format: Delta on Databricks
    and on ``quarantine connect-server`` (``spark.sql.sources.default``). Not ``format="delta"``:
    with it, Spark 4.1's pipelines fail every update after the first on a Delta table
    (``DELTA_CANNOT_CHANGE_PROVIDER``: they re-set the reserved ``provider`` property)."""
    return dp.table(name=name, comment=comment)  # type: ignore[no-any-return]


#: A pipeline setting ``quarantine.set.<key>`` is the config override ``<key>`` (as ``--set``).
SET_PREFIX = "quarantine.set."


def pipeline_overrides(settings: Mapping[str, str]) -> dict[str, Any]:
    """The config overrides a pipeline's settings carry: ``quarantine.set.source.table: x`` is
    ``--set source.table=x`` (the value read as YAML, so ``null`` unsets a key)."""
    return {k[len(SET_PREFIX):]: yaml.safe_load(v) for k, v in settings.items() if k.startswith(SET_PREFIX)}


def declare(
    config: PipelineConfig | str | os.PathLike[str],
    *,
    spark: SparkSession | None = None,
    api: Any = None,
    overrides: Mapping[str, Any] | None = None,
    staged: str = "view",
) -> DeclaredPipeline:
    """Declare a config's staged view, target table and quarantine table in the current pipeline.

    Call it at the top level of a pipeline source file::

        from quarantine.declarative import declare
        declare("orders.yml")   # a path is read from the pipeline's root folder

    Args:
        config: a loaded config, or the path of its YAML file.
        spark: the pipeline's session (default: the active one).
        api: the declarative API (default ``pyspark.pipelines``, else ``dlt``): a test's stand-in.
        overrides: config keys to set, as ``--set`` does, on top of the pipeline's
            ``quarantine.set.<key>`` settings (a bundle's pipeline ``configuration``).
        staged: ``view``: a temporary view, inlined into both tables' flows (the source is
            read and the stages run twice per update); ``table``: a streaming table that both
            tables' flows read (:func:`staged_table`: the stages run once; the table keeps
            every record's result or error, and a failed record's raw bytes).

    Returns:
        The declared datasets' names.

    Raises:
        ConfigError: the config asks for what a pipeline cannot do (:func:`check_declarable`),
            or a stage option is bad, before anything is declared.
    """
    session = spark or SparkSession.active()
    if isinstance(config, PipelineConfig):
        cfg = config
    else:
        sets = {**pipeline_overrides(session.conf.getAll), **(overrides or {})}
        cfg = load_config(Path(config), sets or None)
    plan = assemble(Plan, cfg, session, listeners=[])
    names = check_declarable(plan)
    dp = api or _pipelines_api()

    # Built here, at the source file's top level: building them reads the source's schema and
    # the stages' types (analysis), which the runtime forbids inside a query function. The
    # query functions return these frames, as often as the runtime asks.
    staged_df = staged_frame(plan, _read(plan, session))
    target_df = target_frame(plan, staged_df)
    quarantine_df = quarantine_frame(plan, staged_df)

    def staged_rows() -> DataFrame:
        return staged_df

    def good() -> DataFrame:
        return target_df

    def bad() -> DataFrame:
        return quarantine_df

    staged_dataset = dp.temporary_view
    if staged == "table":  # the stages once per record: the two tables read a staged table
        staged_dataset = dp.table
        staged_rows, good, bad = staged_table(plan, session, names.staged, staged_df)
    elif staged != "view":
        raise ConfigError("staged", staged, "view or table")
    declared: list[tuple[Callable[..., Any], Callable[[], DataFrame]]] = [
        (staged_dataset(name=names.staged, comment=f"quarantine {cfg.pipeline}: the staged source"), staged_rows),
        (_table(dp, names.target, f"quarantine {cfg.pipeline}: good rows"), good),
        (_table(dp, names.quarantine, f"quarantine {cfg.pipeline}: failed records, raw bytes"), bad),
    ]
    queue = queue_table(cfg)
    if session.catalog.tableExists(queue):  # quarantine replay queued records: two flows read them
        replay_staged = staged_frame(plan, _read_queue(plan, session, queue), replay=True)
        replay_target, replay_quarantine = target_frame(plan, replay_staged), quarantine_frame(plan, replay_staged)

        def replayed_good() -> DataFrame:
            return replay_target

        def replayed_bad() -> DataFrame:
            return replay_quarantine

        declared += [
            (dp.append_flow(target=names.target, name=f"{names.target}_replay"), replayed_good),
            (dp.append_flow(target=names.quarantine, name=f"{names.quarantine}_replay"), replayed_bad),
        ]
    for decorator, function in declared:
        decorator(function)
    return names
