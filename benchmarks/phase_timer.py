"""The child of the ``phases`` benchmark: ``quarantine run --conf X.yml`` with a wall-clock timer on each phase.

    python -P benchmarks/phase_timer.py --conf X.yml --out timings.json

Run by its path (``-P``: its folder is not put on ``sys.path``), not as ``benchmarks.phase_timer``:
the ``benchmarks`` package imports PySpark, and the first thing timed here is ``import
quarantine`` alone. Then the modules ``python -m quarantine run`` loads (the CLI, the run
command and what it imports: PySpark, Delta, the pipeline), then each function of
:data:`PHASES` is wrapped *where it is looked up* (the module attribute or class attribute a
caller reads: ``quarantine.assemble:get_spark``, not ``quarantine.spark.session:get_spark``)
with a timer that records every call's start, end and thread, and :func:`quarantine.cli.main`
runs the command as ``python -m quarantine`` does. No library code changes: the wrappers are
set on the loaded modules before the run starts. On the way out (the command returned or
raised) the calls and the marks (:data:`STARTED`, :data:`QUARANTINE_IMPORTED`,
:data:`IMPORTED`, the command's start and return) are written to ``--out`` as JSON, epoch
seconds (``time.time()``: the parent's clock too). :mod:`benchmarks.bench_phases` reads them.

A target that no longer exists (a function renamed or moved) raises :class:`PhaseTargetError`
before anything runs, and ``tests/unit/test_bench_phases.py`` resolves every target: a rename
fails a test instead of timing nothing.
"""

# ruff: noqa: E402  (the marks are taken between the imports, on purpose)
from __future__ import annotations

import time

#: When this process began running Python code (after the interpreter's own start-up).
STARTED = time.time()

import quarantine

#: After ``import quarantine`` alone (the package: names resolved on first use).
QUARANTINE_IMPORTED = time.time()

import argparse
import functools
import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import quarantine.cli
import quarantine.commands.configured  # what `quarantine run`'s handler imports when it runs: the config,
import quarantine.pipeline  # PySpark, Delta, the pipeline

#: After the modules ``python -m quarantine run`` loads.
IMPORTED = time.time()

__all__ = ["PHASES", "Call", "Phase", "PhaseTargetError", "PhaseTimer", "main", "resolve"]


class PhaseTargetError(LookupError):
    """A phase's target is not there (renamed or moved in the library) or is not a plain function."""


@dataclass(frozen=True)
class Phase:
    """One phase of a run, timed by wrapping the functions that do it.

    Attributes:
        name: the phase's name in the report.
        targets: ``module:attribute`` or ``module:Class.attribute``, each where a caller looks
            it up; the phase's time is the union of their calls' intervals.
        taken: whether the ``phases`` benchmark's run (fresh tables, ``errors.tolerance: all``,
            no judging stage) takes it; a phase it does not take is reported as not run.
        when: when a phase not taken runs (``runs only …``).
        waits: its function waits for the work it hands to other threads (the batch's writes on
            a pool's threads, the listeners' events on theirs): their calls are within it.
    """

    name: str
    targets: tuple[str, ...]
    taken: bool = True
    when: str = ""
    waits: bool = False


#: The phases, in the order a batch run takes them. Nested phases (a function another phase's
#: function calls) are reported within their parent, found from the calls' intervals.
PHASES: tuple[Phase, ...] = (
    Phase("config load", ("quarantine.commands.configured:load",)),
    Phase("pipeline assembly (stages, listeners)", ("quarantine.pipeline:assemble",)),
    Phase("session (get_spark: JVM, Delta)", ("quarantine.assemble:get_spark",)),
    Phase("source read (what is new, or the whole pinned version; shape check)",
          ("quarantine.runners.batch:plan_read",)),
    Phase("read mark (the target's quarantine.read property)", ("quarantine.runners.batch:record_read",)),
    Phase("the batch (Run.process_batch)", ("quarantine.batch.run:Run.process_batch",), waits=True),
    Phase("prepare (identify, settled records)", ("quarantine.batch.run:prepare",)),
    Phase("coordinates' check (identified_topics)", ("quarantine.batch.settle:identified_topics",)),
    Phase("building the plan (split_frame, chain, observed counts)", (
        "quarantine.batch.plan:Plan.split_frame", "quarantine.batch.plan:Plan.chain",
        "quarantine.batch.writes:BatchWriter._observed",
    )),
    Phase("count pass (noop over the batch)", ("quarantine.batch.writes:BatchWriter._count_pass",), taken=False,
          when="runs only with a policy that may stop the batch, a judging stage, or a target that exists"),
    Phase("target commit (_write_target)", ("quarantine.batch.writes:BatchWriter._write_target",)),
    Phase("target rows: append or MERGE (merge_new_rows)", ("quarantine.batch.writes:merge_new_rows",)),
    Phase("target topics claim (claim_written_topics)", ("quarantine.sinks.target:claim_written_topics",)),
    Phase("quarantine write (_write_quarantine)", ("quarantine.batch.writes:BatchWriter._write_quarantine",)),
    Phase("quarantine rows: append or MERGE (merge_quarantine)", ("quarantine.sinks.quarantine:merge_quarantine",)),
    Phase("error policy (_decide, _enforce)", (
        "quarantine.batch.writes:BatchWriter._decide", "quarantine.batch.writes:BatchWriter._enforce",
    )),
    Phase("error reporters: DLQ topic, error-context sample (_report)", (
        "quarantine.batch.writes:BatchWriter._report",
    )),
    Phase("error-context log lines (log_batch)", ("quarantine.listeners.error_log:ErrorContextLogger.log_batch",)),
    Phase("close passed (_close_passed)", ("quarantine.batch.writes:BatchWriter._close_passed",), taken=False,
          when="runs only when records open in quarantine pass: a re-run, a replay"),
    Phase("metrics table: run start (on_run_start)", (
        "quarantine.listeners.metrics_table:MetricsTableListener.on_run_start",
    )),
    Phase("metrics table: batch rows (on_batch)", (
        "quarantine.listeners.metrics_table:MetricsTableListener.on_batch",
    )),
    Phase("run end (listeners' run end)", ("quarantine.batch.run:Run.end",), waits=True),
)


@dataclass(frozen=True)
class Call:
    """One timed call: its phase, start and end (epoch seconds) and the thread it ran on."""

    phase: str
    start: float
    end: float
    thread: str


def resolve(target: str) -> tuple[Any, str, Callable[..., Any]]:
    """``target``'s owner (module or class), attribute name and function.

    Raises:
        PhaseTargetError: the module, class or attribute is not there, or the attribute is
            not a plain function defined on that owner (an inherited method: name the class
            that defines it).
    """
    module_name, _, path = target.partition(":")
    if not path:
        raise PhaseTargetError(f"{target!r}: expected module:attribute or module:Class.attribute")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PhaseTargetError(f"{target}: module {module_name} does not import: {exc}") from exc
    *classes, attr = path.split(".")
    for name in classes:
        owner = vars(owner).get(name)
        if not isinstance(owner, type):
            raise PhaseTargetError(f"{target}: {name} is not a class of {module_name}")
    fn = vars(owner).get(attr)
    if not inspect.isfunction(fn):
        raise PhaseTargetError(f"{target}: no function {attr} on {owner.__name__} (renamed or moved?)")
    return owner, attr, fn


class PhaseTimer:
    """Wraps each phase's targets with a timer; :attr:`calls` holds every call, in the order they ended."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._undo: list[Callable[[], None]] = []

    def install(self, phases: Sequence[Phase]) -> None:
        """Wrap every target of ``phases`` (all resolved first: a missing one wraps nothing).

        Raises:
            PhaseTargetError: a target is not there (:func:`resolve`).
        """
        found = [(p.name, *resolve(t)) for p in phases for t in p.targets]
        for phase, owner, attr, fn in found:
            self._wrap(phase, owner, attr, fn)

    def uninstall(self) -> None:
        """Put every wrapped function back."""
        while self._undo:
            self._undo.pop()()

    def _wrap(self, phase: str, owner: Any, attr: str, fn: Callable[..., Any]) -> None:
        calls = self.calls

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append(Call(phase, start, time.time(), threading.current_thread().name))

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, fn))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``quarantine run --conf CONF`` with :data:`PHASES` timed; write the timings to ``--out``; its exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--conf", required=True)
    ap.add_argument("--out", required=True, help="where the timings go (JSON)")
    args = ap.parse_args(argv)
    timer = PhaseTimer()
    timer.install(PHASES)
    began = time.time()
    code = 1
    try:
        code = quarantine.cli.main(["run", "--conf", args.conf])
    finally:
        returned = time.time()
        timer.uninstall()
        Path(args.out).write_text(json.dumps({
            "started": STARTED, "quarantine_imported": QUARANTINE_IMPORTED, "imported": IMPORTED,
            "command_began": began, "command_returned": returned, "exit_code": code,
            "calls": [asdict(c) for c in timer.calls],
        }), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
