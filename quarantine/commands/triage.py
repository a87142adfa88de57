"""``quarantine inspect``, ``stats``, ``sql`` and ``views``: an operator's reads of the quarantine table.

The commands are :mod:`quarantine.ops.triage`'s; this handler starts the lean session they
read with first (``get_spark(read_only=True)``), which they then get as the active session.
"""

from __future__ import annotations

from quarantine.commands.invocation import Invocation
from quarantine.commands.options import overrides
from quarantine.config import load_config
from quarantine.errors import ConfigError
from quarantine.ops.triage import run_command
from quarantine.spark.session import get_spark
from quarantine.sql import get_query

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Run ``call.args.command`` (inspect, stats, sql or views); its exit code.

    Raises:
        ConfigError: bad options, config, query name or parameters.
        QuarantineError: the quarantine table does not exist yet.
    """
    _start_reader(call)
    return run_command(call.args, overrides(call.args.set))


def _start_reader(call: Invocation) -> None:
    """Start the lean session of a command that reads tables.

    Nothing starts when the command needs no Spark (``sql`` without a name, ``views --print``) or
    cannot run (no ``--conf``, an unknown query, a bad config): :func:`run_command` reports those.
    """
    args = call.args
    if getattr(args, "conf", None) is None or (args.command == "sql" and args.name is None):
        return
    if args.command == "views" and args.print_sql:  # prints the statements; reads nothing
        return
    try:
        if args.command == "sql":
            get_query(args.name)
        config = load_config(args.conf, overrides(args.set))
    except ConfigError:
        return
    get_spark(f"quarantine:{args.command}", config.spark_conf, read_only=True)
