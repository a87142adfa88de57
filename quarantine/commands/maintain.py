"""``quarantine maintain``: old closed quarantine rows stripped of their bytes, then OPTIMIZE and VACUUM."""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_pipeline_guard

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    add_pipeline_guard(parser)


def _handle(call: Invocation) -> int:
    """Maintain the config's quarantine table; print what was done."""
    from quarantine.commands.configured import load
    from quarantine.ops.maintain import maintain
    from quarantine.spark.session import get_spark

    config = load(call)
    print(maintain(get_spark(f"quarantine:maintain:{config.pipeline}", config.spark_conf), config).render())
    return 0


COMMAND = Command(
    help="strip old replayed/discarded quarantine rows of their bytes, then OPTIMIZE and VACUUM the table",
    examples=(
        "quarantine maintain --conf data/demo/orders_demo.yml",
        "quarantine maintain --conf data/demo/orders_demo.yml --set errors.deadletterqueue.retention.days=90",
    ),
    arguments=_arguments,
    handle=_handle,
)
