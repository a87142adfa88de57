"""The stuck records an alert tells of: the SQL library's ``stuck_records`` over the quarantine table.

The same query an operator runs (``quarantine sql stuck_records --param hours=… --param
failures=…``), with the ``alerts.stuck_hours`` and ``alerts.stuck_failures`` parameters:
records open at least that many hours, or failed more than that many times.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from quarantine.alerts.events import StuckRecord
from quarantine.columns import ERROR_CLASS, ERROR_COUNT, OFFSET, PARTITION, STAGE, TOPIC
from quarantine.sql import run_query
from quarantine.tables import table_exists

__all__ = ["stuck_records"]


def stuck_records(
    spark: SparkSession, quarantine_table: str, pipeline: str, hours: int, failures: int, limit: int
) -> tuple[int, list[StuckRecord]]:
    """How many of ``pipeline``'s records are stuck, and the first ``limit`` of them (the most failures first).

    No quarantine table yet: none. Reads the quarantine table once for the rows, and once more
    for the count only when there are more than ``limit``.
    """
    if not table_exists(spark, quarantine_table):
        return 0, []
    found = run_query(
        spark, "stuck_records", {"pipeline": pipeline, "hours": str(hours), "failures": str(failures)},
        {"quarantine": quarantine_table},
    )
    rows = found.limit(limit + 1).collect()
    total = len(rows) if len(rows) <= limit else found.count()
    return total, [
        StuckRecord(
            topic=r[TOPIC], partition=int(r[PARTITION]), offset=int(r[OFFSET]), stage=r[STAGE],
            error_class=r[ERROR_CLASS], error_count=int(r[ERROR_COUNT] or 0),
            open_hours=float(r["open_hours"] or 0.0),  # the query's own column
        )
        for r in rows[:limit]
    ]
