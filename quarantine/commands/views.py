"""``quarantine views``: views over the quarantine table (``<table>_open``, ``<table>_summary``, ...).

``--print`` prints the statements (no engine); without it Spark creates the views
(:func:`quarantine.ops.views.create_views`).
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config
from quarantine.errors import MissingTableError

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "the pipeline config (YAML): its tables and pipeline")
    parser.add_argument("--schema", default=None, metavar="[CATALOG.]SCHEMA",
                        help="where to create the views (default: next to a catalog table; the current schema "
                             "for a path)")
    parser.add_argument("--print", action="store_true", dest="print_sql",
                        help="print the CREATE VIEW statements; create nothing")


def _handle(call: Invocation) -> int:
    """Print or create the views over the config's quarantine table; exit code 0.

    Raises:
        ConfigError: ``--schema`` is not ``[catalog.]schema``, or the config is bad.
        MissingTableError: the quarantine table does not exist yet (creating them).
    """
    from quarantine.commands.configured import load
    from quarantine.ops.views import view_statements

    config = load(call)
    table = config.errors.dlq_table_name
    statements = view_statements(table, schema=call.args.schema)
    if call.args.print_sql:
        for v in statements:
            print(v.sql + ";\n")
        return 0
    from quarantine.ops.views import create_views
    from quarantine.spark.session import get_spark
    from quarantine.tables import table_exists

    spark = get_spark("quarantine:views", config.spark_conf, read_only=True)
    if not table_exists(spark, table):
        raise MissingTableError("quarantine", table)
    for v in create_views(spark, table, schema=call.args.schema):
        print(f"created view {v.name}: {v.summary}")
    return 0


COMMAND = Command(
    help="create views over the quarantine table (<table>_open, <table>_summary, ...)",
    examples=(
        "quarantine views --conf data/demo/orders_demo.yml --print",
        "quarantine views --conf conf/prod.yml",
    ),
    arguments=_arguments,
    handle=_handle,
)
