"""The manual's declarative pipeline (docs/declarative.md, ``pipelines/orders/``), run as written
by ``spark-pipelines`` against ``quarantine connect-server`` (issue 38).

The project's files are the page's blocks (checked here); the page's commands run in a
temporary folder: the server (its tables in that folder's ``spark-warehouse``), the demo
source, ``spark-pipelines run`` twice, then the operator's commands through the server. The
tables are read back from the warehouse as Delta tables.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.demo.orders import orders_source, write_demo_source
from tests.support import Record, produce
from tests.support.readme import block

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "pipelines" / "orders"
BIN = Path(sys.executable).parent
RECORDS = 2_000
COORDINATES = ["topic", "partition", "offset"]
STAGES = {"decode", "parse_order", "convert", "check_order"}


def _code(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _spec_lines(text: str) -> tuple[list[str], str]:
    """A spec's code lines but ``storage:``, and its ``storage:`` value."""
    lines = _code(text)
    (storage,) = [ln for ln in lines if ln.startswith("storage: ")]
    return [ln for ln in lines if ln != storage], storage.removeprefix("storage: ")


def test_the_pages_blocks_are_the_projects_files() -> None:
    page, storage = _spec_lines(block("sdp-spec").body)
    assert page == _spec_lines((PROJECT / "spark-pipeline.yml").read_text(encoding="utf-8"))[0]
    assert storage == "file:///home/me/pipelines/orders/storage"  # what init-demo writes, run from /home/me
    source = (PROJECT / "transformations" / "orders.py").read_text(encoding="utf-8")
    assert block("sdp-source").body == source
    conf = yaml.safe_load((PROJECT / "orders.yml").read_text(encoding="utf-8"))
    assert (conf["target"]["table"], conf["errors"]["deadletterqueue.table.name"]) == ("orders", "orders_quarantine")


class _Server:
    """``quarantine connect-server`` as the page starts it, in ``cwd``."""

    def __init__(self, cwd: Path) -> None:
        lines = block("sdp-run").lines()
        assert lines[0].split("#")[0].strip() == "export SPARK_CONNECT_AUTHENTICATE_TOKEN=$(openssl rand -hex 16)"
        argv = block("sdp-run").commands()[0]
        assert argv[:2] == ["quarantine", "connect-server"] and argv[-1] == "&", argv
        self.argv = argv[1:-1]
        self.cwd = cwd
        self.port = int(argv[argv.index("--port") + 1])
        self.token = secrets.token_hex(16)
        self.env = {**os.environ, "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token, "PYTHONPATH": str(REPO),
                    "PYSPARK_PYTHON": sys.executable}
        self.env.pop("QUARANTINE_SPARK_REMOTE", None)
        self.log = cwd / "server.log"
        self._start()

    def _start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([str(BIN / "quarantine"), *self.argv], cwd=self.cwd, env=self.env,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert f"listening on sc://localhost:{self.port}" in line, line + self.log.read_text(errors="replace")[-3000:]

    def restart(self) -> None:
        """Stop the server and start it again in the same folder, on the same port, with the same token."""
        self.close()
        self._start()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Server, Path]]:
    root = tmp_path_factory.mktemp("sdp")
    started = _Server(root)
    try:
        yield started, root
    finally:
        started.close()


def _project(root: Path, name: str, *, written: bool = False, **errors: Any) -> Path:
    """The project copied to ``root/pipelines/name`` (its storage there too), ``errors`` overridden;
    ``written``: the page's ``quarantine init-demo --format declarative`` wrote it there (not copied)."""
    project = root / "pipelines" / name
    if not written:
        shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("data", "__pycache__"))
    # the page's spec and source file are what runs (the project's own are the same, above)
    if written:  # init-demo's spec: the page's, its storage the project's own folder
        page, _ = _spec_lines(block("sdp-spec").body)
        assert _spec_lines((project / "spark-pipeline.yml").read_text(encoding="utf-8")) == (
            page, (project / "storage").resolve().as_uri())
    (project / "spark-pipeline.yml").write_text(
        re.sub(r"(?m)^storage: .*$", f"storage: file://{project / 'storage'}", block("sdp-spec").body),
        encoding="utf-8")
    (project / "transformations" / "orders.py").write_text(block("sdp-source").body, encoding="utf-8")
    if errors:
        conf = project / "orders.yml"
        cfg = yaml.safe_load(conf.read_text(encoding="utf-8"))
        cfg["errors"].update(errors)
        cfg["pipeline"] = cfg["target"]["table"] = name
        cfg["errors"]["deadletterqueue.table.name"] = f"{name}_quarantine"
        conf.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return project


def _logged_since(server: _Server, start: int) -> str:
    """The server's log from byte ``start`` on: what this test's updates logged (the server, and
    its log, serve the module's tests; a test whose update fails on purpose logs its task's ERROR)."""
    with server.log.open("rb") as log:
        log.seek(start)
        return log.read().decode(errors="replace")


def _pipelines_run(server: _Server, project: Path) -> subprocess.CompletedProcess[str]:
    line = block("sdp-run").lines()[-1]  # cd pipelines/orders && PYSPARK_PYTHON=… spark-pipelines run …
    assert "PYSPARK_PYTHON=$(which python) spark-pipelines" in line  # server.env sets it: this interpreter
    argv = line[line.index("spark-pipelines"):].split()
    assert argv[:2] == ["spark-pipelines", "run"] and argv[-1] == f"sc://localhost:{server.port}", argv
    # as the page runs it: no PYTHONPATH (spark-pipelines then puts the folder it runs in on the
    # client's sys.path, and only there); the library is installed in this interpreter
    env = {k: v for k, v in server.env.items() if k != "PYTHONPATH"}
    return subprocess.run([str(BIN / "spark-pipelines"), *argv[1:]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


@dataclass(frozen=True)
class _FirstUpdate:
    """The page's project as its commands write it, after its first update (:func:`first_update`)."""

    project: Path
    done: subprocess.CompletedProcess[str]
    #: the server log's size before it: what the update logged follows
    log_start: int


@pytest.fixture(scope="module")
def first_update(spark: Any, server: tuple[_Server, Path]) -> _FirstUpdate:
    """The page's ``init-demo --format declarative`` in the server's folder, then its first update,
    once for the module: the first test checks them, the staged-table test compares its tables'
    columns with these (the view's), an update fewer than a project of its own."""
    connect, root = server
    start = connect.log.stat().st_size
    # the page's command writes the project and its source: what a wheel user has (issue 54, point 3)
    init = block("sdp-run").commands()[1]
    assert init[:4] == ["quarantine", "init-demo", "--format", "declarative"] and init[5] == "pipelines/orders"
    with contextlib.chdir(root):
        assert main([*init[1:], "--records", str(RECORDS), "--poison-rate", "0.1", "--seed", "38"]) == 0
    project = _project(root, "orders", written=True)
    return _FirstUpdate(project, _pipelines_run(connect, project), start)


def test_every_record_lands_in_exactly_one_table_with_its_raw_bytes_and_a_second_update_adds_nothing(
    spark: Any, server: tuple[_Server, Path], first_update: _FirstUpdate
) -> None:
    connect, root = server
    project, first, start = first_update.project, first_update.done, first_update.log_start
    assert (project / "transformations" / "orders.py").read_text(encoding="utf-8") == block("sdp-source").body
    assert first.returncode == 0 and "Run is COMPLETED" in first.stdout + first.stderr, first.stderr[-4000:]

    warehouse = root / "spark-warehouse"
    source = spark.read.format("delta").load(str(project / "data" / "source"))
    target = spark.read.format("delta").load(str(warehouse / "orders"))
    quarantine = spark.read.format("delta").load(str(warehouse / "orders_quarantine"))
    ok, bad = target.count(), quarantine.count()
    assert ok + bad == RECORDS and 0 < bad < RECORDS // 4
    landed = target.select(*[target[f"_source_{c}"].alias(c) for c in COORDINATES]).unionByName(
        quarantine.select(*COORDINATES))
    assert landed.distinct().count() == RECORDS  # each record once: none in both, none left out
    assert landed.exceptAll(source.select(*COORDINATES)).count() == 0
    joined = quarantine.alias("q").join(source.alias("s"), COORDINATES)  # the raw bytes, byte for byte
    assert joined.count() == bad
    assert joined.where("NOT (q.key <=> s.key AND q.value <=> s.value AND q.headers <=> s.headers)").count() == 0
    assert {r.stage for r in quarantine.select("stage").distinct().collect()} == STAGES
    assert quarantine.where("status <> 'open' OR error_class IS NULL OR fingerprint IS NULL").count() == 0

    second = _pipelines_run(connect, project)
    assert second.returncode == 0, second.stderr[-4000:]
    # each update's exit left ERROR stacks of releaseExecute calls racing its session's close in the
    # server's log (issue 54, point 3): harmless, now dropped by the server's log4j2 config
    logged = _logged_since(connect, start)
    assert "INVALID_HANDLE.SESSION_CLOSED" not in logged and " ERROR " not in logged, logged[-3000:]
    counts = [spark.read.format("delta").load(str(warehouse / t)).count() for t in ("orders", "orders_quarantine")]
    assert counts == [ok, bad]  # the runtime's checkpoints: nothing read twice

    # the operator's commands, through the server (the page's commands, with this project's config)
    operate = block("sdp-operate")
    assert operate.lines()[0] == f"export QUARANTINE_SPARK_REMOTE=sc://localhost:{connect.port}"
    env = {**connect.env, "QUARANTINE_SPARK_REMOTE": f"sc://localhost:{connect.port}"}
    outputs = []
    for argv in operate.commands():
        done = subprocess.run([str(BIN / "quarantine"), *argv[1:]], cwd=root, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(done.stdout)
    stats, inspect, top_errors, views, metrics, report = outputs
    assert "check_order" in top_errors and "in_set" in top_errors, top_errors
    assert "orders_quarantine_open" in views, views
    assert all(stage in stats for stage in STAGES), stats
    assert "parse_order" in inspect and "decode" not in inspect.replace("decoded", ""), inspect
    assert "recorded" in metrics and "orders_metrics" in metrics, metrics
    rows = spark.read.format("delta").load(str(warehouse / "orders_metrics"))
    totals = {r["metric"]: r["v"] for r in rows.where("stage IS NULL AND topic IS NULL").groupBy("metric").agg(
        {"value": "sum"}).withColumnRenamed("sum(value)", "v").collect()}
    assert totals == {"records-in": RECORDS, "records-ok": ok, "records-quarantined": bad, "total-record-errors": bad,
                      "total-records-skipped": bad}, totals
    by_stage = {r["stage"]: r["count"] for r in quarantine.groupBy("stage").count().collect()}
    assert {r["stage"]: r["v"] for r in rows.where("metric = 'records-quarantined' AND stage IS NOT NULL").groupBy(
        "stage").agg({"value": "sum"}).withColumnRenamed("sum(value)", "v").collect()} == by_stage
    again = subprocess.run([str(BIN / "quarantine"), *operate.commands()[4][1:]], cwd=root, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0 and "recorded 0 new batch" in again.stdout, again.stdout + again.stderr[-2000:]
    assert spark.read.format("delta").load(str(warehouse / "orders_metrics")).count() == rows.count()
    page = (root / operate.commands()[5][-1]).read_text(encoding="utf-8")
    assert "orders_quarantine" in page and "check_order" in page, report


def test_tolerance_none_fails_the_update_naming_the_stage_and_the_record(
    spark: Any, server: tuple[_Server, Path]
) -> None:
    connect, root = server
    project = _project(root, "orders_none", tolerance="none")
    write_demo_source(spark, str(project / "data" / "source"), RECORDS, poison_rate=0.1, seed=39)
    done = _pipelines_run(connect, project)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-4000:]
    m = re.search(r"errors\.tolerance is none and stage (\w+) failed the record at (\S+)/(\d+)/(\d+): (\w+)", out)
    assert m and m[1] in STAGES, out[-4000:]


def test_a_replay_queues_records_that_the_next_update_runs_through_the_fixed_stages_once(
    spark: Any, server: tuple[_Server, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    connect, root = server
    project = _project(root, "orders_replay", tolerance="all")
    write_demo_source(spark, str(project / "data" / "source"), RECORDS, poison_rate=0.2, seed=40)
    assert _pipelines_run(connect, project).returncode == 0
    warehouse = root / "spark-warehouse"

    def table(name: str) -> Any:
        return spark.read.format("delta").load(str(warehouse / name))

    ok, bad = table("orders_replay").count(), table("orders_replay_quarantine").count()
    xxx = table("orders_replay_quarantine").where("stage = 'check_order' AND error_class = 'in_set'").count()
    checked = table("orders_replay_quarantine").where("stage = 'check_order'").count()
    assert 0 < xxx < checked  # bad currencies (fixed below) and negative amounts (still bad)

    # the fix: the checks learn the demo's currency XXX
    conf = project / "orders.yml"
    cfg = yaml.safe_load(conf.read_text(encoding="utf-8"))
    rule = next(r for r in cfg["stages"][-1]["options"]["rules"] if r["column"] == "currency")
    rule["values"].append("XXX")
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    update = block("sdp-replay").lines()[1]
    argv = block("sdp-replay").commands()[0]
    assert argv[:2] == ["quarantine", "replay"] and argv[3] == "pipelines/orders/orders.yml", argv
    argv[3] = str(conf)
    env = {**connect.env, "QUARANTINE_SPARK_REMOTE": f"sc://localhost:{connect.port}"}
    for _ in range(2):  # the second replay finds nothing open to queue
        done = subprocess.run([str(BIN / "quarantine"), *argv[1:]], cwd=root, env=env, capture_output=True,
                              text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "queued 0 of 0 selected" in done.stdout, done.stdout
    queue = table("orders_replay_quarantine_replay")
    assert queue.count() == checked
    joined = queue.alias("r").join(table("orders_replay_quarantine").alias("q"), COORDINATES)
    assert joined.count() == checked  # the raw bytes, as quarantined
    assert joined.where("NOT (r.key <=> q.key AND r.value <=> q.value AND r.headers <=> q.headers)").count() == 0

    assert update.startswith("cd pipelines/orders && ") and update.endswith(f"sc://localhost:{connect.port}")
    replayed = _pipelines_run(connect, project)
    assert replayed.returncode == 0, replayed.stderr[-4000:]
    assert "orders_replay_replay" in replayed.stdout + replayed.stderr  # the replay flows ran

    target, quarantine = table("orders_replay"), table("orders_replay_quarantine")
    assert target.count() == ok + xxx, replayed.stdout[-4000:]  # the fixed records, once each
    assert quarantine.count() == bad + (checked - xxx)  # the still-bad ones: a new open row each
    assert quarantine.where("status = 'replayed'").count() == checked
    assert quarantine.where("status = 'open'").count() == bad - xxx
    # every record: in the target once, or open in quarantine once; never both
    open_rows = quarantine.where("status = 'open'").select(*COORDINATES)
    landed = target.select(*[target[f"_source_{c}"].alias(c) for c in COORDINATES]).unionByName(open_rows)
    assert landed.count() == landed.distinct().count() == RECORDS
    # a third update reads nothing new from the queue or the source
    assert _pipelines_run(connect, project).returncode == 0
    counts = (table("orders_replay").count(), table("orders_replay_quarantine").count())
    assert counts == (ok + xxx, bad + checked - xxx)


def _records(spark: Any, topic: str, n: int, seed: int) -> list[Any]:
    rows = orders_source(spark, n, poison_rate=0.1, seed=seed).collect()
    return [Record(topic, None if r["value"] is None else bytes(r["value"]),
                   key=None if r["key"] is None else bytes(r["key"]), partition=i % 2,
                   headers=tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                                 for h in r["headers"] or ()) or None)
            for i, r in enumerate(rows)]


def test_a_pipeline_reading_a_kafka_topic_lands_each_record_once_with_its_bytes_and_reads_only_new_offsets(
    spark: Any, server: tuple[_Server, Path], kafka_broker: Any, new_topics: Any
) -> None:
    connect, root = server
    start = connect.log.stat().st_size
    (topic,) = new_topics("sdp-orders", partitions=2)
    project = _project(root, "orders_kafka", tolerance="all")
    # the topic through the spec's configuration: quarantine.set.<key> settings, as a bundle sets them
    spec = project / "spark-pipeline.yml"
    settings = yaml.safe_load(block("sdp-kafka").body)
    assert settings["configuration"]["quarantine.set.source.topics"] == "[orders]"
    settings["configuration"].update({"quarantine.set.source.bootstrap.servers": kafka_broker.bootstrap,
                                      "quarantine.set.source.topics": f"[{topic}]"})
    spec.write_text(spec.read_text(encoding="utf-8") + yaml.safe_dump(settings), encoding="utf-8")
    produced = produce(kafka_broker.bootstrap, _records(spark, topic, 600, seed=41))

    def landed() -> tuple[Any, Any]:
        warehouse = root / "spark-warehouse"
        target = spark.read.format("delta").load(str(warehouse / "orders_kafka"))
        return target, spark.read.format("delta").load(str(warehouse / "orders_kafka_quarantine"))

    def check(expected: list[Any]) -> None:
        target, quarantine = landed()
        keys = target.select(*[target[f"_source_{c}"].alias(c) for c in COORDINATES]).unionByName(
            quarantine.select(*COORDINATES))
        assert keys.count() == keys.distinct().count() == len(expected)  # once each, none in both
        assert {tuple(r) for r in keys.collect()} == {(topic, p.partition, p.offset) for p in expected}
        by_key = {(p.partition, p.offset): p for p in expected}
        rows = quarantine.select("partition", "offset", "key", "value", "headers").collect()
        assert 0 < len(rows) < len(expected) // 4
        for r in rows:  # the raw bytes, byte for byte, as the broker has them
            p = by_key[(r["partition"], r["offset"])]
            assert (r["key"] and bytes(r["key"]), r["value"] and bytes(r["value"])) == (p.key, p.value)
            got = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"] or ())
            assert (got or None) == p.headers

    first = _pipelines_run(connect, project)
    assert first.returncode == 0, first.stderr[-4000:]
    check(produced)
    more = produce(kafka_broker.bootstrap, _records(spark, topic, 200, seed=42))
    second = _pipelines_run(connect, project)
    assert second.returncode == 0, second.stderr[-4000:]
    # each update's exit left ERROR stacks of releaseExecute calls racing its session's close in the
    # server's log (issue 54, point 3): harmless, now dropped by the server's log4j2 config
    logged = _logged_since(connect, start)
    assert "INVALID_HANDLE.SESSION_CLOSED" not in logged and " ERROR " not in logged, logged[-3000:]
    check(produced + more)  # only the new offsets were read


def test_a_staged_table_runs_the_stages_once_and_gives_the_same_tables(
    spark: Any, server: tuple[_Server, Path], first_update: _FirstUpdate
) -> None:
    connect, root = server
    start = connect.log.stat().st_size
    project = _project(root, "orders_staged", tolerance="all")
    source_file = block("sdp-staged").body
    assert 'staged="table"' in source_file
    (project / "transformations" / "orders.py").write_text(source_file, encoding="utf-8")
    write_demo_source(spark, str(project / "data" / "source"), RECORDS, poison_rate=0.1, seed=41)
    first = _pipelines_run(connect, project)
    assert first.returncode == 0, first.stderr[-4000:]
    warehouse = root / "spark-warehouse"

    def table(name: str) -> Any:
        return spark.read.format("delta").load(str(warehouse / name))

    staged, target, quarantine = (table(f"orders_staged{t}") for t in ("_staged", "", "_quarantine"))
    assert staged.count() == RECORDS  # each record once through the stages
    ok, bad = target.count(), quarantine.count()
    assert ok + bad == RECORDS and 0 < bad < RECORDS // 4
    landed = target.select(*[target[f"_source_{c}"].alias(c) for c in COORDINATES]).unionByName(
        quarantine.select(*COORDINATES))
    assert landed.distinct().count() == RECORDS
    source = spark.read.format("delta").load(str(project / "data" / "source"))
    joined = quarantine.alias("q").join(source.alias("s"), COORDINATES)
    assert joined.where("NOT (q.key <=> s.key AND q.value <=> s.value AND q.headers <=> s.headers)").count() == 0
    assert {r.stage for r in quarantine.select("stage").distinct().collect()} == STAGES
    assert quarantine.where("status <> 'open' OR error_class IS NULL OR fingerprint IS NULL").count() == 0
    # the tables' columns are the view's (the page's project, the first test's update)
    assert first_update.done.returncode == 0, first_update.done.stderr[-4000:]
    assert target.schema == table("orders").schema
    assert quarantine.schema == table("orders_quarantine").schema

    second = _pipelines_run(connect, project)
    assert second.returncode == 0, second.stderr[-4000:]
    # each update's exit left ERROR stacks of releaseExecute calls racing its session's close in the
    # server's log (issue 54, point 3): harmless, now dropped by the server's log4j2 config
    logged = _logged_since(connect, start)
    assert "INVALID_HANDLE.SESSION_CLOSED" not in logged and " ERROR " not in logged, logged[-3000:]
    counts = [table(f"orders_staged{t}").count() for t in ("_staged", "", "_quarantine")]
    assert counts == [RECORDS, ok, bad]  # the runtime's checkpoints: nothing read twice


def test_a_python_stage_whose_module_sits_beside_the_config_runs_in_the_update(
    spark: Any, server: tuple[_Server, Path]
) -> None:
    """The page's python stage: its module beside ``orders.yml`` only (not on the server's
    ``PYTHONPATH``, which holds the repository alone), shipped with the stage by ``declare``."""
    connect, root = server
    project = _project(root, "orders_python", tolerance="all")
    (project / "orders_enrich.py").write_text(block("sdp-python-module").body, encoding="utf-8")
    conf = project / "orders.yml"
    cfg = yaml.safe_load(conf.read_text(encoding="utf-8"))
    (stage,) = yaml.safe_load(block("sdp-python-stage").body)
    cfg["stages"].append(stage)
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    write_demo_source(spark, str(project / "data" / "source"), RECORDS, poison_rate=0.1, seed=43)

    done = _pipelines_run(connect, project)

    out = done.stdout + done.stderr
    assert done.returncode == 0 and "Run is COMPLETED" in out, out[-4000:]
    assert "ModuleNotFoundError" not in out
    warehouse = root / "spark-warehouse"
    target = spark.read.format("delta").load(str(warehouse / "orders_python"))
    quarantine = spark.read.format("delta").load(str(warehouse / "orders_python_quarantine"))
    assert "amount_cents" in target.columns
    assert target.where("amount_cents IS NULL OR amount_cents <> round(amount * 100)").count() == 0
    assert target.where("quantity >= 7").count() == 0
    landed = target.select(*[target[f"_source_{c}"].alias(c) for c in COORDINATES]).unionByName(
        quarantine.select(*COORDINATES))
    assert landed.count() == landed.distinct().count() == RECORDS  # each record once
    bulk = quarantine.where("stage = 'enrich'")
    assert bulk.count() > 0 and {r.error_class for r in bulk.select("error_class").distinct().collect()} == {
        "BulkOrder"}
    assert bulk.where("message NOT LIKE '% items: ship in parts'").count() == 0
    source = spark.read.format("delta").load(str(project / "data" / "source"))
    joined = bulk.alias("q").join(source.alias("s"), COORDINATES)  # the raw bytes, byte for byte
    assert joined.where("q.key <=> s.key AND q.value <=> s.value AND q.headers <=> s.headers").count() == bulk.count()


def test_a_restarted_server_finds_the_tables_of_earlier_updates(
    spark: Any, server: tuple[_Server, Path], first_update: _FirstUpdate
) -> None:
    """Last in the module: the server that served every update above stops and starts again in
    its folder; its in-memory catalog knew the tables' names only while it ran."""
    connect, root = server
    project = first_update.project
    assert first_update.done.returncode == 0, first_update.done.stderr[-4000:]
    warehouse = root / "spark-warehouse"

    def counts() -> list[int]:
        return [spark.read.format("delta").load(str(warehouse / t)).count() for t in ("orders", "orders_quarantine")]

    before = counts()
    connect.restart()

    again = _pipelines_run(connect, project)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION" not in again.stdout + again.stderr
    assert counts() == before  # the tables of the update before the restart; nothing read twice

    # records the source gains after the restart land once, beside the earlier ones
    more = orders_source(spark, 300, poison_rate=0.1, seed=44, topic="orders-more", partitions=1)
    more.write.format("delta").mode("append").save(str(project / "data" / "source"))
    grown = _pipelines_run(connect, project)
    assert grown.returncode == 0, (grown.stdout + grown.stderr)[-4000:]
    assert sum(counts()) == sum(before) + 300
    env = {**connect.env, "QUARANTINE_SPARK_REMOTE": f"sc://localhost:{connect.port}"}
    stats = subprocess.run([str(BIN / "quarantine"), "stats", "--conf", str(project / "orders.yml")], cwd=root,
                           env=env, capture_output=True, text=True, timeout=600, check=False)
    assert stats.returncode == 0 and "check_order" in stats.stdout, stats.stdout + stats.stderr[-3000:]
