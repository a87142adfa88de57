"""What a declarative pipeline cannot do is refused at load, naming why (issue 38)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.batch.plan import Plan
from quarantine.config import load_config
from quarantine.declarative import DeclaredPipeline, check_declarable
from quarantine.errors import ConfigError
from quarantine.stages import build_stages

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "pipelines" / "orders" / "orders.yml"


def _plan(tmp_path: Path, change: Any = None) -> Plan:
    cfg = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    if change is not None:
        change(cfg)
    shutil.copytree(REPO / "conf" / "expectations", tmp_path / "expectations", dirs_exist_ok=True)
    path = tmp_path / "orders.yml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    config = load_config(path)
    return Plan(config=config, spark=None, stages=build_stages(config.stages))  # type: ignore[arg-type]


def test_the_example_declares_a_staged_view_and_two_tables(tmp_path: Path) -> None:
    assert check_declarable(_plan(tmp_path)) == DeclaredPipeline(
        staged="orders_declarative_staged", target="orders", quarantine="orders_quarantine")


@pytest.mark.parametrize(("change", "key", "why"), [
    (lambda c: c["errors"].update({"tolerance.limit": 10}), "errors.tolerance.limit", "counts a batch"),
    (lambda c: c["errors"].update({"tolerance.rate.limit": 5}), "errors.tolerance.rate.limit", "counts a batch"),
    (lambda c: c["target"].update(table="data/orders"), "target.table", "not paths"),
    (lambda c: c["errors"].update({"deadletterqueue.table.name": "/tmp/q"}), "errors.deadletterqueue.table.name",
     "not paths"),
    (lambda c: c["source"].update(format="parquet"), "source.format", "kafka or delta"),
    (lambda c: c["target"].pop("written_by"), "target.written_by", "pipeline's updates write its tables"),
    (lambda c: c["errors"].update({"deadletterqueue.topic.name": "orders.dlq",
                                   "deadletterqueue.topic.bootstrap.servers": "localhost:9092"}),
     "errors.deadletterqueue.topic.name", "runtime owns"),
    (lambda c: c.update(mlflow={"enabled": True}), "mlflow.enabled", "listeners"),
    (lambda c: c["stages"].append({"name": "expect", "type": "expectation", "options": {
        "suite": "expectations/orders.json", "on_breach": {"default": "warn"}}}), "stages[4]", "whole batches"),
])
def test_what_needs_a_batch_or_a_path_is_refused_naming_the_key(
    tmp_path: Path, change: Any, key: str, why: str
) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        check_declarable(_plan(tmp_path, change))
    assert f"'{key}'" in str(caught.value)


def test_a_pipelines_quarantine_set_settings_are_config_overrides() -> None:
    from quarantine.declarative import pipeline_overrides

    settings = {"quarantine.set.source.path": "null", "quarantine.set.source.table": "main.ops.orders_raw",
                "quarantine.set.errors.tolerance": "none", "spark.sql.shuffle.partitions": "4"}
    assert pipeline_overrides(settings) == {
        "source.path": None, "source.table": "main.ops.orders_raw", "errors.tolerance": "none"}


def test_a_kafka_source_needs_no_checkpoint_when_a_pipeline_writes_the_tables(tmp_path: Path) -> None:
    kafka = {"format": "kafka", "bootstrap.servers": "localhost:9092", "topics": ["orders"]}
    plan = _plan(tmp_path, lambda c: c.update(source=kafka))  # the runtime keeps the checkpoints
    assert check_declarable(plan).target == "orders"
    with pytest.raises(ConfigError, match=r"'target\.checkpoint'"):  # a job's stream needs one
        _plan(tmp_path, lambda c: (c.update(source=kafka), c["target"].pop("written_by")))


def test_quarantine_metrics_is_for_a_pipelines_config_with_a_metrics_table(tmp_path: Path) -> None:
    from quarantine.declarative.metrics import record_pipeline_metrics

    job = _plan(tmp_path, lambda c: c["target"].pop("written_by")).config
    with pytest.raises(ConfigError, match="a job's listeners write its metrics table"):
        record_pipeline_metrics(None, job)  # type: ignore[arg-type]
    unset = _plan(tmp_path, lambda c: c.pop("metrics")).config
    with pytest.raises(ConfigError, match=r"'metrics\.table'"):
        record_pipeline_metrics(None, unset)  # type: ignore[arg-type]
