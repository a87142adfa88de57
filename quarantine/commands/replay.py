"""``quarantine replay``: open quarantine rows through the current stages (or queued, or previewed) on Spark.

The second handler of ``replay`` (:data:`quarantine.cli.HANDLERS`): a dry run over path
tables has its selection counted without a JVM first (:mod:`quarantine.commands.replay_local`),
which then calls :func:`dry_run_outcomes` here for the part that runs the stages.
"""

from __future__ import annotations

import sys

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import predicate
from quarantine.config import PipelineConfig, WrittenBy
from quarantine.declarative.replay_queue import queue_replay
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import preview_replay, replay, select_replay

__all__ = ["dry_run_outcomes", "handle"]


def handle(call: Invocation) -> int:
    """Replay the rows ``--where`` selects (all open ones without it); ``--dry-run`` says what it would do.

    A dry run prints the selection (the open rows, by their quarantined failure), then, when
    it selected any, what the current stages would do with them. A declarative pipeline's
    target (``target.written_by: pipeline``) is written by the pipeline's next update: the
    rows are queued for it instead.
    """
    config = load(call)
    where = predicate(call.args.where)
    if call.args.dry_run:
        pipe = Pipeline.from_config(config, listeners=[])
        selection = select_replay(pipe, where)
        print(selection.render(), flush=True)
        if selection.selected:
            print(preview_replay(pipe, where).render())
    elif config.target.written_by is WrittenBy.PIPELINE:
        print(queue_replay(Pipeline.from_config(config, listeners=[]), where).render())
    else:
        print(replay(Pipeline.from_config(config), where).render())
    return 0


def dry_run_outcomes(config: PipelineConfig, where: str | None) -> str:
    """A dry run's second part on Spark: what the current stages would do with the selected open rows."""
    sys.stdout.flush()  # the selection is out before the JVM starts
    return preview_replay(Pipeline.from_config(config, listeners=[]), where).render()
