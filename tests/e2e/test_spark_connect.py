"""The library over Spark Connect, as Databricks serverless, shared clusters and Databricks Connect run it.

A child process runs the ``quarantine`` command as a Spark Connect client: the README's
line with ``QUARANTINE_SPARK_REMOTE=local[2]`` as written (pyspark starts a local Spark
Connect server with the same jars and settings as a classic local session), every other
command against one such server the module starts once and shares
(:class:`tests.support.connect.ConnectServer`, ``sc://localhost:<port>``: a server start
is a JVM, 20-50 s on two busy cores). The library talks to it only through the DataFrame
API and SQL, as a client without a JVM. The demo runs (decode, JSON, cast, checks and the Great
Expectations stage) and logs to MLflow, ``stats`` reads the quarantine table, the
replay runs, ``maintain`` keeps the table, ``inspect``, ``discard`` and ``report``
serve the operator, and a Kafka stream runs (its batches in the
server's foreachBatch worker, its listeners in the client). This process, a classic
session, then checks the tables the child wrote: every record in exactly one table,
the per-stage counts as printed.

No Delta Connect plugin is loaded (it is not on Maven Central): MERGE goes through
``DataFrame.mergeInto`` and versions through ``DESCRIBE HISTORY``
(:mod:`quarantine.sinks`), which a plain Connect server with Delta serves.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient

from quarantine.cli import main
from quarantine.config import load_config
from tests.conftest import INTERPRETED
from tests.support import KafkaBroker, kafka_pipeline_conf, ledger, order_records, produce
from tests.support.connect import ConnectServer
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
RECORDS = 600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """One local Connect server for the module's commands (tests.support.connect), interpreted as
    this process's session is (tests.conftest.INTERPRETED); the README line's own server generates code."""
    started = ConnectServer(tmp_path_factory.mktemp("connect"), REPO, spark_conf=INTERPRETED)
    yield started
    started.close()


def _quarantine(*args: str, server: ConnectServer | None, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """``quarantine *args`` as a child process: a client of ``server``, else of a ``local[2]`` remote
    (a Connect server of its own)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if server is not None:
        env.update(server.client_env())
    else:
        env["QUARANTINE_SPARK_REMOTE"] = "local[2]"
    return subprocess.run(
        [sys.executable, "-m", "quarantine", *args], capture_output=True, text=True, env=env, timeout=timeout,
        check=False, cwd=REPO,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_the_demo_and_its_replay_run_over_spark_connect(spark: Any, server: ConnectServer, tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    # the demo's source, written by this process's classic session (not a JVM of its own: it is set-up)
    assert main(["init-demo", "--out", str(demo), "--records", str(RECORDS), "--poison-rate", "0.1"]) == 0
    conf = demo / "orders_demo.yml"
    raw = yaml.safe_load(conf.read_text())
    # MLflow on: the demo's sqlite store in its folder (a client-side listener); the config's own URI,
    # sqlite:///mlflow.db, is the folder the commands run in, here the repository's
    raw["mlflow"]["tracking_uri"] = f"sqlite:///{demo / 'mlflow.db'}"
    conf.write_text(yaml.safe_dump(raw))
    config = load_config(conf)

    # the README's command (Spark Connect section), with this test's demo config
    (line,) = block("connect").lines()
    assignment, *argv = shlex.split(line, comments=True)
    assert assignment == "QUARANTINE_SPARK_REMOTE=local[2]" and argv[:2] == ["quarantine", "run"], line
    argv[argv.index("--conf") + 1] = str(conf)
    out = _ok(_quarantine(*argv[1:], server=None))  # as written: a server of its own
    printed = {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^    at (\S+) +([\d,]+)$", out, re.M)}
    target = spark.read.format("delta").load(config.target.table)
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    n_ok, n_bad = target.count(), quarantine.count()
    assert n_ok + n_bad == RECORDS and n_bad > 0, out
    in_target = {tuple(r) for r in target.select("_source_topic", "_source_partition", "_source_offset").collect()}
    in_quarantine = {tuple(r) for r in quarantine.select("topic", "partition", "offset").collect()}
    source = {tuple(r) for r in spark.read.format("delta").load(config.source.path)
              .select("topic", "partition", "offset").collect()}
    assert in_target.isdisjoint(in_quarantine) and in_target | in_quarantine == source
    by_stage = {r["stage"]: r["count"] for r in quarantine.groupBy("stage").count().collect()}
    assert printed == by_stage, (printed, by_stage, out)
    client = MlflowClient(tracking_uri=config.mlflow.tracking_uri)
    experiment = client.get_experiment_by_name(config.mlflow.experiment)
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.tags["status"] == "succeeded" and run.data.metrics["records_quarantined"] == n_bad

    # triage over Connect: stats reads the table through the DataFrame API only
    stats = json.loads(_ok(_quarantine("stats", "--conf", str(conf), "--json", server=server)))
    assert {r["status"]: r["records"] for r in stats["records by status"]} == {"open": n_bad}
    assert sum(r["records"] for r in stats["open records by stage and error class"]) == n_bad

    # a re-run changes nothing (insert-only MERGE on the target, MERGE on quarantine keys)
    _ok(_quarantine("run", "--conf", str(conf), server=server))
    assert spark.read.format("delta").load(config.target.table).count() == n_ok
    assert spark.read.format("delta").load(config.errors.dlq_table_name).count() == n_bad

    # replay through stages without the checks and the suite (the demo's negative amounts and
    # unknown currencies are refused by both): the check_order records pass now
    raw["stages"] = [s for s in raw["stages"] if s["name"] not in ("check_order", "expect_order")]
    (demo / "fixed.yml").write_text(yaml.safe_dump(raw))
    fixed = _ok(_quarantine(
        "replay", "--conf", str(demo / "fixed.yml"), "--where", "stage = 'check_order'", server=server
    ))
    assert re.search(r"replay: [\d,]+ open record\(s\) selected", fixed), fixed
    after = spark.read.format("delta").load(config.errors.dlq_table_name)
    assert after.count() == n_bad  # closed, not deleted
    closed = after.where("status = 'replayed'").count()
    assert closed == by_stage["check_order"] > 0, fixed
    assert spark.read.format("delta").load(config.target.table).count() == n_ok + closed

    # upkeep over Connect: SQL and mergeInto only (the strip, OPTIMIZE, VACUUM), the session's settings set and restored
    kept = _ok(_quarantine("maintain", "--conf", str(conf), server=server))
    assert f"{n_bad - closed:,} open row(s) kept" in kept and "VACUUM: files removed more than 168 h ago" in kept, kept
    assert spark.read.format("delta").load(config.errors.dlq_table_name).count() == n_bad  # closed rows are young

    # the operator's loop over Connect: look, discard, report
    shown = _ok(_quarantine("inspect", "--conf", str(conf), "--limit", "3", server=server))
    assert f"open records of pipeline {config.pipeline}" in shown and len(re.findall(r"│ open +│", shown)) == 3, shown
    gone = _ok(_quarantine(
        "discard", "--conf", str(conf), "--where", "stage = 'decode'", "--reason", "resent", server=server
    ))
    assert f"discarded {by_stage['decode']:,} open record(s)" in gone, gone
    discarded = spark.read.format("delta").load(config.errors.dlq_table_name).where("status = 'discarded'")
    assert discarded.count() == by_stage["decode"] and {r[0] for r in discarded.select("stage").collect()} == {"decode"}
    html = tmp_path / "report.html"
    _ok(_quarantine("report", "--conf", str(conf), "--out", str(html), server=server))
    assert config.pipeline in html.read_text(encoding="utf-8")


def test_a_kafka_stream_runs_over_spark_connect_exactly_once_and_fails_as_itself_on_a_breach(
    spark: Any, server: ConnectServer, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    """foreachBatch over Connect runs in the server's Python worker; the client keeps the run.

    The worker writes both tables (every record in one, raw bytes exact); the client's
    listeners get each batch's report through the session (the metrics table has a row
    set per batch, MLflow the run's metrics); a restart goes on from the checkpoint with
    the same run id; a tolerance breach fails the run with the pipeline's own error.
    """
    (topic,) = new_topics("connect-orders", partitions=2)
    b = kafka_broker.bootstrap
    first = produce(b, order_records([topic], 2, 400, poison_rate=0.1, seed=3))
    raw = kafka_pipeline_conf(b, tmp_path, topics=[topic], pipeline="orders_connect_stream",
                              max_offsets_per_trigger=150)
    raw["metrics"] = {"table": str(tmp_path / "metrics")}
    raw["mlflow"] = {"enabled": True, "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                     "experiment": "connect-stream"}
    conf = tmp_path / "stream.yml"
    conf.write_text(yaml.safe_dump(raw))
    tables = {"target": raw["target"]["table"], "quarantine": raw["errors"]["deadletterqueue.table.name"]}

    out = _ok(_quarantine("run", "--conf", str(conf), server=server))
    book = ledger(spark, first, pipeline=raw["pipeline"], **tables)
    assert book.exactly_once and book.in_quarantine > 0, book.describe()
    printed = int(re.search(r"^  records in +([\d,]+)$", out, re.M)[1].replace(",", ""))  # type: ignore[index]
    assert printed == len(first), out
    (run_id,) = {r[0] for r in spark.read.format("delta").load(tables["quarantine"]).select("run_id").distinct()
                 .collect()}
    assert run_id in out  # the query id, as the client printed it
    metrics = spark.read.format("delta").load(raw["metrics"]["table"])
    batches = {r[0] for r in metrics.where(f"run_id = '{run_id}'").select("batch_id").distinct().collect()}
    assert len(batches) >= 3, batches  # 400 offsets at 150 per trigger: one row set per batch, relayed
    client = MlflowClient(tracking_uri=raw["mlflow"]["tracking_uri"])
    experiment = client.get_experiment_by_name("connect-stream")
    assert experiment is not None
    (mlflow_run,) = client.search_runs([experiment.experiment_id])
    assert mlflow_run.data.tags["quarantine.run_id"] == run_id and mlflow_run.data.tags["status"] == "succeeded"
    history = client.get_metric_history(mlflow_run.info.run_id, "records_quarantined")
    assert {m.step for m in history} == batches and sum(m.value for m in history) == book.in_quarantine

    # a restart from the checkpoint, now with errors.tolerance=none: the first batch with a
    # failed record fails the run as the pipeline's error, its failed records durable first
    second = produce(b, order_records([topic], 2, 100, poison_rate=0.2, seed=4))
    raw["errors"]["tolerance"] = "none"
    conf.write_text(yaml.safe_dump(raw))
    proc = _quarantine("run", "--conf", str(conf), server=server)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "run failed: ToleranceExceededError: errors.tolerance=none:" in proc.stderr, proc.stderr[-3000:]
    after = spark.read.format("delta").load(tables["quarantine"])
    assert {r[0] for r in after.select("run_id").distinct().collect()} == {run_id}  # the same run goes on
    assert after.where("offset >= 200").count() > 0  # the failing batch's failed records
    book = ledger(spark, first + second, pipeline=raw["pipeline"], **tables)
    assert not (book.duplicates or book.unexpected or book.bytes_mismatch), book.describe()
    second_coords = {(r.topic, r.partition, r.offset) for r in second}
    assert book.lost and set(book.lost) <= second_coords, book.describe()  # not committed: the next run's
