"""``quarantine discard``: open quarantine rows marked discarded, with the reason (kept, not deleted).

The second handler of ``discard`` (:data:`quarantine.cli.HANDLERS`): a dry run over path tables
is answered without a JVM first (:mod:`quarantine.commands.discard_local`).
"""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard, preview_discard

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Discard the open rows ``--where`` selects, with ``--reason``; ``--dry-run`` says which it would."""
    config = load(call)
    if call.args.dry_run:
        print(preview_discard(Pipeline.from_config(config, listeners=[]), call.args.where).discard_lines())
        return 0
    n = discard(Pipeline.from_config(config), call.args.where, call.args.reason)
    print(f"discarded {n:,} open record(s) (run_kind discard)")
    return 0
