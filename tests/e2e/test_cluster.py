"""The end-to-end subset on a real multi-process Spark cluster (issue 39).

Every other test runs Spark in one JVM (``local[2]``) or over a local Connect server,
where a jar only on the driver, a closure that does not pickle, a path only the driver
reads or a Python object held in the driver pass unnoticed. Here the module starts
Spark's standalone cluster from the pyspark package (:class:`tests.support.cluster.StandaloneCluster`:
a master and two one-core workers, child processes on 127.0.0.1) and the pipelines' drivers
are child processes with ``spark.master`` set to the cluster in their configs' ``spark.conf``:
their tasks run in executors of their own, on other JVMs and Python workers than the driver's.
This process's local session only writes the sources and reads the tables back: every
record in exactly one table, the quarantine's bytes as the source's, as on ``local[2]``.

A driver costs a JVM and an application's two executors (tens of seconds here), so the
batch pipelines — the demo's run (its Great Expectations stage included) and replay, the
python stages, the Avro and the Protobuf demos — run as ``quarantine`` commands one after
the other in ONE driver process (:mod:`tests.support.cluster_driver`, the module fixture
``batch``); only the Kafka stream, whose subject is a driver killed and restarted, is a
``quarantine run`` process of its own, twice.

All processes share this machine's file system (DBFS or Volumes are shared on
Databricks); paths only one machine can read are not tested here.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.config import PipelineConfig, load_config
from tests.support import KafkaBroker, Ledger, ProducedRecord, kafka_pipeline_conf, ledger, order_records, produce
from tests.support.cluster import StandaloneCluster
from tests.support.crash import batch_files, run_to_completion, run_with_kills, write_conf

REPO = Path(__file__).resolve().parents[2]
#: Records of each batch pipeline's source.
RECORDS = 200
#: Three micro-batches of 200 for the stream; the kill lands in one in flight.
STREAM_RECORDS = 600
STREAM_BATCHES = 3


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


def _child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    for name in ("QUARANTINE_SPARK_REMOTE", "QUARANTINE_SPARK_MASTER"):
        env.pop(name, None)
    return env


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


@dataclass(frozen=True)
class Command:
    """One command the batch driver ran: its exit code, what it printed, its wall time, the session it
    ran on and the Delta tables' versions when it ended (:mod:`tests.support.cluster_driver`)."""

    code: int
    stdout: str
    error: str | None
    seconds: float
    master: str | None
    app_id: str | None
    versions: dict[str, int]

    def as_of(self, *tables: str) -> dict[str, int]:
        """``tables`` (paths) at the versions this command left them (for :func:`tests.support.ledger`)."""
        return {t: self.versions[str(Path(t).resolve())] for t in tables}


@dataclass(frozen=True)
class Batch:
    """What the module's one batch driver ran, by command name, and the scenarios' configs."""

    commands: dict[str, Command]
    configs: dict[str, PipelineConfig]
    stderr: str

    def ran(self, cluster: StandaloneCluster, name: str) -> Command:
        """Command ``name``, asserting it succeeded on ``cluster``."""
        cmd = self.commands[name]
        assert cmd.code == 0 and cmd.error is None, (
            f"{name}: exit {cmd.code}\n{cmd.stdout[-3000:]}\n{cmd.error}\n{self.stderr[-5000:]}\n"
            f"{cluster.executor_logs()[-6000:]}"
        )
        assert cmd.master == cluster.master, cmd.master  # the tasks ran in the cluster's executors
        return cmd

    def book(self, spark: Any, name: str, *, after: str | None = None, statuses: list[str] | None = None) -> Ledger:
        """Scenario ``name``'s ledger, its tables as command ``after`` left them (default: as they are)."""
        config = self.configs[name]
        target, quarantine = str(config.target.table), str(config.errors.dlq_table_name)
        return ledger(
            spark, _source_records(spark, str(config.source.path)), target=target, quarantine=quarantine,
            pipeline=config.pipeline, statuses=statuses,
            as_of=None if after is None else self.commands[after].as_of(target, quarantine),
        )


def _demo(cluster: StandaloneCluster, root: Path) -> tuple[PipelineConfig, list[tuple[str, list[str]]]]:
    """The JSON demo (its Great Expectations stage included) and a replay of its check_order rows
    through the stages without the checks and the suite."""
    demo = root / "demo"
    assert main(["init-demo", "--out", str(demo), "--records", str(RECORDS), "--poison-rate", "0.2"]) == 0
    raw = yaml.safe_load((demo / "orders_demo.yml").read_text())
    assert [s["type"] for s in raw["stages"]][-1] == "expectation"  # the demo's GX suite runs on the cluster
    raw["mlflow"] = {"enabled": False}
    conf = write_conf(_on(cluster, raw), demo / "cluster.yml")
    raw["stages"] = [s for s in raw["stages"] if s["name"] not in ("check_order", "expect_order")]
    fixed = write_conf(_on(cluster, raw), demo / "fixed.yml")
    return load_config(conf), [
        ("demo", ["run", "--conf", str(conf)]),
        ("demo-replay", ["replay", "--conf", str(fixed), "--where", "stage = 'check_order'"]),
    ]


def _python_values() -> list[bytes]:
    """Amounts as text: a poison for the row stage (not a number) every 37th, one for the vectorized
    stage (a negative amount, which fails its whole Arrow batch) every 53rd."""
    return [b"oops" if i % 37 == 5 else f"{-i if i % 53 == 7 else i}.5".encode() for i in range(RECORDS)]


def _python(spark: Any, cluster: StandaloneCluster, root: Path) -> tuple[PipelineConfig, list[tuple[str, list[str]]]]:
    """A user function by dotted path, in row mode then in vectorized mode, over poisoned amounts."""
    from tests.helpers import kafka_df

    d = root / "python"
    values = _python_values()
    kafka_df(spark, values[: RECORDS // 2]).union(
        kafka_df(spark, values[RECORDS // 2:], partition=1, start_offset=RECORDS // 2)
    ).write.format("delta").save(str(d / "source"))
    raw = {
        "pipeline": "python_on_a_cluster",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "amount", "type": "python",
             "options": {"function": "tests.fixtures_py_stage.parse_amount", "returns": "DOUBLE", "mode": "row"}},
            {"name": "taxed", "type": "python",
             "options": {"function": "tests.fixtures_py_stage.add_tax_vectorized", "returns": "DOUBLE",
                         "mode": "vectorized"}},
        ],
    }
    conf = write_conf(_on(cluster, raw), d / "python.yml")
    return load_config(conf), [("python", ["run", "--conf", str(conf)])]


def _wire_demo(
    cluster: StandaloneCluster, root: Path, fmt: str, config_name: str, poison_rate: str
) -> tuple[PipelineConfig, list[tuple[str, list[str]]]]:
    """``init-demo --format fmt``: writer schemas in files the driver reads, records the executors decode."""
    demo = root / fmt
    assert main(["init-demo", "--format", fmt, "--out", str(demo), "--records", str(RECORDS),
                 "--poison-rate", poison_rate]) == 0
    raw = yaml.safe_load((demo / config_name).read_text())
    conf = write_conf(_on(cluster, raw), demo / "cluster.yml")
    return load_config(conf), [(fmt, ["run", "--conf", str(conf)])]


@pytest.fixture(scope="module")
def batch(spark: Any, cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Batch:
    """The batch scenarios' sources and configs, written by this process; then their commands,
    run in one driver process on the cluster (:mod:`tests.support.cluster_driver`)."""
    from quarantine.demo.avro import AVRO_DEMO_CONFIG
    from quarantine.demo.protobuf import PROTOBUF_DEMO_CONFIG

    root = tmp_path_factory.mktemp("batch")
    scenarios = {
        "demo": _demo(cluster, root),
        "python": _python(spark, cluster, root),
        "avro": _wire_demo(cluster, root, "avro", AVRO_DEMO_CONFIG, "0.3"),
        "protobuf": _wire_demo(cluster, root, "protobuf", PROTOBUF_DEMO_CONFIG, "0.35"),
    }
    plan = root / "plan.json"
    plan.write_text(json.dumps({
        "commands": [c for _, commands in scenarios.values() for c in commands], "tables": str(root),
    }), encoding="utf-8")
    results = root / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.cluster_driver", str(plan), str(results)], capture_output=True,
        text=True, env=_child_env(), timeout=900, check=False, cwd=REPO,
    )
    assert results.exists(), f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    commands = {name: Command(**r) for name, r in json.loads(results.read_text(encoding="utf-8")).items()}
    return Batch(commands, {name: config for name, (config, _) in scenarios.items()}, proc.stderr)


def _executors(cluster: StandaloneCluster, app_id: str | None) -> list[Path]:
    """Application ``app_id``'s executor dirs (``<worker>/work/<app>/<executor id>``)."""
    return [p for p in cluster.executor_dirs() if p.parent.name == app_id]


def test_one_driver_runs_the_batch_pipelines_in_executors_on_both_workers(
    cluster: StandaloneCluster, batch: Batch
) -> None:
    """Every batch command ran on the cluster, in the one driver's application, whose executors
    (one on each worker) got the library's JIT options as the driver does (JVM_OPTIONS)."""
    from quarantine.spark.session import JVM_OPTIONS

    apps = {batch.ran(cluster, name).app_id for name in batch.commands}
    assert len(apps) == 1, apps
    executors = _executors(cluster, apps.pop())
    assert {p.parents[2].name for p in executors} == {"worker-0", "worker-1"}, executors
    for p in executors:
        command = (p / "stderr").read_text(errors="replace").split("\n", 1)[0]
        assert command.startswith("Spark Executor Command: "), command
        assert all(option in command for option in JVM_OPTIONS), command


def test_the_demo_and_its_replay_run_on_a_cluster(spark: Any, cluster: StandaloneCluster, batch: Batch) -> None:
    """The demo's batch run (decode, JSON, cast, checks, the Great Expectations stage): every
    record in exactly one table; then a replay of the check_order rows through the stages without
    the checks and the suite moves exactly those to the target."""
    run = batch.ran(cluster, "demo")
    book = batch.book(spark, "demo", after="demo")
    assert book.exactly_once and book.in_quarantine > 0 and book.in_target > 0, book.describe()
    config = batch.configs["demo"]
    dlq = str(config.errors.dlq_table_name)
    quarantine = spark.read.format("delta").option("versionAsOf", run.as_of(dlq)[dlq]).load(dlq)
    printed = {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^    at (\S+) +([\d,]+)$", run.stdout, re.M)}
    by_stage = {r["stage"]: r["count"] for r in quarantine.groupBy("stage").count().collect()}
    assert printed == by_stage, (printed, run.stdout)
    assert set(by_stage) == {"decode", "parse_order", "convert", "check_order", "expect_order"}, by_stage

    batch.ran(cluster, "demo-replay")
    after = spark.read.format("delta").load(dlq)
    assert after.where("status = 'replayed'").count() == by_stage["check_order"]
    assert {r["stage"] for r in after.where("status = 'replayed'").select("stage").distinct().collect()} == {
        "check_order"}
    book = batch.book(spark, "demo", statuses=["open"])
    assert book.exactly_once, book.describe()


def test_python_stages_row_and_vectorized_run_in_the_executors_python_workers(
    spark: Any, cluster: StandaloneCluster, batch: Batch
) -> None:
    """A user function by dotted path, row and vectorized (with poison), runs in executors' Python
    workers of another process than the driver; each poison record is its own error, in its stage."""
    batch.ran(cluster, "python")
    book = batch.book(spark, "python")
    assert book.exactly_once, book.describe()
    errors = {
        (r["partition"], r["offset"]): (r["stage"], r["error_class"], r["message"])
        for r in spark.read.format("delta").load(str(batch.configs["python"].errors.dlq_table_name)).collect()
    }
    values = _python_values()
    expected = {
        (i // (RECORDS // 2), i): ("amount", "ValueError", "could not convert string to float: 'oops'")
        if v == b"oops" else ("taxed", "ValueError", f"negative amount in batch: [{float(v)}]")
        for i, v in enumerate(values) if v == b"oops" or v.startswith(b"-")
    }
    assert errors == expected


def _error_classes(spark: Any, batch: Batch, name: str) -> set[str]:
    quarantine = spark.read.format("delta").load(str(batch.configs[name].errors.dlq_table_name))
    return {r["error_class"] for r in quarantine.select("error_class").distinct().collect()}


def test_the_avro_demo_runs_on_a_cluster(spark: Any, cluster: StandaloneCluster, batch: Batch) -> None:
    """The Avro stage (its writer schemas read from files by the driver, decoded in the executors):
    every poison kind in quarantine by class, every record in exactly one table."""
    batch.ran(cluster, "avro")
    book = batch.book(spark, "avro")
    assert book.exactly_once and book.in_target > 0, book.describe()
    assert _error_classes(spark, batch, "avro") == {
        "BadMagicByte", "UnknownSchemaId", "UndecodableAvro", "IncompatibleReaderSchema", "NullInput", "range"}


def test_the_protobuf_demo_runs_on_a_cluster(spark: Any, cluster: StandaloneCluster, batch: Batch) -> None:
    """The Protobuf stage (its descriptor sets read from files by the driver, records decoded in the
    executors): every poison kind in quarantine by class, every record in exactly one table, v1
    records read as v2 (channel's default) beside v2's."""
    batch.ran(cluster, "protobuf")
    book = batch.book(spark, "protobuf")
    assert book.exactly_once and book.in_target > 0, book.describe()
    assert _error_classes(spark, batch, "protobuf") == {
        "BadMagicByte", "UnknownSchemaId", "UnknownMessageIndex", "UndecodableProtobuf", "IncompatibleReaderSchema",
        "NullInput", "range"}
    target = spark.read.format("delta").load(str(batch.configs["protobuf"].target.table))
    assert {r["channel"] for r in target.select("channel").distinct().collect()} == {"", "app"}


@pytest.mark.timeout(900)
def test_a_kafka_stream_on_a_cluster_survives_a_sigkill_of_its_driver_exactly_once(
    spark: Any, cluster: StandaloneCluster, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]],
    tmp_path: Path,
) -> None:
    """The Kafka source's consumers run in the executors (the Kafka jars reach them from the driver);
    the driver is SIGKILLed with a micro-batch in flight (planned, not committed) and restarted from
    its checkpoint, a new application on the cluster, which does that batch again and the ones left:
    every record in exactly one table, the quarantine byte-exact."""
    topics = new_topics("cluster-orders", partitions=2)
    produced = produce(kafka_broker.bootstrap, order_records(topics, 2, STREAM_RECORDS, seed=39))
    stream = _on(cluster, kafka_pipeline_conf(
        kafka_broker.bootstrap, tmp_path, topics=topics, processing_time="1 second",
        max_offsets_per_trigger=STREAM_RECORDS // STREAM_BATCHES,
    ))
    stream_yml = write_conf(stream, tmp_path / "stream.yml")
    final_yml = write_conf({**stream, "trigger": "available_now"}, tmp_path / "final.yml")
    before = set(cluster.executor_dirs())

    crashes = run_with_kills(stream_yml, tmp_path / "checkpoint", kills=1, log=tmp_path / "pipeline.log",
                             rng=random.Random(39), max_delay_s=2.0, stall_timeout_s=300)
    # killed mid-batch: the batch in flight was planned, not committed; the restart does it again
    assert crashes.kills == 1 and crashes.committed_batches == crashes.kill_points[0][0], crashes
    run_to_completion(final_yml, tmp_path / "pipeline.log", timeout_s=400)
    assert len(batch_files(tmp_path / "checkpoint", "commits")) >= STREAM_BATCHES
    apps = {p.parent.name for p in cluster.executor_dirs() if p not in before}
    workers = {p.parents[2].name for p in cluster.executor_dirs() if p not in before}
    assert len(apps) == 2 and workers == {"worker-0", "worker-1"}, (apps, workers)  # killed, restarted
    book = ledger(spark, produced, target=str(tmp_path / "target"), quarantine=str(tmp_path / "quarantine"),
                  pipeline="orders_kafka_test")
    assert book.exactly_once and book.in_quarantine > 0 and book.in_target > 0, book.describe()
