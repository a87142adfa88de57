"""Every benchmark module imports and has the entry point ``benchmarks.run`` calls.

The benchmarks are measured separately, not by the test suite (which runs the commands
the READMEs name with tiny sizes, tests/e2e/test_readme_benchmark.py, and each benchmark as
``make bench`` calls it, tests/e2e/test_benchmarks_smoke.py), so this is what
keeps a renamed helper from breaking one silently.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks import SMOKE_ENV
from benchmarks.run import _MODULES, _TAKE_RECORDS, BENCHMARKS, _argv


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_module_imports_with_its_entry_point(name: str) -> None:
    module = importlib.import_module(_MODULES[name])
    # benchmarks.run calls main(argv) with the options it was given: it must take an argv list
    assert "argv" in inspect.signature(module.main).parameters


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_repeat_and_records_given_to_benchmarks_run_reach_every_benchmark(name: str) -> None:
    given = argparse.Namespace(records=1234, repeat=2, memory_small=10, memory_large=20, profile=False, smoke=False)
    argv = _argv(name, given)
    assert argv[argv.index("--repeat") + 1] == "2"
    assert ("--records" in argv) == (name in _TAKE_RECORDS)
    assert "--smoke" not in argv
    # and nothing when nothing was given: each benchmark keeps its own defaults
    none = argparse.Namespace(records=None, repeat=None, memory_small=10, memory_large=20, profile=False, smoke=False)
    assert "--repeat" not in _argv(name, none) and "--records" not in _argv(name, none)


def _help(module_name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``main(["--help"])``'s text: the options its parser takes (it exits before doing anything)."""
    with pytest.raises(SystemExit) as exited:
        importlib.import_module(module_name).main(["--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", BENCHMARKS)
def test_smoke_reaches_every_benchmark_and_each_takes_it(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    given = argparse.Namespace(records=None, repeat=1, memory_small=10, memory_large=20, profile=False, smoke=True)
    assert "--smoke" in _argv(name, given)
    # its main's parser takes the flag (one that did not would exit 2 halfway through make bench)
    assert "--smoke" in _help(_MODULES[name], capsys)


#: Modules run on their own (``python -m benchmarks.<name>``), not by ``benchmarks.run``.
STANDALONE = ("benchmarks.bench_debugging", "benchmarks.bench_encryption", "benchmarks.bench_quarantine_files",
              "benchmarks.profile_batch")


@pytest.mark.parametrize("module_name", STANDALONE)
def test_a_standalone_benchmark_imports_and_takes_an_argv(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert "argv" in inspect.signature(module.main).parameters
    assert module_name.rsplit(".", 1)[1] not in BENCHMARKS


@pytest.mark.parametrize("module_name", STANDALONE)
def test_a_standalone_benchmark_takes_smoke(module_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--smoke" in _help(module_name, capsys)


def test_make_bench_without_only_calls_every_benchmarks_main_with_the_arguments_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make bench``'s orchestration over all of :data:`BENCHMARKS`, in order, each ``main`` called
    with :func:`_argv`'s arguments and its rows in the results file. What each ``main`` does with
    them is each benchmark's own test's (tests/e2e/test_benchmarks_smoke.py), and the command
    itself runs in the make bench test (tests/e2e/test_readme_benchmark.py) over two of them."""
    import benchmarks.run as run
    from benchmarks import Row

    called: list[tuple[str, list[str]]] = []

    def main_of(name: str) -> Any:
        def main(argv: list[str]) -> list[Row]:
            called.append((name, argv))
            return [Row(name, "case", 1.0, 2.0, 2.0, "reported", True)]
        return main

    monkeypatch.setattr(run, "_main_of", main_of)
    monkeypatch.setattr(run, "environment", lambda: {"stand-in": True})
    for name in SMOKE_ENV:  # --smoke sets them: put back after as they are now, set or not
        was = os.environ.get(name)
        monkeypatch.setenv(name, was or "")
        if was is None:
            monkeypatch.delenv(name)
    argv = ["--records", "2000", "--repeat", "1", "--smoke", "--memory-small", "2000", "--memory-large", "4000"]
    assert run.main([*argv, "--results", str(tmp_path)]) == 0
    given = argparse.Namespace(records=2000, repeat=1, memory_small=2000, memory_large=4000, profile=False, smoke=True)
    assert called == [(name, _argv(name, given)) for name in BENCHMARKS]
    (path,) = tmp_path.glob("*.json")
    (ran,) = json.loads(path.read_text(encoding="utf-8"))["runs"]
    assert ran["args"]["only"] == list(BENCHMARKS)
    assert [r["bench"] for r in ran["rows"]] == list(BENCHMARKS)
    assert set(ran["other_benchmarks"]) == set(BENCHMARKS)
    out = capsys.readouterr().out
    assert all(f"\n## {name}\n" in out and f"\n{name}: " in out for name in BENCHMARKS)
