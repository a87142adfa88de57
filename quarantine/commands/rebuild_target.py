"""``quarantine rebuild-target``: a new target from the source and the quarantine table's replayed records."""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.ops.rebuild import rebuild_target
from quarantine.pipeline import Pipeline

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Rebuild the config's target (``--dry-run``: say what a rebuild would do, with no listeners)."""
    dry_run = call.args.dry_run
    pipeline = Pipeline.from_config(load(call), listeners=[] if dry_run else None)
    print(rebuild_target(pipeline, dry_run=dry_run).render())
    return 0
