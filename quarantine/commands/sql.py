"""``quarantine sql``: a query of the SQL library over a pipeline's tables (without a name: the library).

The query runs as written on either engine (:func:`quarantine.ops.reads.library_rows`: DuckDB
over path tables, else Spark); ``--print`` shows it with the config's tables in place.
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, add_json
from quarantine.errors import ConfigError

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    # `quarantine sql` alone lists the library
    add_config(parser, "the pipeline config (YAML): its tables and pipeline", required=False)
    parser.add_argument("name", nargs="?", default=None, metavar="NAME",
                        help="the query (without NAME: list the library)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a query parameter (repeatable); pipeline defaults to the config's")
    parser.add_argument("--limit", type=int, default=100,
                        help="at most this many rows (default 100); the output says when more match")
    parser.add_argument("--print", action="store_true", dest="print_sql",
                        help="print the query's SQL with the tables and values in place; run nothing")
    add_json(parser)


def _handle(call: Invocation) -> int:
    """List the library, print a query's SQL, or run it and print its rows; exit code 0.

    Raises:
        ConfigError: an unknown query (before the config is read), no ``--conf``, bad parameters or ``--limit``.
        QuarantineError: a table the query reads does not exist yet.
    """
    from quarantine.ops.triage_output import list_queries, print_sql
    from quarantine.sql import bind, get_query, parse_params

    args = call.args
    if args.name is None:
        return list_queries(args.json)
    query = get_query(args.name)
    if args.conf is None:
        raise ConfigError("--conf", None, f"the pipeline config whose tables `quarantine sql {args.name}` reads")
    from quarantine.commands.configured import load
    from quarantine.keyring import KeyRing
    from quarantine.ops.reads import answer, library_rows

    config = load(call)
    values = parse_params(args.param)
    if query.param("pipeline") is not None:
        values.setdefault("pipeline", config.pipeline)
    if args.print_sql:
        print(bind(query, values, {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table}))
        return 0
    if args.limit < 1:
        raise ConfigError("--limit", args.limit, "a positive number of rows")
    columns, rows = answer(config, query.tables, lambda reads: library_rows(reads, query, values, args.limit),
                           app="sql")
    print_sql(query, columns, rows, args.limit, as_json=args.json, keys=KeyRing.from_errors(config.errors))
    return 0


COMMAND = Command(
    help="run a query of the SQL library (without NAME: list them)",
    examples=(
        "quarantine sql",
        "quarantine sql stuck_records --conf data/demo/orders_demo.yml --param hours=48 --param failures=2",
    ),
    arguments=_arguments,
    handle=_handle,
)
