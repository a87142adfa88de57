"""``quarantine report`` without a JVM: path tables aggregated on DuckDB, the page drawn by Plotly.

The first handler the CLI tries for ``report`` (issue 53). It imports delta-rs, DuckDB and
Plotly, never pyspark; when it returns None, Spark answers (:mod:`quarantine.commands.report`):
a catalog name, Databricks, Spark Connect, ``$QUARANTINE_READ_ENGINE=spark``, a table
delta-rs or DuckDB cannot read (one line on stderr said why), or a quarantine table that
lacks the report's columns (Spark says which).
"""

from __future__ import annotations

import sys

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import parse_since
from quarantine.errors import DeltaRsUnreadableError
from quarantine.ops.duck import spark_reason
from quarantine.ops.report_duck import collect_report_data
from quarantine.ops.report_page import require_plotly, write_page

__all__ = ["handle"]


def handle(call: Invocation) -> int | None:
    """Write the page for the config's path tables to ``--out``, print a summary; 0, or None: Spark answers.

    Raises:
        ConfigError: ``--since`` is not an ISO date or date-time, or the config is bad.
        ReportDependencyError: Plotly (the ``report`` extra) is not installed.
    """
    config = load(call)
    since = call.args.since
    when = parse_since(since) if since else None
    require_plotly()
    if spark_reason(config, ("quarantine", "metrics", "target")) is not None:
        return None
    try:
        data = collect_report_data(config, since=when)
    except DeltaRsUnreadableError as exc:
        print(f"quarantine: reading with Spark: {exc}", file=sys.stderr)
        return None
    if data is None:
        return None
    write_page(data, call.args.out)
    print("\n".join(data.summary_lines()))
    print(f"wrote the report to {call.args.out}")
    return 0
