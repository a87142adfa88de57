"""The README's demo through the ``quarantine`` command, in-process on the test session.

``init-demo`` writes a Delta source of Kafka-shaped order events with poison records and
the demo's config; ``run`` takes them through every demo stage (decode, JSON, cast,
checks, the Great Expectations stage) into the Delta target and quarantine, logging
the run to MLflow (the config's local sqlite store); ``replay`` re-runs the open
quarantine rows. Nothing of a record reaches MLflow: its store and artifacts are read byte for
byte for the demo records' e-mail addresses, order ids, SKUs and keys. The commands are
``make demo``'s (the README's first command), read from
the Makefile, in a folder holding a copy of ``conf/``; the one change is a smaller sample
(``--records``). It is the batch item of the support matrix's end-to-end subset
(``make test-matrix``), so it runs on both runtime pairs.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from mlflow.tracking import MlflowClient
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.config import load_config
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
RECORDS = 400


#: What a demo record carries (quarantine/demo/orders.py): e-mail addresses (the poison's too), order
#: ids, SKUs and record keys.
RECORD_CONTENT = re.compile(rb"customer[0-9]+(?:@| at )example\.com|ord-[0-9]{6}|SKU-[0-9]{4}|cust-[0-9]{5}")


def _record_content(files: list[Path]) -> dict[str, set[bytes]]:
    """Each of ``files`` (read byte for byte) that holds what a demo record carries, with what it holds."""
    found = {}
    for path in (p for p in files if p.is_file()):
        hits = set(RECORD_CONTENT.findall(path.read_bytes()))
        if hits:
            found[str(path)] = hits
    return found


def _make_demo_commands() -> list[list[str]]:
    """The ``quarantine`` commands of the Makefile's ``demo`` target (after its ``setup``)."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    commands = [shlex.split(line) for line in recipe.group(1).splitlines()]
    assert all(c[0] == ".venv/bin/quarantine" for c in commands), commands
    return [c[1:] for c in commands]


def test_the_demo_runs_logs_to_mlflow_and_replays_through_the_cli(
    spark: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, mlflow_store: str
) -> None:
    assert ["make", "demo"] in block("two-commands").commands("make")
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    monkeypatch.chdir(tmp_path)
    init, run_demo = _make_demo_commands()
    assert init[0] == "init-demo" and run_demo[0] == "run"
    assert main([*init, "--records", str(RECORDS), "--poison-rate", "0.1"]) == 0
    conf = Path(run_demo[run_demo.index("--conf") + 1])
    config = load_config(conf)
    # the demo's store, sqlite:///mlflow.db, is relative to where it runs: this test's own (empty) store
    assert config.mlflow.tracking_uri == "sqlite:///mlflow.db" and mlflow_store == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(run_demo) == 0
    ran = capsys.readouterr().out  # the summary ends with where the tables are and what to run next
    tables = (("target", config.target.table), ("quarantine", config.errors.dlq_table_name),
              ("metrics", config.metrics.table))
    assert all(f"\n  {what:<11}{name}\n" in ran for what, name in tables), ran
    assert f"\nnext: quarantine inspect --conf {conf}\n" in ran

    target = spark.read.format("delta").load(config.target.table)
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    n_ok, n_bad = target.count(), quarantine.count()
    assert n_ok + n_bad == RECORDS and n_bad > 0 and n_ok > 0
    # every source record in exactly one table: their coordinates are disjoint and cover the source
    in_target = {tuple(r) for r in target.select("_source_topic", "_source_partition", "_source_offset").collect()}
    in_quarantine = {tuple(r) for r in quarantine.select("topic", "partition", "offset").collect()}
    source = {tuple(r) for r in spark.read.format("delta").load(config.source.path)
              .select("topic", "partition", "offset").collect()}
    assert in_target.isdisjoint(in_quarantine) and in_target | in_quarantine == source
    stages = {r[0] for r in quarantine.select("stage").distinct().collect()}
    assert stages <= {"decode", "parse_order", "convert", "check_order", "expect_order"}, stages

    client = MlflowClient(tracking_uri=config.mlflow.tracking_uri)
    experiment = client.get_experiment_by_name(config.mlflow.experiment)
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])  # the store is this test's: one run, the demo's
    assert run.data.tags["status"] == "succeeded"
    assert run.data.metrics["records_quarantined"] == float(n_bad)
    # MLflow holds nothing of a record: params (the config), metrics (counts), tags, breaches' artifacts
    assert _record_content(list(Path(config.source.path).rglob("*"))), "the source holds them: the pattern is real"
    artifacts = Path(urlparse(run.info.artifact_uri).path)  # the breaches' GX results, if the sample breached
    assert _record_content([tmp_path / "mlflow.db", *artifacts.rglob("*")]) == {}

    # Nothing was fixed: every replayed row fails again and stays open; the target is unchanged.
    capsys.readouterr()
    assert main(["replay", "--conf", str(conf), "--where", "stage = 'check_order'"]) == 0
    replayed = capsys.readouterr().out
    m = re.search(r"replay: ([\d,]+) open record\(s\) selected, 0 replayed .* ([\d,]+) still failing", replayed)
    assert m is not None and m.group(1) == m.group(2) != "0"
    assert spark.read.format("delta").load(config.target.table).count() == n_ok
    after = spark.read.format("delta").load(config.errors.dlq_table_name)
    statuses = {r[0] for r in after.select("status").distinct().collect()}
    assert statuses == {"open"}
    assert quarantine.where(F.col("stage") == "check_order").count() > 0


def test_init_demo_declarative_keeps_each_projects_state_inside_its_folder(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two projects written by ``init-demo --format declarative``: each one's ``storage:`` (the
    runtime's checkpoints) is its own folder's, an absolute URI as ``spark-pipelines`` needs, and
    its config's editor comment names a schema file the project has."""
    monkeypatch.chdir(tmp_path)
    specs = {}
    for out in ("one/orders", "two/orders"):
        assert main(["init-demo", "--format", "declarative", "--out", out, "--records", "20"]) == 0
        project = (tmp_path / out).resolve()
        spec = yaml.safe_load((project / "spark-pipeline.yml").read_text(encoding="utf-8"))
        assert spec["storage"] == (project / "storage").as_uri(), spec
        specs[out] = spec["storage"]
        conf = project / "orders.yml"
        schemas = re.findall(r"^# yaml-language-server: \$schema=(\S+)$", conf.read_text(encoding="utf-8"), re.M)
        assert all((project / s).is_file() for s in schemas), schemas  # none points outside the project
        assert load_config(conf).target.table == "orders"
    assert len(set(specs.values())) == 2  # not one folder shared by every project on the machine
