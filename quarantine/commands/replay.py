"""``quarantine replay``: open quarantine rows through the current stages (or queued, or previewed)."""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import predicate
from quarantine.config import WrittenBy
from quarantine.declarative.replay_queue import queue_replay
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import preview_replay, replay

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Replay the rows ``--where`` selects (all open ones without it); ``--dry-run`` says what it would do.

    A declarative pipeline's target (``target.written_by: pipeline``) is written by the
    pipeline's next update: the rows are queued for it instead.
    """
    config = load(call)
    where = predicate(call.args.where)
    if call.args.dry_run:
        print(preview_replay(Pipeline.from_config(config, listeners=[]), where).render())
    elif config.target.written_by is WrittenBy.PIPELINE:
        print(queue_replay(Pipeline.from_config(config, listeners=[]), where).render())
    else:
        print(replay(Pipeline.from_config(config), where).render())
    return 0
