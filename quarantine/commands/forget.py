"""``quarantine forget``: matching quarantine rows erased of their bytes and words, identity kept; ``--purge``."""

from __future__ import annotations

from dataclasses import replace

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import predicate
from quarantine.ops.forget import forget, parse_key, purge, purge_retention
from quarantine.pipeline import Pipeline

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Forget the rows ``--where``/``--key``/``--all`` name; ``--dry-run`` counts them; ``--purge`` then removes
    the bytes older versions of the table hold, and says when they are gone."""
    args = call.args
    config = load(call)
    key = parse_key(args.key) if args.key is not None else None  # a bad --key is said before Spark starts
    plan = Pipeline.from_config(config, listeners=[])
    hours = purge_retention(plan, args.retain_hours) if args.purge and not args.dry_run else None  # before erasing
    result = forget(plan, where=predicate(args.where), key=key, everything=args.all,
                    reason=(args.reason or "").strip() or "on request", dry_run=args.dry_run)
    if args.purge and not args.dry_run:
        result = replace(result, purge=purge(plan, hours=hours))
    print(result.render())
    return 0
