"""Every benchmark module imports and has the entry point ``benchmarks.run`` calls.

The benchmarks are measured separately, not by the test suite (which runs the commands
the READMEs name with tiny sizes, tests/e2e/test_readme_benchmark.py), so this is what
keeps a renamed helper from breaking one silently.
"""

from __future__ import annotations

import argparse
import importlib
import inspect

import pytest

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
    # its main's parser takes the flag (one that did not would exit 2 halfway through the make bench test)
    assert "--smoke" in _help(_MODULES[name], capsys)


#: Modules run on their own (``python -m benchmarks.<name>``), not by ``benchmarks.run``.
STANDALONE = ("benchmarks.bench_debugging", "benchmarks.bench_quarantine_files", "benchmarks.profile_batch")


@pytest.mark.parametrize("module_name", STANDALONE)
def test_a_standalone_benchmark_imports_and_takes_an_argv(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert "argv" in inspect.signature(module.main).parameters
    assert module_name.rsplit(".", 1)[1] not in BENCHMARKS


@pytest.mark.parametrize("module_name", STANDALONE)
def test_a_standalone_benchmark_takes_smoke(module_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "--smoke" in _help(module_name, capsys)
