"""``quarantine discard``: open quarantine rows marked discarded, with the reason (kept, not deleted).

A dry run is ``replay --dry-run``'s selection (:func:`quarantine.ops.reads.replay_selection`:
the pipeline's open rows ``--where`` selects, by their quarantined stage and error class, on
DuckDB over path tables, no JVM) said as what a discard would close
(:meth:`~quarantine.dry_run.ReplaySelection.discard_lines`); that is its whole answer.
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--where", required=True, help="SQL predicate over quarantine columns")
    parser.add_argument("--reason", default=None, help="why, kept in the rows' resolution (not needed with --dry-run)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be discarded; write nothing")


def _handle(call: Invocation) -> int:
    """Discard the open rows ``--where`` selects, with ``--reason``; ``--dry-run`` says which it would."""
    if not call.args.where.strip():
        call.usage_error("discard needs a --where predicate; refusing to discard every open row")
    if not call.args.dry_run and not (call.args.reason or "").strip():
        call.usage_error("discard needs --reason: why, kept in each discarded row's resolution (--dry-run does not)")
    from quarantine.commands.configured import load

    config = load(call)
    if call.args.dry_run:
        from quarantine.keyring import KeyRing
        from quarantine.ops.reads import answer, replay_selection

        where = call.args.where
        keys = KeyRing.from_errors(config.errors)
        selection = answer(config, ("quarantine",),
                           lambda reads: replay_selection(reads, config.pipeline, where, keys),
                           app=f"discard:{config.pipeline}")
        print(selection.discard_lines())
        return 0
    from quarantine.pipeline import Pipeline
    from quarantine.runners.replay import discard

    n = discard(Pipeline.from_config(config), call.args.where, call.args.reason)
    print(f"discarded {n:,} open record(s) (run_kind discard)")
    return 0


COMMAND = Command(
    help="mark open quarantine rows as discarded (kept, with the reason)",
    examples=(
        "quarantine discard --conf data/demo/orders_demo.yml --where \"error_class = 'InvalidUtf8'\" "
        "--reason \"producer bug, resent\"",
        "quarantine discard --conf data/demo/orders_demo.yml --where \"stage = 'decode'\" --dry-run",
    ),
    arguments=_arguments,
    handle=_handle,
)
