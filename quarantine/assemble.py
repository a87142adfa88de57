"""Assembling a plan from a config: the session, the stages, the listeners, the error policy.

What a run needs before it reads a record is built here, once, and checked as it is
built: a bad stage option, handler or source contract fails before anything is read or
written (the same checks without Spark are :func:`quarantine.preflight.check_config`'s).
The result is a :class:`~quarantine.batch.plan.Plan` (or the facade
:class:`~quarantine.pipeline.Pipeline`, which is one); the plan and the run below it
never build anything from the config themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import TypeVar

from pyspark.sql import SparkSession

from quarantine.alerts.listener import alert_listener
from quarantine.alerts.stuck import stuck_records
from quarantine.batch.plan import Plan
from quarantine.config import PipelineConfig
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.listeners.events import RunListener
from quarantine.listeners.metrics_table import metrics_listener
from quarantine.listeners.mlflow import tracker_for
from quarantine.secret_refs import SecretScopes
from quarantine.spark.runtime import check_runtime
from quarantine.spark.session import get_spark
from quarantine.stage import Stage
from quarantine.stages import build_stages

__all__ = ["assemble", "default_listeners"]

P = TypeVar("P", bound=Plan)


def assemble(
    kind: type[P],
    config: PipelineConfig,
    spark: SparkSession | None = None,
    *,
    listeners: Iterable[RunListener] | None = None,
    stages: Sequence[Stage] | None = None,
) -> P:
    """A ``kind`` (a :class:`Plan`, or a subclass) for ``config``, its stages built and its policy too.

    Args:
        kind: the class to build (:class:`~quarantine.pipeline.Pipeline` for a run).
        config: the validated config.
        spark: the session; by default the cluster's on Databricks, a local one elsewhere
            (:func:`quarantine.spark.session.get_spark`, with ``spark.conf`` applied).
        listeners: the run listeners; by default :func:`default_listeners`.
        stages: stages built in Python (notebooks); by default the config's ``stages:``.

    Raises:
        ConfigError: a stage option, an error handler or an encryption key is bad (before anything
            is read or written).
        QuarantineError: the session's Spark or this Python is outside the support
            matrix (:func:`quarantine.spark.runtime.check_runtime`), before anything is read or written.
    """
    spark = spark or get_spark(f"quarantine:{config.pipeline}", config.spark_conf)
    check_runtime(spark.version)
    built = list(stages) if stages is not None else build_stages(config.stages)
    plan = kind(
        config=config,
        spark=spark,
        stages=built,
        listeners=list(listeners) if listeners is not None else default_listeners(config, spark),
    )
    plan.error_policy = plan.policy()  # built up front: a bad handler path fails before any data is read
    plan.keys = plan.key_ring()  # read once, up front: a key of the wrong size fails before any data is read
    return plan


def default_listeners(
    config: PipelineConfig, spark: SparkSession, *, scopes: SecretScopes | None = None
) -> list[RunListener]:
    """The listeners a config asks for: the metrics table, MLflow, the alert channels.

    Args:
        config: the validated config.
        spark: the session.
        scopes: where the alert channels' ``{{secrets/<scope>/<key>}}`` are read (default:
            the Databricks SDK's ``dbutils.secrets``; :mod:`quarantine.secret_refs`).

    Raises:
        ConfigError: an alert channel's secret reference could not be resolved.
    """
    metrics = metrics_listener(config, spark)
    alerts = alert_listener(
        config.alerts,
        secrets=config.secrets(),
        conf=config.file,
        streaming=config.source.streaming,
        retry=RetryPolicy.from_config(config.errors),
        stuck_query=partial(stuck_records, spark, config.errors.dlq_table_name),
        record=metrics.append_run_rows,
        scopes=scopes,
    )
    return [metrics, tracker_for(config), alerts]
