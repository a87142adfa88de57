"""The benchmark command the README's Performance section names runs as written (smaller data).

``python -m benchmarks.bench_debugging`` backs the README's figures for PySpark's
DataFrame debugging. Its speed is measured in benchmarks/README.md, not here; this test
runs the same command on 20k records and one repeat, in a process of its own (its own
Spark driver), and checks it prints every arm of both parts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python -m benchmarks.bench_debugging"


def test_the_readmes_debugging_benchmark_command_runs_and_reports_every_arm(tmp_path: Path) -> None:
    assert f"`{COMMAND}`" in (REPO / "README.md").read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_debugging", "--records", "20000", "--repeats", "1"],
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
