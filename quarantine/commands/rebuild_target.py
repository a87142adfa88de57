"""``quarantine rebuild-target``: a new target from the source and the quarantine table's replayed records."""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--dry-run", action="store_true", help="say what a rebuild would do; write nothing")


def _handle(call: Invocation) -> int:
    """Rebuild the config's target (``--dry-run``: say what a rebuild would do, with no listeners)."""
    from quarantine.commands.configured import load
    from quarantine.ops.rebuild import rebuild_target
    from quarantine.pipeline import Pipeline

    dry_run = call.args.dry_run
    pipeline = Pipeline.from_config(load(call), listeners=[] if dry_run else None)
    print(rebuild_target(pipeline, dry_run=dry_run).render())
    return 0


COMMAND = Command(
    help="write a new target from the source and the quarantine table's replayed records",
    examples=(
        "quarantine rebuild-target --conf data/demo/orders_demo.yml --dry-run",
        "quarantine rebuild-target --conf data/demo/orders_demo.yml",
    ),
    arguments=_arguments,
    handle=_handle,
)
