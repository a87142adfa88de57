"""Every test has exactly one tier, and the tier follows from where it lives and what it uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TIERS, tier_of
from tests.support.collected import OUTPUT_ENV

REPO = Path(__file__).resolve().parents[2]

#: One worker runs this module (`make test-fast` and `make test` distribute by loadgroup): the
#: whole suite is collected once for it (``collected``), not once by each worker.
pytestmark = pytest.mark.xdist_group("suite-layout")


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The whole suite collected once, as ``make test`` collects it: node id -> its marker names.

    A selection such as ``-m unit`` or ``-m "matrix and kafka"`` is the tests whose markers
    satisfy it (tests/support/collected.py writes them).
    """
    out = tmp_path_factory.mktemp("collected") / "items.json"
    subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "--collect-only", "-p", "no:cacheprovider",
         "-p", "tests.support.collected"],
        cwd=REPO, capture_output=True, text=True, check=True, env={**os.environ, OUTPUT_ENV: str(out)},
    )
    return {nodeid: set(markers) for nodeid, markers in json.loads(out.read_text())}


def test_a_test_in_tests_unit_is_unit() -> None:
    assert tier_of(Path("tests/unit/test_x.py"), ["tmp_path"]) == "unit"


def test_a_test_in_tests_integration_is_spark() -> None:
    assert tier_of(Path("tests/integration/test_x.py"), ["spark", "table_dir"]) == "spark"


def test_a_test_using_the_broker_is_kafka_wherever_it_lives() -> None:
    assert tier_of(Path("tests/e2e/test_x.py"), ["spark", "kafka_broker"]) == "kafka"


def test_the_rest_of_tests_e2e_is_e2e() -> None:
    assert tier_of(Path("tests/e2e/test_mlflow.py"), ["spark", "tmp_path"]) == "e2e"


def test_the_tiers_are_the_markers_pyproject_registers() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert all(f'"{t}: ' in text for t in TIERS)


def test_make_test_fast_runs_exactly_the_unit_tier(collected: dict[str, set[str]]) -> None:
    """The README's `make test-fast`: its pytest selects unit tests only, and all of them."""
    recipe = subprocess.run(["make", "-n", "test-fast"], cwd=REPO, capture_output=True, text=True, check=True)
    assert "-m pytest tests/unit -q -m unit -n 2 --dist loadgroup" in recipe.stdout
    unit = {n for n, markers in collected.items() if "unit" in markers}
    assert len(unit) > 300 and unit == {n for n in collected if n.startswith("tests/unit/")}


def test_make_test_runs_every_tier_on_two_workers_with_process_tests_grouped() -> None:
    """`make test` (CI's command) runs all tiers on two xdist workers; the modules that
    start their own Spark/broker processes exist and share one xdist group."""
    from tests.conftest import PROCESS_MODULES

    recipe = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True)
    line = next(ln for ln in recipe.stdout.splitlines() if "-m pytest" in ln)
    assert line.split("-m pytest", 1)[1].split() == [
        "tests", "-q", "-n", "2", "--dist", "loadgroup", "--durations=30"  # no -m: every tier
    ]
    assert all((REPO / m).is_file() for m in PROCESS_MODULES)
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test\n" in ci


def test_process_starting_modules_run_on_one_worker_under_make_test(tmp_path: Path) -> None:
    """`make test`'s loadgroup: every test of PROCESS_MODULES, and every test that asks for
    ``child_drivers``, lands on the same xdist worker.

    Runs tests/conftest.py for real over stand-in modules that only record their worker.
    """
    import shutil

    from tests.conftest import MODULE_GROUPS, PROCESS_MODULES

    (tmp_path / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    shutil.copy(REPO / "tests" / "tier_times.py", tmp_path / "tests" / "tier_times.py")  # the conftest imports it
    seen = tmp_path / "seen"
    seen.mkdir()
    body = (
        "import os, pathlib, time\n"
        "def _note(name):\n"
        "    time.sleep(0.2)\n"
        f"    pathlib.Path({str(seen)!r}, name).write_text(os.environ['PYTEST_XDIST_WORKER'])\n"
        + "".join(f"def test_{i}():\n    _note(__name__ + '{i}')\n" for i in range(3))
    )
    # a test that asks for the child drivers joins the group, wherever it lives
    drivers_body = (
        body + "import pytest\n@pytest.fixture\ndef child_drivers():\n    return None\n"
        "def test_drivers(child_drivers):\n    _note(__name__ + 'd')\n"
    )
    drivers_module = "tests/integration/test_with_drivers.py"
    stand_ins = [*PROCESS_MODULES, *MODULE_GROUPS, drivers_module, "tests/integration/test_other.py",
                 "tests/e2e/test_other.py"]
    for module in stand_ins:
        path = tmp_path / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(drivers_body if module == drivers_module else body)
        for package in (path.parent, tmp_path / "tests"):
            (package / "__init__.py").touch()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    workers = {p.name: p.read_text() for p in seen.iterdir()}
    modules = {m.removesuffix(".py").replace("/", ".") for m in PROCESS_MODULES}
    grouped = {w for name, w in workers.items() if name.rstrip("012") in modules}
    grouped.add(workers["tests.integration.test_with_driversd"])
    assert len(workers) == 3 * len(stand_ins) + 1
    assert len(grouped) == 1, workers
    # the modules of a MODULE_GROUPS group run on one worker (a server starts once; one port)
    for group in set(MODULE_GROUPS.values()):
        names = {m.removesuffix(".py").replace("/", ".") for m, g in MODULE_GROUPS.items() if g == group}
        assert len({w for n, w in workers.items() if n.rstrip("012") in names}) == 1, workers
    assert not set(MODULE_GROUPS) & PROCESS_MODULES


def test_ci_runs_the_full_suite_and_then_the_matrix_subset_on_the_second_pair() -> None:
    """`.ci/run`: `make test` (Python 3.11 + Spark 4.1, every tier), then `make test-matrix`:
    the `matrix` subset with .venv-py312-spark40 (Python 3.12 + Spark 4.0, its Delta)."""
    commands = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()
                if ln.strip().startswith("make ")]
    assert commands == ["make test", "make test-matrix"]
    recipe = subprocess.run(["make", "-n", "test-matrix"], cwd=REPO, capture_output=True, text=True, check=True)
    lines = recipe.stdout.splitlines()
    assert "bash scripts/bootstrap_matrix.sh" in lines
    line = next(ln for ln in lines if "-m pytest" in ln)
    # the second pair's sessions generate code, as a user's do (tests/conftest.py: INTERPRETED)
    assert line.startswith("QUARANTINE_TEST_CODEGEN=1 .venv-py312-spark40/bin/python -m pytest ")
    assert line.split("-m pytest", 1)[1].split() == ["tests", "-q", "-m", "matrix"]
    script = (REPO / "scripts" / "bootstrap_matrix.sh").read_text()
    assert "python3.12" in script and "scripts/constraints-spark40.txt" in script
    assert 'venv="${MATRIX_VENV:-.venv-py312-spark40}"' in script


def test_the_matrix_subset_covers_each_item_of_the_support_matrix_with_collected_tests(
    collected: dict[str, set[str]],
) -> None:
    """Batch, streaming from Kafka, replay, expectations and MLflow each have a test in the
    subset; every listed node id exists, and `-m matrix` collects exactly them."""
    from tests.conftest import MATRIX, MATRIX_TESTS

    assert set(MATRIX) == {"batch", "streaming from Kafka", "replay", "expectations", "MLflow"}
    assert all(MATRIX.values())
    assert all("kafka" in n for n in MATRIX["streaming from Kafka"])
    assert any("mlflow" in n for n in MATRIX["MLflow"])
    matrix = {n.split("[", 1)[0] for n, markers in collected.items() if "matrix" in markers}
    assert matrix == MATRIX_TESTS
    # a test that proves Kafka streaming really uses the broker (the kafka tier)
    kafka = {n for n, markers in collected.items() if {"matrix", "kafka"} <= markers}
    assert kafka == set(MATRIX["streaming from Kafka"])


def test_the_run_ends_with_each_tiers_seconds_and_its_wall_time() -> None:
    """``make test`` prints each tier's time at the end (issue 50): the reports' seconds per tier."""
    from tests.tier_times import TierTimes

    times = TierTimes(TIERS)
    for nodeid, tier, when, seconds, outcome in [
        ("a", "unit", "setup", 0.5, "passed"), ("a", "unit", "call", 1.0, "passed"),
        ("a", "unit", "teardown", 0.25, "passed"), ("b", "e2e", "setup", 30.0, "failed"),
    ]:
        times.add(pytest.TestReport(nodeid, ("x", 1, nodeid), {tier: 1}, outcome, None, when, duration=seconds))
    lines = times.lines()
    assert lines[0] == "  unit:     1 tests,      1.8 s (0.5 s of it set-up)", lines
    assert lines[1] == "   e2e:     1 tests,     30.0 s (30.0 s of it set-up)", lines
    assert lines[2].startswith("  wall: 0:0") and lines[2].endswith("for 31.8 test seconds"), lines
    # and by module: the slowest first, each with its tier, tests and set-up
    assert times.module_lines() == [
        "    30.0 s   e2e    1 tests (30.0 s set-up)  b",
        "     1.8 s  unit    1 tests (0.5 s set-up)  a",
    ]
    assert times.module_lines(top=1) == times.module_lines()[:1]
