"""The runner treats the expectation stage as a stage like any other (issue 11).

A batch goes one way: the runner (``batch/run.py``), the pipeline's pure parts
(``pipeline.py``) and the runners know the :mod:`quarantine.batch.verdict` protocol,
never what is inside the expectation stage (GX, suites, translation). A stage
that judges a batch is found by that protocol alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "quarantine"
RUNNER_SIDE = [
    "batch/run.py", "pipeline.py", "runners/batch.py", "runners/streaming.py", "runners/foreach_batch.py",
    "runners/relay.py", "runners/replay.py", "runners/errant.py",
]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("module", RUNNER_SIDE)
def test_the_runner_side_never_imports_the_expectation_package(module: str) -> None:
    imported = _imports(PACKAGE / module)
    inside = sorted(m for m in imported if m == "quarantine.expectations" or m.startswith("quarantine.expectations."))
    assert not inside, f"{module} imports {inside}: reach the stage through quarantine.batch.verdict instead"


def test_the_expectation_stage_is_found_by_the_protocol() -> None:
    from quarantine.expectations.stage import ExpectationStage
    from quarantine.stage import JudgingStage

    assert issubclass(ExpectationStage, JudgingStage)


#: What reads or writes a table, or brings rows to the driver: a module that calls none is pure.
IO_CALLS = frozenset({"collect", "count", "first", "take", "toPandas", "toLocalIterator", "write", "writeStream",
                      "save", "saveAsTable", "insertInto", "merge", "execute", "sql", "table", "load", "call"})
IO_MODULES = frozenset({"quarantine.tables", "quarantine.sinks.ownership", "quarantine.batch.agreement",
                        "quarantine.batch.settle"})


def _io(path: Path) -> list[str]:
    """The I/O calls and I/O modules ``path`` uses (``name`` of each, with its line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f"{node.func.attr} (line {node.lineno})" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in IO_CALLS]
    return found + sorted(m for m in _imports(path) if m in IO_MODULES)


def test_the_plan_is_pure() -> None:
    """batch/plan.py reads no table, writes none and collects nothing (issue 51): batch/settle.py does that."""
    assert _io(PACKAGE / "batch" / "plan.py") == []


def test_the_purity_check_sees_the_settling_io() -> None:
    found = _io(PACKAGE / "batch" / "settle.py")
    assert any(f.startswith("collect") for f in found) and "quarantine.tables" in found
