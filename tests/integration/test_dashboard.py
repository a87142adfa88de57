"""The Lakeview dashboard's SQL is not a claim: every dataset runs on the tables of a real run.

``dashboards/quarantine.lvdash.json`` names the tables ``quarantine`` and
``quarantine_metrics`` without a catalog or schema (the bundle's ``dataset_catalog``
and ``dataset_schema`` give them); here those names are temporary views over the
Delta tables of :func:`tests.helpers.report_run` (the ``report_conf`` fixture). Each dataset must return rows, have
every column its widgets read, and agree with the HTML report's figures.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import load_config
from quarantine.ops.report_page import FIGURES
from tests.helpers import spark_report_data
from tests.support.bundle_checks import Bundle, dashboard_definition, dataset_sql

REPO = Path(__file__).resolve().parents[2]


def _definition() -> dict[str, Any]:
    ((path, dash),) = Bundle.load(REPO).dashboards().values()
    return dashboard_definition(path, dash)[1]


@pytest.fixture(scope="module")
def results(spark: Any, report_conf: Path) -> dict[str, Any]:
    """Each dataset's rows (as dicts) and columns, plus the report's data, over one run's tables."""
    config = load_config(report_conf)
    spark.read.format("delta").load(config.errors.dlq_table_name).createOrReplaceTempView("quarantine")
    spark.read.format("delta").load(config.metrics.table).createOrReplaceTempView("quarantine_metrics")
    out: dict[str, Any] = {}
    for dataset in _definition()["datasets"]:
        df = spark.sql(dataset_sql(dataset))
        out[dataset["name"]] = ([r.asDict() for r in df.collect()], df.columns)
    out["report"] = spark_report_data(
        spark, pipeline=config.pipeline, quarantine_table=config.errors.dlq_table_name,
        metrics_table=config.metrics.table,
    )
    return out


@pytest.mark.parametrize("figure", [fig for fig, _ in FIGURES])
def test_each_dataset_runs_returns_rows_and_has_the_columns_its_widgets_read(
    results: dict[str, Any], figure: str
) -> None:
    rows, columns = results[figure]
    assert rows, f"dataset {figure} returned no row on a run with data in every figure"
    assert "pipeline" in columns  # the page's pipeline filter reads it from every dataset
    read = {
        col
        for item in _definition()["pages"][0]["layout"]
        for q in item["widget"].get("queries", [])
        if q["query"]["datasetName"] == figure
        for f in q["query"]["fields"]
        for col in re.findall(r"`([^`]+)`", f["expression"])
    }
    assert read and read <= set(columns), (figure, read - set(columns))


def test_the_dashboard_shows_the_same_numbers_as_the_report(results: dict[str, Any]) -> None:
    report = results["report"]
    assert {r["status"]: r["records"] for r in results["statuses"][0]} == dict(report.statuses)
    assert sorted((r["topic"], r["partition"], r["records"], r["min_offset"], r["max_offset"])
                  for r in results["partitions"][0]) == [p[:5] for p in report.partitions]
    assert sorted((r["error_class"], r["records"], r["open_records"]) for r in results["error_classes"][0]) == sorted(
        (c, n, o) for c, n, o in report.error_classes
    )
    assert [(r["run_id"], r["breaches"]) for r in results["breaches"][0]] == [(b[0], b[2]) for b in report.breaches]
    assert sorted((r["status"], r["resolution"], r["records"]) for r in results["replays"][0]) == sorted(
        (s, res, n) for _, s, res, n in report.replays
    )
    over_time = results["over_time"][0]
    assert sorted((r["stage"], r["records"]) for r in over_time) == sorted((s, n) for _, s, n in report.over_time)
