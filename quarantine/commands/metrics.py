"""``quarantine metrics``: a declarative pipeline's counts, written to its metrics table after an update."""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.declarative.metrics import record_pipeline_metrics
from quarantine.spark.session import get_spark

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Record the batches the pipeline's tables hold that its metrics table does not yet."""
    config = load(call)
    spark = get_spark(f"quarantine:metrics:{config.pipeline}", config.spark_conf)
    n = record_pipeline_metrics(spark, config)
    print(f"recorded {n:,} new batch(es) of pipeline {config.pipeline} in {config.metrics.table}")
    return 0
