"""``quarantine report``: a self-contained HTML page of a pipeline's quarantine and metrics tables.

Its figures are the reads of :func:`quarantine.ops.reads.report_data` (and the target's rows,
counted without reading them: the records, apart from the runs' reads), on DuckDB over path
tables (no JVM) or on Spark; Plotly draws the page (:mod:`quarantine.ops.report_page`).
"""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config, parse_time

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "the pipeline config (YAML): its quarantine and metrics tables")
    parser.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--since", default=None, metavar="TIME",
                        help="only records first seen (breaches, resolutions) at or after TIME (2026-11-25, "
                             "2026-11-25T10:00 UTC, or 24h, 7d)")


def _handle(call: Invocation) -> int:
    """Write the page for the config's pipeline and tables to ``--out``, print a summary; exit 0.

    Raises:
        ConfigError: ``--since`` is not a time, or the config is bad.
        ReportDependencyError: Plotly (the ``report`` extra) is not installed.
    """
    from quarantine.commands.configured import load
    from quarantine.ops.reads import answer, report_data
    from quarantine.ops.report_page import require_plotly, write_page

    config = load(call)
    when = parse_time(call.args.since, "--since") if call.args.since else None
    require_plotly()
    data = answer(config, ("quarantine", "metrics", "target"),
                  lambda reads: report_data(reads, config.pipeline, since=when), app=f"report:{config.pipeline}")
    write_page(data, call.args.out)
    print("\n".join(data.summary_lines()))
    print(f"wrote the report to {call.args.out}")
    return 0


COMMAND = Command(
    help="write a self-contained HTML report of a pipeline's quarantine and metrics (charts)",
    examples=(
        "quarantine report --conf data/demo/orders_demo.yml --out report.html",
        "quarantine report --conf data/demo/orders_demo.yml --out report.html --since 2026-11-01",
    ),
    arguments=_arguments,
    handle=_handle,
)
