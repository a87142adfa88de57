"""``quarantine forget``: matching quarantine rows erased of their bytes and words, identity kept; ``--purge``.

The erasure is :func:`quarantine.ops.forget.forget` (on Spark: it rewrites the rows); ``--purge``
then removes the bytes older versions of the table hold (:func:`quarantine.ops.forget.purge`)
and says when they are gone.
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_pipeline_guard, predicate

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--where", default=None, help="SQL predicate over quarantine columns (open or closed rows)")
    parser.add_argument("--key", default=None, metavar="KEY",
                        help="only rows whose record key is KEY: its text, or hex:<hex digits> for its bytes")
    parser.add_argument("--all", action="store_true",
                        help="every row of the pipeline, or a --where that matches them all (refused without it)")
    parser.add_argument("--reason", default=None, help="kept in the resolution of the open rows it closes")
    parser.add_argument("--dry-run", action="store_true", help="count the rows it would erase; write nothing")
    parser.add_argument("--purge", action="store_true",
                        help="then REORG (deletion vectors) and VACUUM the table; say when the old bytes are gone")
    parser.add_argument("--retain-hours", type=float, default=None, metavar="HOURS",
                        help="--purge's VACUUM retention (default: errors.deadletterqueue.vacuum.retention.hours); "
                             "below the table's only with spark.databricks.delta.retentionDurationCheck.enabled=false")
    add_pipeline_guard(parser)


def _handle(call: Invocation) -> int:
    """Forget the rows ``--where``/``--key``/``--all`` name; ``--dry-run`` counts them; ``--purge`` then removes
    the bytes older versions of the table hold, and says when they are gone; exit code 0.

    Raises:
        ConfigError: a bad ``--key`` (before Spark starts), ``--where`` or retention; no selection;
            a selection of every row without ``--all``.
    """
    from dataclasses import replace

    from quarantine.commands.configured import load
    from quarantine.ops.forget import forget, parse_key, purge, purge_retention
    from quarantine.pipeline import Pipeline

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


COMMAND = Command(
    help="erase the bytes and messages of the quarantine rows an erasure request names (identity kept)",
    examples=(
        "quarantine forget --conf data/demo/orders_demo.yml --key customer-42 --dry-run",
        "quarantine forget --conf data/demo/orders_demo.yml --where \"offset IN (17, 18)\" "
        "--reason \"request 2026-113\" --purge",
    ),
    arguments=_arguments,
    handle=_handle,
)
