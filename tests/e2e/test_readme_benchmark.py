"""The benchmark commands the README names run as written (smaller data).

``python -m benchmarks.bench_debugging`` backs the manual's figures for PySpark's
DataFrame debugging, and ``make bench`` (``python -m benchmarks.run``) every figure. Their
speed is measured in benchmarks/README.md, not here; these tests run the same commands on tiny
sources and one repeat, each in a process of its own (its own Spark driver), and check
that they print every arm, and that ``make bench``'s results go where they are told. The make
bench test runs the command over its two cheapest benchmarks: each of the twelve is run as the
command runs it by tests/e2e/test_benchmarks_smoke.py (``bench_expectations``' three cases
there), and the command's loop over all of them is checked in tests/unit/test_benchmarks_import.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run import BENCHMARKS, RESULTS
from tests.support.readme import manual_text

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python -m benchmarks.bench_debugging"


def test_the_readmes_debugging_benchmark_command_runs_and_reports_every_arm(tmp_path: Path) -> None:
    assert f"`{COMMAND}`" in manual_text()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_debugging", "--records", "2000", "--repeats", "1", "--smoke"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "BENCH_DIR": str(tmp_path / "bench")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = dict(re.findall(r"^\| (.+?) \| ([0-9.]+) \|", done.stdout, flags=re.M))
    arms = {
        "plain", "quarantine (debugging off)", "quarantine (debugging on)",
        "micro-batch columns (debugging off)", "micro-batch columns (debugging on)",
    }
    assert set(rows) == arms, done.stdout
    assert all(float(v) > 0 for v in rows.values()), rows
    # each run wrote its tables under BENCH_DIR, and deleted its output afterwards
    assert (tmp_path / "bench").is_dir()
    assert not any((tmp_path / "bench" / "out").iterdir())


def _results_files() -> dict[str, float]:
    return {p.name: p.stat().st_mtime for p in RESULTS.glob("*.json")}


#: The benchmarks the make bench test runs the command over: the cheapest two (one reads a
#: source of ``--records``, in a JVM; the other is pandas and Arrow alone). Every benchmark is run
#: as the command runs it by tests/e2e/test_benchmarks_smoke.py, and the command's loop over all
#: of them is tests/unit/test_benchmarks_import.py's (all twelve here took 623 s on two busy cores).
CHEAPEST = ("python_stage", "vectorized_fallback")


@pytest.mark.timeout(900)
def test_make_bench_runs_the_benchmarks_and_writes_where_it_is_told(tmp_path: Path) -> None:
    assert "`make bench`" in manual_text()
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^bench:.*\n\t\.venv/bin/python -m benchmarks\.run$", makefile, re.M), "make bench's command"
    assert set(CHEAPEST) < set(BENCHMARKS)
    before = _results_files()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--records", "2000", "--repeat", "1", "--smoke",
         "--memory-small", "2000", "--memory-large", "4000", *(a for name in CHEAPEST for a in ("--only", name))],
        cwd=REPO, capture_output=True, text=True, timeout=800,
        env={**os.environ, "BENCH_DIR": str(tmp_path / "bench"), "BENCH_RESULTS_DIR": str(tmp_path / "results")},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    (path,) = (tmp_path / "results").glob("*.json")
    (run,) = json.loads(path.read_text(encoding="utf-8"))["runs"]
    assert run["args"]["records"] == 2000 and run["args"]["repeat"] == 1 and run["args"]["smoke"] is True
    assert run["args"]["only"] == list(CHEAPEST)
    assert set(run["other_benchmarks"]) == set(CHEAPEST)
    assert all(re.fullmatch(r"ran \(.+, [0-9.]+ s\)", v) for v in run["other_benchmarks"].values()), run[
        "other_benchmarks"]
    assert {row["bench"] for row in run["rows"]} == set(CHEAPEST)
    # --records reached the benchmark that reads a source
    assert any("2,000" in row["case"] for row in run["rows"] if row["bench"] == "python_stage"), run["rows"]
    # every row in the printed table too, and every benchmark's own table above it
    for name in CHEAPEST:
        assert f"\n## {name}\n" in done.stdout
        assert re.search(rf"^\| {name} \| .+ \| [0-9.]+ (?:s|ms|MiB) \|", done.stdout, re.M), name
        assert re.search(rf"^{name}: [0-9.]+ s$", done.stdout, re.M), name  # where the run's time went
    assert f"results: {path}" in done.stdout
    assert _results_files() == before, "benchmarks/results was written"
