"""The bundle's SQL alerts are not a claim: each query runs on the tables of a real run and agrees
with the SQL library.

``bundles/quarantine_alerts.yml`` names the tables as ``${var.catalog}.${var.schema}.…``; here
those names are temporary views over the Delta tables of :func:`tests.helpers.report_run` (the
``report_conf`` fixture), and the bundle variables are substituted as a target would. The
stuck-records alert must count the rows the library's ``stuck_records`` returns with the same
parameters; the error-rate alert must return the highest per-topic share of the last hour's
metrics rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import load_config
from quarantine.sql import run_query
from tests.support.bundle_checks import Bundle, substitute, target_variables

REPO = Path(__file__).resolve().parents[2]


def _alerts() -> dict[str, dict[str, Any]]:
    return {name: alert for name, (_, alert) in Bundle.load(REPO).resources("alerts").items()}


def _sql(alert: dict[str, Any], **variables: str) -> str:
    """The alert's query as a target runs it, its tables the local views ``quarantine`` and ``quarantine_metrics``."""
    values = {**target_variables(REPO, "dev"), **variables}
    text = substitute(alert["query_text"], REPO, "dev", values, {})
    text = text.replace(f"{values['catalog']}.{values['schema']}.{values['quarantine_table']}", "quarantine")
    return text.replace(f"{values['catalog']}.{values['schema']}.quarantine_metrics", "quarantine_metrics")


@pytest.fixture(scope="module")
def tables(spark: Any, report_conf: Path) -> Any:
    config = load_config(report_conf)
    spark.read.format("delta").load(config.errors.dlq_table_name).createOrReplaceTempView("quarantine")
    spark.read.format("delta").load(config.metrics.table).createOrReplaceTempView("quarantine_metrics")
    return config


@pytest.mark.parametrize(("hours", "failures"), [(24, 3), (24, 1), (0, 3)])
def test_the_stuck_records_alert_counts_what_the_sql_librarys_query_returns(
    spark: Any, tables: Any, hours: int, failures: int
) -> None:
    alert = _alerts()["quarantine_stuck_records"]
    (row,) = spark.sql(_sql(alert, stuck_hours=str(hours), stuck_failures=str(failures))).collect()
    assert row.asDict().keys() == {alert["evaluation"]["source"]["name"]}
    library = run_query(spark, "stuck_records", {"hours": str(hours), "failures": str(failures)},
                        {"quarantine": tables.errors.dlq_table_name}).count()
    assert row["stuck"] == library
    if (hours, failures) == (0, 3):
        assert library == 3  # every open record is stuck once no hour is allowed: the case is not empty


def test_the_error_rate_alert_returns_the_worst_topics_share_of_the_last_hour(spark: Any, tables: Any) -> None:
    alert = _alerts()["quarantine_error_rate"]
    (row,) = spark.sql(_sql(alert, alert_min_records="1")).collect()
    assert row.asDict().keys() == {alert["evaluation"]["source"]["name"]}
    metrics = spark.read.format("delta").load(tables.metrics.table).where(
        "topic IS NOT NULL AND coalesce(run_kind, 'run') = 'run'").collect()
    per_topic: dict[str, list[float]] = {}
    for r in metrics:
        counts = per_topic.setdefault(r["topic"], [0.0, 0.0])
        if r["metric"] == "records-in":
            counts[0] += r["value"]
        elif r["metric"] == "records-quarantined":
            counts[1] += r["value"]
    expected = max(bad / n for n, bad in per_topic.values() if n)
    assert 0 < expected < 1 and row["error_rate"] == pytest.approx(expected)
    (none,) = spark.sql(_sql(alert, alert_min_records="1000000")).collect()
    assert none["error_rate"] == 0  # no topic with that many records: the alert's OK state


def test_each_alert_is_evaluated_on_the_targets_warehouse_with_a_threshold_and_a_schedule() -> None:
    for name, alert in _alerts().items():
        assert alert["warehouse_id"] == "${var.warehouse_id}", name
        assert alert["evaluation"]["comparison_operator"] == "GREATER_THAN", name
        assert alert["evaluation"]["notification"]["subscriptions"] == "${var.alert_subscriptions}", name
        assert re.fullmatch(r"0 0 \* \* \* \?", alert["schedule"]["quartz_cron_schedule"]), name
