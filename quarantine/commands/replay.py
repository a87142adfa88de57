"""``quarantine replay``: open quarantine rows through the current stages (or queued, or previewed).

A dry run prints its selection first (the open rows ``--where`` selects, by their quarantined
failure: :func:`quarantine.ops.reads.replay_selection`, on DuckDB over path tables, no JVM),
then, when it selected any, what the current stages would do with them (on Spark).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_pipeline_guard, predicate

if TYPE_CHECKING:
    from quarantine.config import PipelineConfig

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--where", default=None, help="SQL predicate over quarantine columns (empty: every open row)")
    add_pipeline_guard(parser)
    parser.add_argument("--dry-run", action="store_true", help="say what would be replayed and how; write nothing")


def _handle(call: Invocation) -> int:
    """Replay the rows ``--where`` selects (all open ones without it); ``--dry-run`` says what it would do.

    A declarative pipeline's target (``target.written_by: pipeline``) is written by the
    pipeline's next update: the rows are queued for it instead.
    """
    from quarantine.commands.configured import load

    config = load(call)
    where = predicate(call.args.where)
    if call.args.dry_run:
        return _dry_run(config, where)
    from quarantine.config import WrittenBy
    from quarantine.declarative.replay_queue import queue_replay
    from quarantine.pipeline import Pipeline
    from quarantine.runners.replay import replay

    if config.target.written_by is WrittenBy.PIPELINE:
        print(queue_replay(Pipeline.from_config(config, listeners=[]), where).render())
    else:
        print(replay(Pipeline.from_config(config), where).render())
    return 0


def _dry_run(config: PipelineConfig, where: str | None) -> int:
    """Print the selection (whichever engine reads it), then, when it is not empty, its outcomes on Spark."""
    from quarantine.keyring import KeyRing
    from quarantine.ops.reads import answer, replay_selection

    config.target.require_source_columns()
    keys = KeyRing.from_errors(config.errors)
    selection = answer(config, ("quarantine",), lambda reads: replay_selection(reads, config.pipeline, where, keys),
                       app=f"replay:{config.pipeline}", read_only=False)
    print(selection.render(), flush=True)  # out before a JVM starts
    if selection.selected:
        from quarantine.pipeline import Pipeline
        from quarantine.runners.replay import preview_replay

        print(preview_replay(Pipeline.from_config(config, listeners=[]), where).render())
    return 0


COMMAND = Command(
    help="re-run open quarantine rows through the current stages",
    examples=(
        "quarantine replay --conf data/demo/orders_demo.yml",
        "quarantine replay --conf data/demo/orders_demo.yml --where \"stage = 'parse_order'\"",
        "quarantine replay --conf data/demo/orders_demo.yml --dry-run",
    ),
    arguments=_arguments,
    handle=_handle,
)
