"""The process benchmark's ``--baseline REV``: another commit's code runs the quarantine arm, side by side."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.bench_memory import TreeMemory
from benchmarks.bench_process import BASELINE, Sample, _rows, baseline_tree


def _sample(arm: str, seconds: float) -> Sample:
    return Sample(arm, TreeMemory(seconds, 100.0, 110.0, 90.0, {}, 0), 10, 1)


def test_the_baseline_row_compares_each_commits_ratio_to_the_split_job() -> None:
    by_arm = {
        "quarantine": [_sample("quarantine", s) for s in (78.0, 80.0, 99.0)],
        BASELINE: [_sample(BASELINE, s) for s in (82.0, 84.0, 79.0)],
        "handwritten_split": [_sample("handwritten_split", s) for s in (50.0, 52.0, 54.0)],
        "handwritten_good_only": [_sample("handwritten_good_only", s) for s in (40.0, 41.0, 42.0)],
    }
    rows = _rows(2_000_000, 0.01, by_arm, "f310327")
    (row,) = [r for r in rows if "this commit vs f310327" in r.case]
    assert (row.baseline_s, row.subject_s) == (82.0 / 52.0, 80.0 / 52.0)
    assert row.met and row.goal == "<= 1.00x (no worse than f310327)"
    slower = {**by_arm, "quarantine": [_sample("quarantine", s) for s in (90.0, 91.0, 92.0)]}
    (worse,) = [r for r in _rows(2_000_000, 0.01, slower, "f310327") if "vs f310327" in r.case]
    assert not worse.met
    assert not [r for r in _rows(2_000_000, 0.01, {a: xs for a, xs in by_arm.items() if a != BASELINE})
                if "this commit vs" in r.case]


def test_the_baseline_tree_is_a_worktree_of_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_DIR", str(tmp_path))
    repo = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    tree = baseline_tree("HEAD")
    try:
        assert tree == tmp_path / "worktrees" / head[:12]
        assert (tree / "quarantine" / "__init__.py").is_file()
        got = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                             text=True).stdout.strip()
        assert got == head
        assert baseline_tree(head) == tree, "made once per commit"
        with pytest.raises(subprocess.CalledProcessError):
            baseline_tree("no-such-revision")
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)
