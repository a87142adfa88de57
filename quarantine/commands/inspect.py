"""``quarantine inspect``: quarantined records, payloads decoded (UTF-8, else hex).

The read is :func:`quarantine.ops.reads.inspect_records` (DuckDB over path tables, else
Spark); the output is :mod:`quarantine.ops.triage_output`'s.
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_json, parse_time

__all__ = ["COMMAND", "add_pipeline_filter", "pipeline_filter"]


def add_pipeline_filter(parser: argparse.ArgumentParser) -> None:
    """``--pipeline``: whose rows to show (:func:`pipeline_filter`)."""
    parser.add_argument("--pipeline", default=None,
                        help="the pipeline whose rows to show (default: the config's; '' for every pipeline)")


def pipeline_filter(pipeline: str | None, configured: str) -> str | None:
    """The pipeline whose rows are shown: ``--pipeline``, else the config's; ``''`` is every one (None)."""
    if pipeline is None:
        return configured
    return pipeline or None


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "the pipeline config (YAML): its tables and pipeline")
    add_pipeline_filter(parser)
    parser.add_argument("--stage", default=None, help="only records that failed in this stage")
    # quarantine.columns.QuarantineStatus.OPEN: a unit test holds them equal (the parser imports no more than it needs)
    parser.add_argument("--status", default="open", help="open (default), replayed, discarded or all")
    parser.add_argument("--error-class", default=None, help="only records with this error class")
    parser.add_argument("--since", default=None, metavar="TIME",
                        help="only records last seen at or after TIME (2026-11-25, 2026-11-25T10:00, or 24h, 7d)")
    parser.add_argument("--until", default=None, metavar="TIME", help="only records last seen before TIME")
    parser.add_argument("--limit", type=int, default=20, help="at most this many records (default 20)")
    add_json(parser)


def _handle(call: Invocation) -> int:
    """Print the records the options select, as a table or JSON; exit code 0.

    Raises:
        ConfigError: bad options or config (before any table is read).
        QuarantineError: the quarantine table does not exist yet.
    """
    from quarantine.commands.configured import load
    from quarantine.display import print_json
    from quarantine.keyring import KeyRing
    from quarantine.ops.reads import answer, inspect_records
    from quarantine.ops.triage_output import RecordFilter, print_records, record_title

    args = call.args
    config = load(call)
    f = RecordFilter(
        pipeline=pipeline_filter(args.pipeline, config.pipeline), status=args.status, stage=args.stage,
        error_class=args.error_class, since=parse_time(args.since, "--since") if args.since else None,
        until=parse_time(args.until, "--until") if args.until else None, limit=args.limit,
    )
    keys = KeyRing.from_errors(config.errors)
    records = answer(config, ("quarantine",), lambda reads: inspect_records(reads, f, keys), app="inspect")
    if args.json:
        print_json(records)
    else:
        print_records(record_title(f, config.errors.dlq_table_name), records)
    return 0


COMMAND = Command(
    help="show quarantined records, payloads decoded (UTF-8, else hex)",
    examples=(
        "quarantine inspect --conf data/demo/orders_demo.yml --stage parse_order --limit 5",
        "quarantine inspect --conf data/demo/orders_demo.yml --status all --since 24h --json",
    ),
    arguments=_arguments,
    handle=_handle,
)
