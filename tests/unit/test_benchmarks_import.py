"""Every benchmark module imports and has the entry point ``benchmarks.run`` calls.

The benchmarks are measured separately, not by the test suite (which runs only the one
the README names, tests/e2e/test_readme_benchmark.py), so this is what keeps a renamed
helper from breaking one silently.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from benchmarks.run import _OTHERS, _OWN, BENCHMARKS


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_module_imports_with_its_entry_point(name: str) -> None:
    if name in _OWN:
        module = importlib.import_module(_OWN[name])
        params = list(inspect.signature(module.run).parameters)
        assert params[:2] in (["records", "repeat"], ["small", "large"]), params
    else:
        module = importlib.import_module(_OTHERS[name])
        # benchmarks.run calls main([]): it must take an argv list
        assert "argv" in inspect.signature(module.main).parameters


#: Modules run on their own (``python -m benchmarks.<name>``), not by ``benchmarks.run``.
STANDALONE = ("benchmarks.bench_debugging", "benchmarks.bench_quarantine_files", "benchmarks.profile_batch")


@pytest.mark.parametrize("module_name", STANDALONE)
def test_a_standalone_benchmark_imports_and_takes_an_argv(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert "argv" in inspect.signature(module.main).parameters
    assert module_name.rsplit(".", 1)[1] not in BENCHMARKS
