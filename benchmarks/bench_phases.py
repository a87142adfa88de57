"""Where a whole ``quarantine run`` process's wall time goes, phase by phase, beside the hand-written split job.

    python -m benchmarks.bench_phases [--records 2000000] [--poison-rate 0.01] [--repeat 3] [--smoke]

Issue 49, point 1's second half: the fixed costs of a run. The run is the ``process``
benchmark's (:mod:`benchmarks.bench_process`: the same source, written once by ``init-demo``,
and the same config, :func:`~benchmarks.bench_process.quarantine_config`: the demo's decode ->
json -> cast -> checks stages, the metrics table on, MLflow off, fresh tables per run), each
run a fresh OS process and JVM, as a Databricks job pays. The process is
:mod:`benchmarks.phase_timer`: ``quarantine run`` with a wall-clock timer wrapped around each
phase's library functions before the run starts (no library code changes). Beside it, as
``--repeat`` times, interleaved, the hand-written split job
(:mod:`benchmarks.handwritten.split_job`), timed whole; the two targets' row counts are
checked equal.

One row per phase: its seconds (the median over the runs; each run's figure is the union
of its calls' intervals), its share of the run's wall time (process start to exit, timed
from outside: the row's baseline is the run, its ratio the share), and the hand-written split
job's whole wall beside it (in the case; first, a row of the whole run against that job).
``--smoke`` runs the timed run once and not the hand-written job (the ``process``
benchmark's smoke runs it): it proves every phase is timed, and measures nothing. Phases
come from two places:

* marks the child takes: the interpreter's start (this process's ``Popen`` to the child's
  first line), ``import quarantine`` alone, the imports ``quarantine run`` loads (PySpark,
  Delta, the pipeline), *imports and session* (process start to ``get_spark`` returned: a
  summary of the rows before it), and the process's exit after the command returned (the
  interpreter's and the JVM's shutdown);
* the wrapped functions (:data:`benchmarks.phase_timer.PHASES`): config load, pipeline
  assembly, the session, the source read, the batch and within it prepare (the coordinates'
  check), building the plan, the count pass, the target commit, the quarantine write, the
  error policy with its error-context sample, closing passed records, the metrics table's
  reads and writes, the run's end.

A phase whose every call lies inside another's is reported *within* it (its time is part
of its parent's, not added to the run's); a phase that runs on another thread while
another runs is reported *at once with* it (the metrics listener's run start overlaps the
batch; the target and quarantine writes overlap when the policy may stop a batch,
:func:`quarantine.batch.writes._all_of`); *untimed* is the run's wall less the union of
every phase. On this run (fresh tables, ``errors.tolerance: all``) the target write is
the pass that runs the stages over every record (*write while counting*,
:mod:`quarantine.batch.writes`): its per-record part is :mod:`benchmarks.bench_breakdown`'s.
A phase the run does not take (the count pass, closing passed records) is reported as not
run, with when it runs, never as 0 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks import Row, add_smoke, drop_dir, fresh_dir, markdown_table, median
from benchmarks.bench_process import child_env, delta_rows, ensure_demo_source, quarantine_config, run_arm
from benchmarks.phase_timer import PHASES

__all__ = [
    "HARNESS", "MARKS", "SUMMARY", "Interval", "Report", "main", "nesting", "report", "run", "run_timed", "timeline",
    "union_length",
]

_REPO = Path(__file__).resolve().parent.parent
#: The child: run by its path (see :mod:`benchmarks.phase_timer`).
HARNESS = Path(__file__).resolve().parent / "phase_timer.py"

#: The phases taken from the child's marks, in run order (the session's summary is :data:`SUMMARY`).
INTERPRETER = "interpreter start (process start to Python's first line)"
IMPORT_QUARANTINE = "import quarantine"
IMPORTS = "imports: the run command's modules (PySpark, Delta, quarantine)"
EXIT = "exit after the command returned (interpreter, JVM shutdown)"
MARKS: tuple[str, ...] = (INTERPRETER, IMPORT_QUARANTINE, IMPORTS, EXIT)
#: Process start to ``get_spark`` returned: a summary over the phases before it, never a parent.
SUMMARY = "imports and session (process start to get_spark returned)"
_SESSION = "session (get_spark: JVM, Delta)"
UNTIMED = "untimed (between the phases: the driver's other Python work)"
#: The phases whose function waits for the threads it hands work to (the batch's two writes,
#: the listeners' events): a call of theirs holds calls on other threads (:func:`nesting`).
WAITING: frozenset[str] = frozenset(p.name for p in PHASES if p.waits)
#: Seconds of slack when one call is compared with another's bounds (two clocks read in turn).
_EPS = 1e-4


@dataclass(frozen=True)
class Interval:
    """One span of a phase in one run: seconds from the process's start, and its thread."""

    phase: str
    start: float
    end: float
    thread: str = "MainThread"


def timeline(timings: Mapping[str, Any], popen: float, exited: float) -> list[Interval]:
    """Every phase's intervals of one run, seconds from ``popen`` (the child's timings, epoch seconds).

    The marks (:data:`MARKS`, :data:`SUMMARY`) first, then every timed call.
    """
    def at(t: float) -> float:
        return t - popen

    out = [
        Interval(INTERPRETER, 0.0, at(timings["started"])),
        Interval(IMPORT_QUARANTINE, at(timings["started"]), at(timings["quarantine_imported"])),
        Interval(IMPORTS, at(timings["quarantine_imported"]), at(timings["imported"])),
        Interval(EXIT, at(timings["command_returned"]), at(exited)),
    ]
    session = [c["end"] for c in timings["calls"] if c["phase"] == _SESSION]
    if session:
        out.append(Interval(SUMMARY, 0.0, at(min(session))))
    out += [Interval(c["phase"], at(c["start"]), at(c["end"]), c["thread"]) for c in timings["calls"]]
    return out


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by ``spans`` (``(start, end)`` pairs), each instant counted once."""
    return sum(end - start for start, end in _merged(spans))


def _by_phase(intervals: Iterable[Interval]) -> dict[str, list[Interval]]:
    by: dict[str, list[Interval]] = defaultdict(list)
    for i in intervals:
        by[i.phase].append(i)
    return dict(by)


def _holds(theirs: Sequence[Interval], mine: Sequence[Interval], waits: bool) -> bool:
    """Whether every call of ``mine`` lies inside a call of ``theirs`` on its thread (any thread: ``waits``)."""
    return all(
        any(t.start - _EPS <= m.start and m.end <= t.end + _EPS and (waits or t.thread == m.thread) for t in theirs)
        for m in mine
    )


def nesting(intervals: Sequence[Interval], waiting: Collection[str] = WAITING) -> dict[str, str | None]:
    """Each phase's parent: the shortest other phase holding every one of its calls (None: top level).

    A call holds another on its own thread; a call of a phase in ``waiting`` (one whose function
    waits for the threads it hands work to: the batch's writes and listeners) holds one on any
    thread. :data:`SUMMARY` is nobody's parent. Of two phases that hold each other (one function
    calling only the other), the outer is the one that started first, then ended last, then
    comes first in :data:`~benchmarks.phase_timer.PHASES`, then by name.
    """
    by = _by_phase(intervals)
    rank = {p.name: k for k, p in enumerate(PHASES)}
    length = {p: union_length((i.start, i.end) for i in xs) for p, xs in by.items()}

    def outer(p: str) -> tuple[float, float, int, str]:
        return min(i.start for i in by[p]), -max(i.end for i in by[p]), rank.get(p, len(rank)), p

    parents: dict[str, str | None] = {}
    for phase, mine in by.items():
        holders = [
            other for other, theirs in by.items()
            if other not in (phase, SUMMARY) and _holds(theirs, mine, other in waiting)
            and not (_holds(mine, theirs, phase in waiting) and outer(phase) < outer(other))
        ]
        parents[phase] = min(holders, key=lambda o: (length[o], outer(o)[0], outer(o)[1]), default=None)
    return parents


def _ancestors(phase: str, parents: Mapping[str, str | None]) -> set[str]:
    out: set[str] = set()
    up = parents.get(phase)
    while up is not None and up not in out:
        out.add(up)
        up = parents.get(up)
    return out


def at_once(intervals: Sequence[Interval], parents: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Per phase, the outermost phases that ran on another thread while it ran (not its parents or children)."""
    by = _by_phase(intervals)
    out: dict[str, list[str]] = {}
    for phase, mine in by.items():
        if phase == SUMMARY:
            continue
        mine_up = _ancestors(phase, parents)
        found = {
            other for other, theirs in by.items()
            if other not in (phase, SUMMARY) and other not in mine_up and phase not in _ancestors(other, parents)
            and any(m.thread != t.thread and m.start < t.end - _EPS and t.start < m.end - _EPS
                    for m in mine for t in theirs)
        }
        # the outermost only: a phase whose parent is listed is said by its parent
        out[phase] = sorted(p for p in found if not (_ancestors(p, parents) & found))
    return out


@dataclass(frozen=True)
class Report:
    """The phases of ``runs`` runs: per phase its seconds in each run that took it.

    Attributes:
        walls: each run's wall time (process start to exit), seconds.
        seconds: per phase, its seconds in each run that took it.
        order: the phases in the order they first started (the marks in their place).
        parents: each phase's parent (None: top level).
        concurrent: each phase's phases on other threads at the same time.
        untimed: each run's wall less the union of its phases.
    """

    walls: list[float]
    seconds: dict[str, list[float]]
    order: list[str]
    parents: dict[str, str | None]
    concurrent: dict[str, list[str]]
    untimed: list[float]


def report(runs: Sequence[tuple[list[Interval], float]]) -> Report:
    """:class:`Report` over ``runs``: each its :func:`timeline` and its wall time.

    The nesting and the overlaps are the last run's.
    """
    seconds: dict[str, list[float]] = defaultdict(list)
    starts: dict[str, list[float]] = defaultdict(list)
    untimed = []
    for intervals, wall in runs:
        for phase, xs in _by_phase(intervals).items():
            seconds[phase].append(union_length((i.start, i.end) for i in xs))
            starts[phase].append(min(i.start for i in xs))
        untimed.append(wall - union_length((i.start, i.end) for i in intervals if i.phase != SUMMARY))
    last = runs[-1][0]
    parents = nesting(last)
    # the marks first where they happened; the summary right after the session; the rest as they started
    order = sorted((p for p in seconds if p != SUMMARY), key=lambda p: median(starts[p]))
    if SUMMARY in seconds:
        order.insert(order.index(_SESSION) + 1 if _SESSION in order else len(order), SUMMARY)
    return Report(
        walls=[w for _, w in runs], seconds=dict(seconds), order=order, parents=parents,
        concurrent=at_once(last, parents), untimed=untimed,
    )


def run_timed(source: str) -> tuple[list[Interval], float, int]:
    """One timed run (:mod:`benchmarks.phase_timer`) as a fresh process on fresh folders (deleted after).

    Returns:
        Its :func:`timeline`, its wall time (process start to exit) and its target's rows.

    Raises:
        RuntimeError: the process failed (its output's last lines in the message).
    """
    out = fresh_dir("phases-quarantine")
    try:
        conf, timings, log = out / "quarantine.yml", out / "timings.json", out / "output.log"
        conf.write_text(yaml.safe_dump(quarantine_config(source, out), sort_keys=False), encoding="utf-8")
        cmd = [sys.executable, "-P", str(HARNESS), "--conf", str(conf), "--out", str(timings)]
        with log.open("wb") as fh:
            popen = time.time()
            code = subprocess.Popen(cmd, cwd=_REPO, env=child_env(), stdout=fh, stderr=subprocess.STDOUT).wait()
            exited = time.time()
        if code != 0 or not timings.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"phases: the timed run exited {code}: {' '.join(cmd)}\n{tail}")
        return timeline(json.loads(timings.read_text(encoding="utf-8")), popen, exited), exited - popen, delta_rows(
            out / "target")
    finally:
        drop_dir(out)


def _when(phase: str) -> str:
    return next((p.when for p in PHASES if p.name == phase), "")


def _hand_text(hand: Sequence[float]) -> str:
    return f"{median(hand):.2f}" if hand else "not run (--smoke)"


def _table(records: int, poison_rate: float, rep: Report, hand: Sequence[float]) -> str:
    wall, n = median(rep.walls), len(rep.walls)
    beside = _hand_text(hand)
    lines = [
        f"phases: {records:,} records, {poison_rate:.1%} poison, fresh JVM each run, median of {n}; "
        f"quarantine run {wall:.1f} s, hand-written split job {beside}"
        + (f" s ({wall / median(hand):.2f}x)" if hand else ""),
        "| phase | median s | share of the run | within | at once with | ran in | hand-written split job, whole s |",
        "|---|---:|---:|---|---|---:|---:|",
    ]
    for phase in rep.order:
        xs = rep.seconds[phase]
        lines.append(
            f"| {phase} | {median(xs):.2f} | {median(xs) / wall:.1%} | {rep.parents.get(phase) or ''} "
            f"| {', '.join(rep.concurrent.get(phase, []))} | {len(xs)}/{n} | {beside} |"
        )
    untimed = median(rep.untimed)
    lines.append(f"| {UNTIMED} | {untimed:.2f} | {untimed / wall:.1%} |  |  | {n}/{n} | {beside} |")
    for p in PHASES:
        if p.name not in rep.seconds:
            why = p.when or "this run takes it: its timer timed nothing"
            lines.append(f"| {p.name} | did not run ({why}) | | | | 0/{n} | {beside} |")
    lines.append(f"| whole run (process start to exit) | {wall:.2f} | 100.0% |  |  | {n}/{n} | {beside} |")
    return "\n".join(lines)


def _rows(records: int, poison_rate: float, rep: Report, hand: Sequence[float]) -> list[Row]:
    """First the whole run against the hand-written job (against itself, ratio 1, when the job did
    not run: ``--smoke``), naming the phases that did not run; then one row per phase: baseline the
    whole run, subject the phase, ratio its share, the hand-written job's whole wall in the case."""
    wall, n = median(rep.walls), len(rep.walls)
    size = f"{records:,} rec, {poison_rate:.0%} poison, fresh JVM each run"
    beside = f"hand-written split job whole {_hand_text(hand)}" + (" s" if hand else "")
    missing = [f"{p.name} ({p.when})" if p.when else p.name for p in PHASES if p.name not in rep.seconds]
    base = median(hand) if hand else wall
    rows = [Row(
        "phases", f"{size}: whole quarantine run vs hand-written split job"
        + ("" if hand else " (not run: --smoke; ratio 1)")
        + (f"; did not run: {'; '.join(missing)}" if missing else ""),
        base, wall, wall / base, "reported", True, samples={"quarantine": rep.walls, "handwritten_split": list(hand)},
    )]
    for phase in [*rep.order, UNTIMED]:
        xs = rep.untimed if phase == UNTIMED else rep.seconds[phase]
        notes = [beside]
        if rep.parents.get(phase):
            notes.append(f"within {rep.parents[phase]}")
        if rep.concurrent.get(phase):
            notes.append(f"at once with {', '.join(rep.concurrent[phase])}")
        if len(xs) < n:
            notes.append(f"ran in {len(xs)}/{n} runs")
        rows.append(Row(
            "phases", f"{size}: {phase} ({'; '.join(notes)}); ratio = share of the whole run", wall, median(xs),
            median(xs) / wall, "reported", True,
            samples={"phase": list(xs), "run": rep.walls, "handwritten_split": list(hand)},
        ))
    return rows


def run(records: int = 2_000_000, repeat: int = 3, *, poison_rate: float = 0.01, smoke: bool = False) -> list[Row]:
    """Time the run's phases ``repeat`` times beside the hand-written split job; return the rows.

    ``smoke``: the source written in this process, and the timed run only (still a process of
    its own): the hand-written job is the ``process`` benchmark's smoke's.

    Raises:
        RuntimeError: a process failed, or the two arms' targets hold different row counts.
    """
    source = ensure_demo_source(records, poison_rate, in_process=smoke)
    print(f"phases: {records:,} records, {poison_rate:.1%} poison, {repeat} repeats per arm", file=sys.stderr)
    timed: list[tuple[list[Interval], float]] = []
    hand: list[float] = []
    rows_seen: set[tuple[str, int]] = set()
    arms = ("quarantine",) if smoke else ("quarantine", "handwritten_split")
    for k in range(repeat):
        for arm in arms[:: 1 if k % 2 == 0 else -1]:
            if arm == "quarantine":
                intervals, wall, target_rows = run_timed(source)
                timed.append((intervals, wall))
            else:
                sample = run_arm(arm, source)
                wall, target_rows = sample.memory.seconds, sample.target_rows
                hand.append(wall)
            rows_seen.add((arm, target_rows))
            print(f"  [{arm}] repeat {k + 1}/{repeat}: {wall:.1f}s, target {target_rows:,} rows",
                  file=sys.stderr, flush=True)
            if len({n for _, n in rows_seen}) > 1:
                raise RuntimeError(f"phases: the arms' targets differ (arm, rows): {sorted(rows_seen)}")
    rep = report(timed)
    print(_table(records, poison_rate, rep, hand), flush=True)
    return _rows(records, poison_rate, rep, hand)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run, print the tables and return the rows (``argv`` None: the defaults, as ``benchmarks.run`` calls it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--poison-rate", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3, help="runs per arm, median reported (>= 3 advised)")
    add_smoke(ap)
    args = ap.parse_args([] if argv is None else list(argv))
    rows = run(args.records, max(args.repeat, 1), poison_rate=args.poison_rate, smoke=args.smoke)
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
