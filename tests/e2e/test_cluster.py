"""The end-to-end subset on a real multi-process Spark cluster (issue 39).

Every other test runs Spark in one JVM (``local[2]``) or over a local Connect server,
where a jar only on the driver, a closure that does not pickle, a path only the driver
reads or a Python object held in the driver pass unnoticed. Here the module starts
Spark's standalone cluster from the pyspark package (:class:`tests.support.cluster.StandaloneCluster`:
a master and two one-core workers, child processes on 127.0.0.1) and each pipeline runs
as ``quarantine`` CLI processes, the driver, with ``spark.master`` set to the cluster in
the config's ``spark.conf``: its tasks run in executors of their own, on other JVMs and
Python workers than the driver's. This process's local session only writes the sources
and reads the tables back: every record in exactly one table, the quarantine's bytes as
the source's, as on ``local[2]``.

All processes share this machine's file system (DBFS or Volumes are shared on
Databricks); paths only one machine can read are not tested here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.config import load_config
from tests.support import ProducedRecord, ledger
from tests.support.cluster import StandaloneCluster
from tests.support.crash import write_conf

REPO = Path(__file__).resolve().parents[2]
RECORDS = 400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """The module's standalone cluster, stopped (executors too) after its last test."""
    started = StandaloneCluster(tmp_path_factory.mktemp("cluster"), REPO)
    yield started
    started.close()


def _on(cluster: StandaloneCluster, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a config as YAML loads it) with its session on ``cluster``."""
    conf = dict((raw.get("spark") or {}).get("conf") or {})
    return {**raw, "spark": {"conf": {**conf, **cluster.driver_conf()}}}


def _quarantine(cluster: StandaloneCluster, *args: str, timeout: int = 900) -> str:
    """``quarantine *args`` as a child process (the cluster's driver); its stdout, asserting it succeeded."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    for name in ("QUARANTINE_SPARK_REMOTE", "QUARANTINE_SPARK_MASTER"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "quarantine", *args], capture_output=True, text=True, env=env, timeout=timeout,
        check=False, cwd=REPO,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}\n{cluster.executor_logs()[-6000:]}"
    )
    return proc.stdout


def _source_records(spark: Any, path: str) -> list[ProducedRecord]:
    """A Kafka-shaped Delta source's records, as :func:`tests.support.ledger` compares them."""
    rows = spark.read.format("delta").load(path).select("topic", "partition", "offset", "key", "value", "headers")
    return [
        ProducedRecord(
            r["topic"], int(r["partition"]), int(r["offset"]),
            None if r["key"] is None else bytes(r["key"]), None if r["value"] is None else bytes(r["value"]),
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
            if r["headers"] else None,
        )
        for r in rows.collect()
    ]


def _ran_on_executors(cluster: StandaloneCluster, before: int) -> None:
    """A driver since ``before`` executor dirs ran executors on both workers (not a local master)."""
    dirs = cluster.executor_dirs()[before:]
    assert {p.parents[2].name for p in dirs} == {"worker-0", "worker-1"}, dirs


def test_the_demo_and_its_replay_run_on_a_cluster(spark: Any, cluster: StandaloneCluster, tmp_path: Path) -> None:
    """The demo's batch run (decode, JSON, cast, checks, the Great Expectations stage) and a
    replay through the CLI, each a driver of the cluster: every record in exactly one table."""
    demo = tmp_path / "demo"
    assert main(["init-demo", "--out", str(demo), "--records", str(RECORDS), "--poison-rate", "0.1"]) == 0
    raw = yaml.safe_load((demo / "orders_demo.yml").read_text())
    raw["mlflow"] = {"enabled": False}
    conf = write_conf(_on(cluster, raw), demo / "cluster.yml")
    config = load_config(conf)
    produced = _source_records(spark, str(config.source.path))
    before = len(cluster.executor_dirs())

    out = _quarantine(cluster, "run", "--conf", str(conf))
    _ran_on_executors(cluster, before)
    book = ledger(spark, produced, target=str(config.target.table), quarantine=str(config.errors.dlq_table_name),
                  pipeline=config.pipeline)
    assert book.exactly_once and book.in_quarantine > 0 and book.in_target > 0, book.describe()
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    printed = {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^    at (\S+) +([\d,]+)$", out, re.M)}
    by_stage = {r["stage"]: r["count"] for r in quarantine.groupBy("stage").count().collect()}
    assert printed == by_stage and {"decode", "parse_order", "check_order"} <= set(by_stage), (printed, out)

    # replay through the stages without the checks and the suite: the check_order records pass now
    raw["stages"] = [s for s in raw["stages"] if s["name"] not in ("check_order", "expect_order")]
    fixed = write_conf(_on(cluster, raw), demo / "fixed.yml")
    _quarantine(cluster, "replay", "--conf", str(fixed), "--where", "stage = 'check_order'")
    after = spark.read.format("delta").load(config.errors.dlq_table_name)
    assert after.where("status = 'replayed'").count() == by_stage["check_order"]
    book = ledger(spark, produced, target=str(config.target.table), quarantine=str(config.errors.dlq_table_name),
                  pipeline=config.pipeline, statuses=["open"])
    assert book.exactly_once, book.describe()
