"""Shared fixtures and the test tiers.

One local Spark session (Delta on, UI off) per test process.

Tiers, marked here from where a test lives and what it asks for (not by hand):

* ``unit`` — ``tests/unit``: no JVM. A unit test that asks for ``spark`` is an error.
* ``spark`` — ``tests/integration``: local Spark + Delta.
* ``kafka`` — a test that uses the real broker (the ``kafka_broker`` fixture).
* ``e2e`` — the rest of ``tests/e2e``: real processes, a real ``mlflow server``.

``matrix`` is not a tier: it marks the end-to-end subset of :data:`MATRIX` (batch,
streaming from Kafka, replay, expectations, MLflow) that ``make test-matrix`` runs on the
support matrix's second runtime pair (docs/getting-started.md: Support matrix).

``make test-fast`` runs ``-m unit``; ``make test`` runs every tier on two pytest-xdist
workers (``--dist loadgroup``). Each worker has its own Spark session and, when a test
asks, its own broker. Modules in :data:`PROCESS_MODULES` start Spark or broker
processes of their own (crashes, concurrent writers), and every test that uses the
``child_drivers`` fixture, share one worker group, so two of them never compete for the
two cores at once, and the child drivers are started once. A module of :data:`MODULE_GROUPS`
is a group of its own (its server starts once). Everything else either worker takes as it
frees up (docs/contributing.md: Tests and their tiers; the figures: benchmarks/README.md, Suite history).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.tier_times import TierTimes

os.environ.setdefault("QUARANTINE_SPARK_LOG_LEVEL", "ERROR")
# The repository keeps every jar it resolves in .cache/jars (the library's spark-<version>/,
# the broker's kafka/ from scripts/resolve_jars.sh), not in the user's cache; child
# processes of tests inherit it.
os.environ.setdefault("QUARANTINE_JAR_CACHE", str(Path(__file__).resolve().parent.parent / ".cache" / "jars"))


TIERS = ("unit", "spark", "kafka", "e2e")

# Test modules whose tests start processes of their own (see the module docstring); a
# test that asks for the ``child_drivers`` fixture joins them wherever it lives. Not here:
# tests that start one process at a time and wait for it (the wheel, the demo's quiet
# output, the README's benchmark commands, tests/e2e/test_benchmarks_smoke.py, the replay
# killed at a marker): the group runs on one worker, in one piece, so it is the suite's
# critical path, and such a test costs the same on either worker (docs/contributing.md).
PROCESS_MODULES = frozenset({
    "tests/e2e/test_cluster.py",  # a standalone Spark cluster (master, two workers) and its drivers
    "tests/e2e/test_concurrent_writers.py",
    "tests/e2e/test_kafka_crash.py",
    "tests/e2e/test_kafka_local_demo.py",  # the demo's own broker and a continuous run's driver
})

#: Modules whose tests share a Spark Connect server the module starts once, its clients run
#: one at a time: a group of their own (module -> group), so a module's tests run on one worker
#: and its server starts once, beside the processes group rather than in it and after it. These
#: two share one group: each binds port 15002 (the manual's ``connect-server --port 15002``, and
#: pyspark's default for the README's ``QUARANTINE_SPARK_REMOTE=local[2]``), so never at once.
MODULE_GROUPS: dict[str, str] = {
    "tests/e2e/test_declarative_pipeline.py": "connect-15002",  # spark-pipelines against its server
    "tests/e2e/test_spark_connect.py": "connect-15002",  # each command a client of the module's server
}

# The end-to-end subset ``make test-matrix`` runs on the second runtime pair (Python 3.12 +
# Spark 4.0, .venv-py312-spark40), by the item of the support matrix each test proves:
# node ids (a parametrised test's every case). A test may prove several items.
_DEMO = "tests/integration/test_demo_cli.py::test_the_demo_runs_logs_to_mlflow_and_replays_through_the_cli"
_EXPECT_MLFLOW = "tests/integration/test_expectations_stage.py::test_warn_breaches_are_reported_and_logged_to_mlflow"
MATRIX: dict[str, tuple[str, ...]] = {
    "batch": (
        _DEMO,
        "tests/integration/test_runner_batch.py::test_every_record_lands_in_exactly_one_table",
        # Spark 4.0 has no approx_top_k: the per-topic counts' replacement, on each pair
        "tests/integration/test_runner_metrics.py::"
        "test_per_topic_counts_without_approx_top_k_are_exact_and_merge_across_partitions",
        # spark-avro 4.0.2 under Spark 4.0.4 (the newest 4.0 spark-avro on Maven Central)
        "tests/integration/test_stage_avro.py::test_every_poison_kind_gets_its_own_class_and_a_message_naming_the_schema_id",
    ),
    "streaming from Kafka": (
        "tests/e2e/test_kafka_streaming.py::test_available_now_puts_every_record_in_exactly_one_table_with_raw_bytes",
        "tests/e2e/test_kafka_streaming.py::test_restart_from_checkpoint_reads_only_new_records_and_keeps_the_run_id",
        # serverless and shared clusters (DBR 17.3 is Spark 4.0) stream over Spark Connect
        "tests/e2e/test_spark_connect.py::"
        "test_a_kafka_stream_runs_over_spark_connect_exactly_once_and_fails_as_itself_on_a_breach",
    ),
    "replay": (
        _DEMO,
        "tests/integration/test_replay.py::test_replay_after_a_fix_moves_fixed_records_to_the_target_once",
    ),
    "expectations": (
        _DEMO,
        _EXPECT_MLFLOW,
        "tests/integration/test_expectations_stage.py::"
        "test_rows_failing_translated_expectations_are_routed_with_every_failure",
    ),
    "MLflow": (
        _DEMO,
        _EXPECT_MLFLOW,
        "tests/e2e/test_mlflow_server.py::test_pipeline_run_with_mlflow_down_writes_its_data",
    ),
}
MATRIX_TESTS = frozenset(n for ids in MATRIX.values() for n in ids)


def tier_of(path: Path, fixtures: Iterable[str]) -> str:
    """The tier of a test at ``path`` that uses ``fixtures`` (see the module docstring)."""
    parts = path.parts
    if "unit" in parts:
        return "unit"
    if "kafka_broker" in fixtures:
        return "kafka"
    if "e2e" in parts:
        return "e2e"
    return "spark"


# tryfirst: xdist's worker hook turns an ``xdist_group`` mark into the nodeid suffix the
# loadgroup scheduler reads; a mark added after it is never seen, and the process-starting
# tests ran on both workers at once (test_process_starting_modules_run_on_one_worker…).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        tier = tier_of(Path(str(item.fspath)), fixtures)
        if tier == "unit" and "spark" in fixtures:
            raise pytest.UsageError(f"{item.nodeid}: a unit test may not start Spark (move it to tests/integration)")
        item.add_marker(getattr(pytest.mark, tier))
        if item.nodeid.split("[", 1)[0] in MATRIX_TESTS:
            item.add_marker(pytest.mark.matrix)
        module = _relative(Path(str(item.fspath)))
        if module in PROCESS_MODULES or "child_drivers" in fixtures:
            item.add_marker(pytest.mark.xdist_group("processes"))
        elif module in MODULE_GROUPS:
            item.add_marker(pytest.mark.xdist_group(MODULE_GROUPS[module]))


_TIMES = TierTimes(TIERS)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TIMES.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The slowest modules' test seconds, then each tier's and the run's wall time, last (``make test``
    ends with them)."""
    terminalreporter.section("time by module (the 25 slowest)")
    for line in _TIMES.module_lines(25):
        terminalreporter.write_line(line)
    terminalreporter.section("time by tier")
    for line in _TIMES.lines():
        terminalreporter.write_line(line)


def _relative(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[parts.index("tests"):]) if "tests" in parts else str(path)


#: Spark evaluates expressions interpreted, without generating and compiling Java code:
#: the two keys Spark's own ``CodegenInterpretedTest`` sets for its interpreted path
#: (``spark.sql.codegen.factoryMode`` is a conf Spark keeps for tests). A test's plans are
#: new (its own config, stages and literals), so on test-sized data Janino's compiles are
#: a large share of a query's time: 174 -> 139 s for test_record_integrity and
#: test_runner_batch (26 tests, one process, one after the other). It applies to this
#: process's session, the child drivers and the Spark Connect server test_spark_connect's
#: commands share only. Every other ``quarantine`` command a test
#: starts as a process (the CLI, Kafka streams, crash and concurrency runs, the wheel),
#: the matrix run (``QUARANTINE_TEST_CODEGEN=1``) and ``make bench`` generate code, as
#: a user's session does; a benchmark run with ``--smoke`` (the smoke tests) interprets in
#: its child processes too (``benchmarks.add_smoke``).
INTERPRETED: dict[str, str] = (
    {}
    if os.environ.get("QUARANTINE_TEST_CODEGEN") == "1"
    else {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from quarantine.spark.session import get_spark

    session = get_spark(
        "quarantine-tests",
        {
            "spark.sql.shuffle.partitions": "2",
            # test data is small: shuffles start at 2 partitions, not the library's 64 (sized for
            # 5M-record batches, quarantine.spark.session); 22 % off a module of MERGE-heavy tests
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "3g",
            "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
            **INTERPRETED,
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def child_drivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Child Spark drivers (own processes, own JVMs), started once per worker and reused.

    Only tests in :data:`PROCESS_MODULES` use them (they run on one worker).
    """
    from tests.support.drivers import CHILD_SPARK, DriverPool

    conf = {**CHILD_SPARK, **INTERPRETED}
    pool = DriverPool(tmp_path_factory.mktemp("drivers"), conf, Path(__file__).resolve().parents[1])
    yield pool
    pool.close()


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A fresh directory for this test's Delta tables."""
    d = tmp_path / "tables"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def report_conf(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config of :func:`tests.helpers.report_run`'s tables (data in every report figure),
    built once per worker for the report, dashboard and browser tests; they only read them."""
    from tests.helpers import report_run

    conf: Path = report_run(spark, tmp_path_factory.mktemp("report_run"))
    return conf


# --- MLflow stores for the spark tier (tests/integration) ---------------------------------
# A fresh ``sqlite:///`` MLflow store runs every one of MLflow's schema migrations when it is
# first opened: 12-22 s of CPU on this 2-core machine, more than the Spark run it records.
# Each test still gets its own store (a file under its own tmp_path, never the repository's
# mlflow.db): a copy of one store migrated once per worker, byte for byte what MLflow's first
# open would leave (its tables at the head revision and the Default experiment), 0.4 s.


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite store, migrated to MLflow's head revision once per worker.

    Tests do not open it: they copy it (:func:`mlflow_store`, :func:`tests.helpers.put_mlflow_store`).
    """
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("mlflow_template")
    path = folder / "mlflow.db"
    store = SqlAlchemyStore(f"sqlite:///{path}", str(folder / "mlruns"))
    store.engine.dispose()
    return path


@pytest.fixture
def mlflow_store(tmp_path: Path, mlflow_template: Path) -> str:
    """This test's own MLflow store: ``sqlite:///<tmp_path>/mlflow.db``, migrated, with no run."""
    from tests.helpers import put_mlflow_store

    return put_mlflow_store(mlflow_template, tmp_path)
