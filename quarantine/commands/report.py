"""``quarantine report`` on Spark: a self-contained HTML page of a pipeline's quarantine and metrics tables.

The second handler of ``report`` (:data:`quarantine.cli.HANDLERS`): path tables are answered
without a JVM first (:mod:`quarantine.commands.report_local`); catalog tables, Spark Connect,
Databricks and a table delta-rs cannot read come here.
"""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import parse_since
from quarantine.ops.report_data import write_report
from quarantine.ops.report_model import counted_target
from quarantine.ops.report_page import require_plotly
from quarantine.spark.session import get_spark

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Write the page for the config's pipeline and tables to ``--out``, print a summary; exit 0.

    Raises:
        ConfigError: ``--since`` is not an ISO date or date-time.
        ReportDependencyError: Plotly (the ``report`` extra) is not installed.
    """
    config = load(call)
    since = call.args.since
    when = parse_since(since) if since else None
    require_plotly()
    spark = get_spark(f"quarantine:report:{config.pipeline}", config.spark_conf, read_only=True)
    data = write_report(
        spark, call.args.out, pipeline=config.pipeline, quarantine_table=config.errors.dlq_table_name,
        metrics_table=config.metrics.table, since=when, target_table=counted_target(config),
    )
    print("\n".join(data.summary_lines()))
    print(f"wrote the report to {call.args.out}")
    return 0
