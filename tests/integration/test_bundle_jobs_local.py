"""The bundle's batch and replay jobs, run as written against a local catalog (issue 12).

The tasks' parameters are taken from ``bundles/*.yml`` and substituted as the ``dev``
target would, except that ``catalog`` is the local session's ``spark_catalog`` and
``schema`` a scratch database: Unity Catalog's three-part names
(``catalog.schema.table``) are exercised through a real catalog, not only parsed.
On a fresh "workspace" the setup task creates the source table, the pipeline reads
it, a second setup leaves it alone, the replay job replays the pipeline's open
records, and the daily maintenance job maintains the quarantine table. MLflow is
switched off (``--set mlflow.enabled=false``): the jobs log to the workspace's
tracking server, which is not here.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from quarantine.cli import main
from tests.support.bundle_checks import Bundle, substitute, target_variables

REPO = Path(__file__).resolve().parents[2]
RECORDS = 300


def _argv(job: str, task_key: str, variables: dict[str, str], parameters: dict[str, str]) -> list[str]:
    _, spec = Bundle.load(REPO).jobs()[job]
    (task,) = [t for t in spec["tasks"] if t["task_key"] == task_key]
    return [substitute(str(p), REPO, "dev", variables, parameters) for p in task["python_wheel_task"]["parameters"]]


def test_the_batch_job_creates_its_source_then_runs_and_the_replay_job_replays(spark: Any, tmp_path: Path) -> None:
    schema = f"qt_bundle_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE spark_catalog.{schema} LOCATION '{tmp_path / 'warehouse'}'")
    try:
        variables = {
            **target_variables(REPO, "dev"),
            "catalog": "spark_catalog",
            "schema": schema,
            "checkpoint_root": str(tmp_path / "checkpoints"),
        }
        source = f"spark_catalog.{schema}.orders_raw"

        setup = _argv("quarantine_orders", "create_source", variables, {})
        assert setup == ["init-demo", "--table", source, "--if-missing"]
        assert main([*setup, "--records", str(RECORDS)]) == 0
        assert spark.table(source).count() == RECORDS
        assert main([*setup, "--records", "5"]) == 0  # exists: left alone
        assert spark.table(source).count() == RECORDS

        run = _argv("quarantine_orders", "run_pipeline", variables, {})
        assert main([*run, "--set", "mlflow.enabled=false"]) == 0
        target = spark.table(f"spark_catalog.{schema}.orders_demo")
        quarantine = spark.table(f"spark_catalog.{schema}.quarantine")
        n_ok, n_bad = target.count(), quarantine.count()
        assert n_ok + n_bad == RECORDS and n_ok > 0 and n_bad > 0
        assert spark.table(f"spark_catalog.{schema}.quarantine_metrics").count() > 0

        parameters = {"pipeline": "orders_demo", "predicate": "", "conf": str(REPO / "conf" / "orders_demo.yml")}
        replay = _argv("quarantine_replay", "replay", variables, parameters)
        assert main([*replay, "--set", "mlflow.enabled=false"]) == 0
        assert target.count() == n_ok  # nothing was fixed: every record fails again
        assert quarantine.where("status = 'open'").count() == n_bad
        kinds = spark.table(f"spark_catalog.{schema}.quarantine_metrics").select("run_kind").distinct().collect()
        assert {r[0] for r in kinds} == {"run", "replay"}

        # the daily maintenance job: nothing closed is old yet, the open rows stay; OPTIMIZE and VACUUM run
        maintain = _argv("quarantine_maintain", "maintain", variables,
                         {"pipeline": "orders_demo", "conf": str(REPO / "conf" / "orders_demo.yml")})
        assert main([*maintain, "--set", "mlflow.enabled=false"]) == 0
        assert quarantine.where("status = 'open'").count() == n_bad
        history = spark.sql(f"DESCRIBE HISTORY spark_catalog.{schema}.quarantine").select("operation").collect()
        assert {"OPTIMIZE", "VACUUM END"} <= {r[0] for r in history}
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS spark_catalog.{schema} CASCADE")
