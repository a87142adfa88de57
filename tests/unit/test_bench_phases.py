"""The ``phases`` benchmark's harness and its arithmetic (no Spark: the run itself is the smoke test's).

Every function :data:`benchmarks.phase_timer.PHASES` wraps is still where the harness looks it
up, so a rename or a move in the library fails here instead of timing nothing; the timer
wraps and puts back; and the nesting, overlaps and unions the report is made of come out as
a batch run's threads make them (tests/e2e/test_benchmarks_smoke.py runs the benchmark and
checks every phase the run takes was timed).
"""

from __future__ import annotations

import types

import pytest

import quarantine.tables
from benchmarks.bench_phases import (
    EXIT,
    IMPORT_QUARANTINE,
    IMPORTS,
    INTERPRETER,
    SUMMARY,
    Interval,
    at_once,
    nesting,
    report,
    timeline,
    union_length,
)
from benchmarks.phase_timer import PHASES, Phase, PhaseTargetError, PhaseTimer, resolve

TARGETS = sorted({t for p in PHASES for t in p.targets})


@pytest.mark.parametrize("target", TARGETS)
def test_every_wrapped_function_is_still_where_the_harness_looks_it_up(target: str) -> None:
    owner, attr, fn = resolve(target)
    assert getattr(owner, attr) is fn and callable(fn)


def test_phase_names_are_unique_and_a_phase_not_taken_says_when_it_runs() -> None:
    names = [p.name for p in PHASES]
    assert len(names) == len(set(names))
    assert all(p.when for p in PHASES if not p.taken)


@pytest.mark.parametrize("target", [
    "quarantine.tables:no_such_function",  # renamed
    "quarantine.no_such_module:table_version",  # moved
    "quarantine.pipeline:Pipeline.split_frame",  # inherited: Plan defines it
    "quarantine.batch.writes:NoSuchClass.write",
    "quarantine.tables:__all__",  # not a function
    "quarantine.tables",  # no attribute
])
def test_a_target_that_is_not_there_is_refused(target: str) -> None:
    with pytest.raises(PhaseTargetError):
        resolve(target)


def test_the_timer_records_each_call_and_puts_the_function_back() -> None:
    real = quarantine.tables.is_path
    timer = PhaseTimer()
    timer.install([Phase("path check", ("quarantine.tables:is_path",))])
    try:
        assert quarantine.tables.is_path is not real
        assert quarantine.tables.is_path("/tmp/x") == real("/tmp/x")
    finally:
        timer.uninstall()
    assert quarantine.tables.is_path is real
    (call,) = timer.calls
    assert call.phase == "path check" and call.start <= call.end and call.thread == "MainThread"


def test_a_missing_target_wraps_nothing() -> None:
    real = quarantine.tables.is_path
    timer = PhaseTimer()
    with pytest.raises(PhaseTargetError):
        timer.install([Phase("a", ("quarantine.tables:is_path",)), Phase("b", ("quarantine.tables:gone",))])
    assert quarantine.tables.is_path is real


def test_union_length_counts_each_instant_once() -> None:
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([]) == 0


#: a batch as a run makes it: the target and quarantine writes on two pool threads inside the
#: batch, the metrics listener's run start on its own thread overlapping the batch's start
BATCH = [
    Interval("batch", 10, 20),
    Interval("prepare", 10, 12),
    Interval("check", 10.5, 11.5),
    Interval("target", 13, 17, "quarantine-write_1"),
    Interval("merge", 13.01, 17, "quarantine-write_1"),
    Interval("target rows: append or MERGE (merge_new_rows)", 12.5, 12.6),
    Interval("target commit (_write_target)", 12.5, 12.6),
    Interval("quarantine", 13.5, 15, "quarantine-write_0"),
    Interval("run start", 9, 10.8, "quarantine-listener_0"),
    Interval("read", 8, 9.5),
]


def test_a_phase_nests_in_the_shortest_phase_holding_all_its_calls() -> None:
    parents = nesting(BATCH, waiting={"batch"})
    assert parents["check"] == "prepare" and parents["prepare"] == "batch"
    assert parents["quarantine"] == "batch" and parents["batch"] is None
    # two that cover the same span: the one that started first (the outer call) holds the other
    assert parents["merge"] == "target" and parents["target"] == "batch"
    # the other write's thread is not the target's: at once with it, not within it
    assert parents["quarantine"] == "batch"
    # one span to the clock's resolution: the one listed first in PHASES is the outer
    assert parents["target rows: append or MERGE (merge_new_rows)"] == "target commit (_write_target)"
    assert parents["target commit (_write_target)"] == "batch"


def test_phases_on_other_threads_are_at_once_the_outermost_named() -> None:
    parents = nesting(BATCH, waiting={"batch"})
    found = at_once(BATCH, parents)
    assert found["target"] == ["quarantine"] and found["quarantine"] == ["target"]
    # the listener's run start overlaps the read and the batch (not prepare: the batch says it)
    assert found["run start"] == ["batch", "read"]
    assert found["prepare"] == ["run start"] and found["batch"] == ["run start"]
    # an inner phase of one write is at once with the other write (which names only the outer)
    assert found["merge"] == ["quarantine"]


def _timings(calls: list[tuple[str, float, float]]) -> dict[str, object]:
    return {
        "started": 100.05, "quarantine_imported": 100.06, "imported": 101.0, "command_began": 101.0,
        "command_returned": 110.0, "exit_code": 0,
        "calls": [{"phase": p, "start": s, "end": e, "thread": "MainThread"} for p, s, e in calls],
    }


def test_the_report_takes_the_marks_puts_the_summary_after_the_session_and_leaves_out_what_did_not_run() -> None:
    session = "session (get_spark: JVM, Delta)"
    runs = []
    for k in range(3):
        calls = [("pipeline assembly (stages, listeners)", 101.0, 104.0 + k), (session, 101.5, 104.0 + k),
                 ("the batch (Run.process_batch)", 107.0, 109.0)]
        runs.append((timeline(types.MappingProxyType(_timings(calls)), 100.0, 111.0), 11.0))
    rep = report(runs)
    assert rep.order[:3] == [INTERPRETER, IMPORT_QUARANTINE, IMPORTS]
    assert rep.order[rep.order.index(session) + 1] == SUMMARY and rep.order[-1] == EXIT
    assert rep.seconds[session] == pytest.approx([2.5, 3.5, 4.5])
    assert rep.seconds[SUMMARY] == pytest.approx([4.0, 5.0, 6.0])  # process start to get_spark returned
    assert rep.seconds[EXIT] == pytest.approx([1.0] * 3)
    assert rep.parents[session] == "pipeline assembly (stages, listeners)"
    assert SUMMARY not in rep.parents.values()
    assert "count pass (noop over the batch)" not in rep.seconds  # not run: never a 0
    # 11 s less the marks and the phases (0-1, 1-4/5/6, 7-9, 10-11): after the assembly to the batch, and after it
    assert rep.untimed == pytest.approx([4.0, 3.0, 2.0])
