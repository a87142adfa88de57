"""Every benchmark ``make bench`` runs, run as it runs it, each by a test of its own.

``benchmarks.run`` calls each benchmark's ``main`` with the argv :func:`benchmarks.run._argv`
builds; these tests make the same call with the make bench test's arguments (``--records 2000
--repeat 1 --smoke``; the memory benchmark's two sizes 2,000 and 4,000), in this worker's
process: the benchmarks that run in their caller's Spark session get this worker's session
(no JVM start of their own, and evaluated as the tests' sessions are, ``tests.conftest.INTERPRETED``;
``--smoke`` measures nothing), and so do ``commands``' arms: each command in this process
(``quarantine.cli.main``, on this worker's session; ``validate``, which starts no JVM, as a
process), where ``make bench`` starts each as a process and times it. The others start their
processes (the memory benchmark's children, the ``process`` arms, ``phases``' timed run,
``growth``'s six runs, one after another, ``declarative``'s Connect server) as they do under
``make bench``: what they measure is a process. Each checks what the make bench test used to
check for it: it returns its rows, every arm's, and prints its table (``phases``: every phase
the run takes timed, the others said not run).

The make bench test (tests/e2e/test_readme_benchmark.py) runs the README's command itself over
the cheapest benchmarks, and tests/unit/test_benchmarks_import.py that the command, given no
``--only``, calls every benchmark's ``main`` with these arguments. Split this way, one test of
~10 minutes on the process-starting worker became twelve that share both workers, and the
in-session ones no longer pay a JVM (the figures: benchmarks/README.md, Suite history).

Not in ``PROCESS_MODULES``: each test starts at most one process of its own at a time
(``declarative``: its server and one ``spark-pipelines`` client) while this worker waits,
as the wheel test does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import SMOKE_ENV, Row, markdown_table
from benchmarks.bench_commands import COMMANDS, ON_SPARK, STARTUP_GOALS_S
from benchmarks.bench_growth import ARMS as GROWTH_ARMS
from benchmarks.bench_phases import MARKS, SUMMARY
from benchmarks.bench_process import ARMS
from benchmarks.phase_timer import PHASES
from benchmarks.run import _MODULES, BENCHMARKS, _argv
from tests.support.readme import manual_text

#: ``make bench``'s arguments in the make bench test (tests/e2e/test_readme_benchmark.py).
SMOKE = argparse.Namespace(records=2000, repeat=1, memory_small=2000, memory_large=4000, profile=False, smoke=True)
#: Settings the benchmarks set on a session they are given (benchmarks.BENCH_CONF), put back after.
_RUNTIME_CONF = ("spark.sql.shuffle.partitions",)


@pytest.fixture
def bench_env(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$BENCH_DIR`` in this test's folder; the worker's session settings and the variables
    ``--smoke`` sets for every JVM and Spark session started after it (``benchmarks.SMOKE_ENV``)
    as they were, after the test."""
    monkeypatch.setenv("BENCH_DIR", str(tmp_path / "bench"))
    for name in SMOKE_ENV:  # put back at teardown as they are now (set or not), whatever --smoke sets
        was = os.environ.get(name)
        monkeypatch.setenv(name, was or "")
        if was is None:
            monkeypatch.delenv(name)
    before = {k: spark.conf.get(k) for k in _RUNTIME_CONF}
    try:
        yield tmp_path / "bench"
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_benchmark_runs_every_arm_as_make_bench_calls_it(
    name: str, spark: Any, bench_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module(_MODULES[name]).main
    rows = main(_argv(name, SMOKE))
    out = capsys.readouterr().out
    assert rows and all(isinstance(r, Row) and r.bench == name for r in rows), rows
    # its own table printed, and its rows as benchmarks.run prints them after every benchmark's
    assert re.search(r"^\|.+\|$", out, re.M), out
    assert re.search(rf"^\| {name} \| .+ \| [0-9.]+ (?:s|ms|MiB) \|", markdown_table(rows), re.M), rows
    if name == "commands":  # every command ran once: in this process, but validate (no JVM) a process
        for label in ("init-demo", "run", *COMMANDS):
            assert re.search(rf"^\| commands \| quarantine {re.escape(label)} \(", out, re.M), label
        for label in (*COMMANDS, *(f"{c} (spark)" for c in ON_SPARK)):
            where = "a process" if label in STARTUP_GOALS_S else "in process"
            assert re.search(rf"^  round 1 {re.escape(label)} \({where}\):", out, re.M), label
    if name == "process":  # every arm's process ran once
        for arm in ARMS:
            assert re.search(rf"^\| {arm} \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|", out, re.M), arm
    if name == "growth":  # every arm's process ran once, on the 2,000 records and 20 new
        for arm in GROWTH_ARMS:
            assert re.search(rf"^\| {arm} \| [^|]+ \| [0-9,]+ \| 1 \| [0-9.]+ \|", out, re.M), arm
        assert {r.goal for r in rows} >= {"<= 1.30x", "<= 0.50x"}, rows
    if name == "phases":  # every phase the run takes was timed; one it does not take said so, never 0 s
        for phase in PHASES:
            shown = r"[0-9.]+ \| [0-9.]+%" if phase.taken else r"did not run \("
            assert re.search(rf"^\| {re.escape(phase.name)} \| {shown}", out, re.M), phase.name
        for mark in (*MARKS, SUMMARY):
            assert re.search(rf"^\| {re.escape(mark)} \| [0-9.]+ \| [0-9.]+%", out, re.M), mark
    if name == "expectations":
        # the manual's `python -m benchmarks.bench_expectations [--records N] [--repeat K]` is this
        # module: its three cases


        assert "`python -m benchmarks.bench_expectations [--records N] [--repeat K]`" in manual_text()
        assert {r.case for r in rows} == {
            "2,000 rows, routing (10-expectation suite, no GX)",
            "2,000 rows, routing + GX batch validation",
            "2,000 rows, persisted batch on disk: input carried for every row / only where failed",
        }
    # the worker's session is still this worker's (streaming stops only a session it started)
    assert spark.range(1).count() == 1
