"""The day's benchmark results file keeps every run (benchmarks/run.py).

benchmarks/README.md cites runs by their time and commit; a later run with the same
``--only`` selection must not drop the samples an earlier section quotes.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.run import _earlier_runs


def test_a_run_keeps_the_days_earlier_runs_of_the_same_selection(tmp_path: Path) -> None:
    path = tmp_path / "2026-11-26.json"
    runs = [{"args": {"only": ["streaming"]}, "rows": [1]}, {"args": {"only": ["pipeline", "dqx"]}, "rows": [2]}]
    path.write_text(json.dumps({"runs": runs}), encoding="utf-8")
    assert _earlier_runs(path) == runs  # also when this run selects ["streaming"] again


def test_a_missing_or_unreadable_file_has_no_runs(tmp_path: Path) -> None:
    assert _earlier_runs(tmp_path / "none.json") == []
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    assert _earlier_runs(bad) == []
