"""Every test has exactly one tier, and the tier follows from where it lives and what it uses.

The checks that collect the whole suite or start pytest-xdist over stand-ins are
tests/e2e/test_suite_layout.py's (processes of their own: the e2e tier, out of ``make test-fast``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import TIERS, tier_of

REPO = Path(__file__).resolve().parents[2]

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


def test_only_tests_e2e_asks_for_the_broker() -> None:
    """The folders are the tiers but for kafka, the e2e tests that use the broker (docs/contributing.md)."""
    asking = [p.relative_to(REPO).as_posix() for folder in ("unit", "integration")
              for p in (REPO / "tests" / folder).rglob("*.py") if "kafka_broker" in p.read_text(encoding="utf-8")
              and p.name != "test_tiers.py"]
    assert asking == []
