"""``quarantine stats``: quarantined records counted by status, stage and error class, and per topic partition."""

from __future__ import annotations

import argparse

from quarantine.commands.inspect import add_pipeline_filter, pipeline_filter
from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_json

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "the pipeline config (YAML): its tables and pipeline")
    add_pipeline_filter(parser)
    add_json(parser)


def _handle(call: Invocation) -> int:
    """Print the counts of :func:`quarantine.ops.reads.stats_tables`, as tables or JSON; exit code 0.

    Raises:
        QuarantineError: the quarantine table does not exist yet.
    """
    from quarantine.commands.configured import load
    from quarantine.ops.reads import answer, stats_tables
    from quarantine.ops.triage_output import print_stats

    config = load(call)
    pipeline = pipeline_filter(call.args.pipeline, config.pipeline)
    tables = answer(config, ("quarantine",), lambda reads: stats_tables(reads, pipeline), app="stats")
    print_stats(tables, pipeline, as_json=call.args.json)
    return 0


COMMAND = Command(
    help="count quarantined records by status, stage and error class, and per topic partition",
    examples=("quarantine stats --conf data/demo/orders_demo.yml",),
    arguments=_arguments,
    handle=_handle,
)
