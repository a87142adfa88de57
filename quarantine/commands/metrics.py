"""``quarantine metrics``: a declarative pipeline's counts, written to its metrics table after an update."""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "the declarative pipeline's config (YAML), with metrics.table")


def _handle(call: Invocation) -> int:
    """Record the batches the pipeline's tables hold that its metrics table does not yet."""
    from quarantine.commands.configured import load
    from quarantine.declarative.metrics import record_pipeline_metrics
    from quarantine.spark.session import get_spark

    config = load(call)
    spark = get_spark(f"quarantine:metrics:{config.pipeline}", config.spark_conf)
    n = record_pipeline_metrics(spark, config)
    print(f"recorded {n:,} new batch(es) of pipeline {config.pipeline} in {config.metrics.table}")
    return 0


COMMAND = Command(
    help="write a declarative pipeline's counts to its metrics table (after an update)",
    examples=("quarantine metrics --conf pipelines/orders/orders.yml",),
    arguments=_arguments,
    handle=_handle,
)
