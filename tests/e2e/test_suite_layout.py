"""The suite's own wiring, run end to end: the whole suite collected, and pytest-xdist started.

Each test here starts pytest as a process of its own over the whole suite (its collection
imports every test module: Spark, Kafka, MLflow, GX) or over stand-in modules on two xdist
workers, so they are the e2e tier's (tests/conftest.py: ``tier_of``), not the unit tier's
edit loop (issue 50: ``make test-fast``). The rules they check are
tests/unit/test_tiers.py's; ``make test`` runs both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.collected import OUTPUT_ENV

REPO = Path(__file__).resolve().parents[2]

#: One worker runs this module (``make test`` distributes by loadgroup): the whole suite is
#: collected once for it (``collected``), not once by each worker.
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



def test_make_test_fast_runs_exactly_the_unit_tier(collected: dict[str, set[str]]) -> None:
    """The README's `make test-fast`: its pytest selects unit tests only, and all of them."""
    recipe = subprocess.run(["make", "-n", "test-fast"], cwd=REPO, capture_output=True, text=True, check=True)
    assert "-m pytest tests/unit -q -m unit -n 2 --dist loadgroup" in recipe.stdout
    unit = {n for n, markers in collected.items() if "unit" in markers}
    assert len(unit) > 300 and unit == {n for n in collected if n.startswith("tests/unit/")}


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
