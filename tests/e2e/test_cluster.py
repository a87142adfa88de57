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
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.config import load_config
from tests.support import KafkaBroker, ProducedRecord, kafka_pipeline_conf, ledger, order_records, produce
from tests.support.cluster import StandaloneCluster
from tests.support.crash import run_to_completion, run_with_kills, write_conf

REPO = Path(__file__).resolve().parents[2]
RECORDS = 400
#: Four micro-batches of 500 for the stream; a kill in two of them.
STREAM_RECORDS = 2_000


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


def _new_executors(cluster: StandaloneCluster, before: set[Path]) -> list[Path]:
    """The executor dirs the cluster has that ``before`` (an earlier :meth:`executor_dirs`) has not."""
    return [p for p in cluster.executor_dirs() if p not in before]


def _ran_on_executors(cluster: StandaloneCluster, before: set[Path]) -> None:
    """The drivers since ``before`` ran executors on both workers (not under a local master)."""
    dirs = _new_executors(cluster, before)
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
    before = set(cluster.executor_dirs())

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


def _executor_commands(cluster: StandaloneCluster, before: set[Path]) -> list[str]:
    """The command line of each executor started since ``before`` (the header of its stderr)."""
    heads = [(p / "stderr").read_text(errors="replace").split("\n", 1)[0] for p in _new_executors(cluster, before)]
    assert heads and all(h.startswith("Spark Executor Command: ") for h in heads), heads
    return heads


def _python_values() -> list[bytes]:
    """Amounts as text: a poison for the row stage (not a number) every 37th, one for the vectorized
    stage (a negative amount, which fails its whole Arrow batch) every 53rd."""
    return [b"oops" if i % 37 == 5 else f"{-i if i % 53 == 7 else i}.5".encode() for i in range(RECORDS)]


def test_python_stages_row_and_vectorized_run_in_the_executors_python_workers(
    spark: Any, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """A user function by dotted path, row and vectorized (with poison), runs in executors' Python
    workers of another process than the driver; each poison record is its own error, in its stage.
    The executors' JVMs get the library's JIT options as the driver's does (JVM_OPTIONS)."""
    from quarantine.spark.session import JVM_OPTIONS
    from tests.helpers import kafka_df

    values = _python_values()
    kafka_df(spark, values[: RECORDS // 2]).union(
        kafka_df(spark, values[RECORDS // 2:], partition=1, start_offset=RECORDS // 2)
    ).write.format("delta").save(str(tmp_path / "source"))
    raw = {
        "pipeline": "python_on_a_cluster",
        "source": {"format": "delta", "path": str(tmp_path / "source")},
        "target": {"table": str(tmp_path / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "amount", "type": "python",
             "options": {"function": "tests.fixtures_py_stage.parse_amount", "returns": "DOUBLE", "mode": "row"}},
            {"name": "taxed", "type": "python",
             "options": {"function": "tests.fixtures_py_stage.add_tax_vectorized", "returns": "DOUBLE",
                         "mode": "vectorized"}},
        ],
    }
    conf = write_conf(_on(cluster, raw), tmp_path / "python.yml")
    before = set(cluster.executor_dirs())
    _quarantine(cluster, "run", "--conf", str(conf))
    _ran_on_executors(cluster, before)
    for command in _executor_commands(cluster, before):
        assert all(option in command for option in JVM_OPTIONS), command

    produced = _source_records(spark, str(tmp_path / "source"))
    book = ledger(spark, produced, target=str(tmp_path / "target"), quarantine=str(tmp_path / "quarantine"),
                  pipeline="python_on_a_cluster")
    assert book.exactly_once, book.describe()
    errors = {
        (r["partition"], r["offset"]): (r["stage"], r["error_class"], r["message"])
        for r in spark.read.format("delta").load(str(tmp_path / "quarantine")).collect()
    }
    expected = {
        (i // (RECORDS // 2), i): ("amount", "ValueError", "could not convert string to float: 'oops'")
        if v == b"oops" else ("taxed", "ValueError", f"negative amount in batch: [{float(v)}]")
        for i, v in enumerate(values) if v == b"oops" or v.startswith(b"-")
    }
    assert errors == expected


def test_the_avro_demo_runs_on_a_cluster(spark: Any, cluster: StandaloneCluster, tmp_path: Path) -> None:
    """The Avro stage (its writer schemas read from files by the driver, decoded in the executors):
    every poison kind in quarantine by class, every record in exactly one table."""
    from quarantine.demo.avro import AVRO_DEMO_CONFIG

    demo = tmp_path / "avro-demo"
    assert main(["init-demo", "--format", "avro", "--out", str(demo), "--records", str(RECORDS),
                 "--poison-rate", "0.3"]) == 0
    raw = yaml.safe_load((demo / AVRO_DEMO_CONFIG).read_text())
    raw["mlflow"] = {"enabled": False}
    conf = write_conf(_on(cluster, raw), demo / "cluster.yml")
    config = load_config(conf)
    produced = _source_records(spark, str(config.source.path))
    before = set(cluster.executor_dirs())
    _quarantine(cluster, "run", "--conf", str(conf))
    _ran_on_executors(cluster, before)
    book = ledger(spark, produced, target=str(config.target.table), quarantine=str(config.errors.dlq_table_name),
                  pipeline=config.pipeline)
    assert book.exactly_once, book.describe()
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    classes = {r["error_class"] for r in quarantine.select("error_class").distinct().collect()}
    assert classes == {"BadMagicByte", "UnknownSchemaId", "UndecodableAvro", "IncompatibleReaderSchema",
                       "NullInput", "range"}, classes


@pytest.mark.timeout(1800)
def test_a_kafka_stream_on_a_cluster_survives_a_sigkill_of_its_driver_exactly_once(
    spark: Any, cluster: StandaloneCluster, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]],
    tmp_path: Path,
) -> None:
    """The Kafka source's consumers run in the executors (the Kafka jars reach them from the driver);
    the driver is SIGKILLed mid-batch twice and restarted from its checkpoint, each time a new
    application on the cluster: every record in exactly one table, the quarantine byte-exact."""
    topics = new_topics("cluster-orders", partitions=2)
    produced = produce(kafka_broker.bootstrap, order_records(topics, 2, STREAM_RECORDS, seed=39))
    stream = _on(cluster, kafka_pipeline_conf(
        kafka_broker.bootstrap, tmp_path, topics=topics, processing_time="1 second",
        max_offsets_per_trigger=STREAM_RECORDS // 4,
    ))
    stream_yml = write_conf(stream, tmp_path / "stream.yml")
    final_yml = write_conf({**stream, "trigger": "available_now"}, tmp_path / "final.yml")
    before = set(cluster.executor_dirs())

    crashes = run_with_kills(stream_yml, tmp_path / "checkpoint", kills=2, log=tmp_path / "pipeline.log",
                             rng=random.Random(39), max_delay_s=3.0, stall_timeout_s=420)
    run_to_completion(final_yml, tmp_path / "pipeline.log", timeout_s=600)
    assert crashes.kills == 2 and len(crashes.kill_points) == 2
    _ran_on_executors(cluster, before)
    book = ledger(spark, produced, target=str(tmp_path / "target"), quarantine=str(tmp_path / "quarantine"),
                  pipeline="orders_kafka_test")
    assert book.exactly_once and book.in_quarantine > 0, book.describe()
