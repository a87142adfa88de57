"""Every test has exactly one tier, and the tier follows from where it lives and what it uses."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TIERS, tier_of


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


def test_make_test_fast_runs_exactly_the_unit_tier() -> None:
    """The README's `make test-fast`: its pytest selects unit tests only, and all of them."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    recipe = subprocess.run(["make", "-n", "test-fast"], cwd=repo, capture_output=True, text=True, check=True)
    assert "-m pytest tests -q -m unit" in recipe.stdout
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "-m", "unit", "--collect-only", "-p", "no:cacheprovider"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    ids = [ln for ln in collected if "::" in ln]
    assert len(ids) > 300 and all(ln.startswith("tests/unit/") for ln in ids)


def test_make_test_runs_every_tier_on_two_workers_with_process_tests_grouped() -> None:
    """`make test` (CI's command) runs all tiers on two xdist workers; the modules that
    start their own Spark/broker processes exist and share one xdist group."""
    import subprocess

    from tests.conftest import PROCESS_MODULES

    repo = Path(__file__).resolve().parents[2]
    recipe = subprocess.run(["make", "-n", "test"], cwd=repo, capture_output=True, text=True, check=True)
    line = next(ln for ln in recipe.stdout.splitlines() if "-m pytest" in ln)
    assert line.split("-m pytest", 1)[1].split() == ["tests", "-q", "-n", "2", "--dist", "loadgroup"]
    assert all((repo / m).is_file() for m in PROCESS_MODULES)
    ci = (repo / ".ci" / "run").read_text()
    assert "make test\n" in ci
