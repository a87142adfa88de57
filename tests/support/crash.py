"""Crash a streaming pipeline process at random points, restart it, let it finish.

The pipeline runs as ``python -m quarantine.cli run --conf <yml>`` in its own
process group (the Python driver and its Spark JVM); a crash is ``SIGKILL`` to
that whole group, which is what a lost driver looks like. Kill points are
chosen relative to the checkpoint: once a micro-batch is in flight (its
``offsets/<n>`` file written, ``commits/<n>`` not yet), the process is killed
after a random delay, so kills land before, between and after the batch's two
writes and its offset commit (:func:`run_with_kills`). :func:`run_with_phase_kills` aims each
kill at one of those points (:data:`KILL_PHASES`), read from the two tables' Delta logs, and
names the point each kill landed on once the process is dead.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from quarantine.errors import QuarantineError

__all__ = [
    "BETWEEN",
    "KILL_PHASES",
    "PLANNED",
    "WRITTEN",
    "CrashRun",
    "CrashRunError",
    "batch_files",
    "run_to_completion",
    "run_with_kills",
    "run_with_phase_kills",
    "write_conf",
]


#: Where in a micro-batch a kill landed, by what the batch had written when its driver died
#: (a micro-batch writes its two tables, one after the other, then commits its offsets):
#: planned (``offsets/<n>`` written), neither table written yet.
PLANNED = "planned"
#: One of the two tables written, the other not.
BETWEEN = "between writes"
#: Both tables written, ``commits/<n>`` not yet (the listeners, the offset commit).
WRITTEN = "written, not committed"
#: Every kind of kill point, in a batch's order.
KILL_PHASES: tuple[str, ...] = (PLANNED, BETWEEN, WRITTEN)
#: A kill that landed after ``commits/<n>``: the batch it aimed at was done (a miss).
COMMITTED = "committed"


class CrashRunError(QuarantineError):
    """The pipeline process failed by itself, or did not make progress in time."""


@dataclass
class CrashRun:
    """What a kill-and-restart run did.

    Attributes:
        kills: SIGKILLs delivered while a batch was in flight.
        kill_points: per kill, the batch in flight and the delay after it was planned (s)
            (:func:`run_with_phase_kills`: after its aimed phase began).
        phases: per kill of :func:`run_with_phase_kills`, the point it landed on
            (one of :data:`KILL_PHASES`, or :data:`COMMITTED`).
        wall_s: total wall time including the final run.
        committed_batches: batches committed in the checkpoint at the end.
        self_exits: per exit the pipeline made by itself (allowed by ``max_self_exits``),
            its exit code and the last lines of its log.
    """

    kills: int = 0
    kill_points: list[tuple[int, float]] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    self_exits: list[tuple[int, str]] = field(default_factory=list)
    wall_s: float = 0.0
    committed_batches: int = 0


def write_conf(raw: Mapping[str, Any], path: Path) -> Path:
    """Write a pipeline config mapping as YAML and return the path."""
    path.write_text(yaml.safe_dump(dict(raw), sort_keys=False), encoding="utf-8")
    return path


def batch_files(checkpoint: Path, kind: str) -> set[int]:
    """Batch ids with a file in ``<checkpoint>/<kind>`` (``offsets`` or ``commits``)."""
    d = checkpoint / kind
    if not d.is_dir():
        return set()
    return {int(p.name) for p in d.iterdir() if p.name.isdigit()}


def _start(conf: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.setdefault("QUARANTINE_SPARK_LOG_LEVEL", "ERROR")
    env["PYTHONUNBUFFERED"] = "1"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "quarantine.cli", "run", "--conf", str(conf)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env,
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _tail(log: Path, lines: int = 30) -> str:
    if not log.exists():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def run_with_kills(
    conf: Path,
    checkpoint: Path,
    *,
    kills: int,
    log: Path,
    rng: random.Random,
    max_delay_s: float = 4.0,
    stall_timeout_s: float = 180.0,
    max_self_exits: int = 0,
) -> CrashRun:
    """Start the pipeline, SIGKILL it mid-batch ``kills`` times, restarting each time.

    Args:
        conf: a config with a ``processing_time`` trigger (it never ends by itself).
        checkpoint: its ``target.checkpoint``.
        kills: how many crashes to inflict.
        log: the processes' combined stdout/stderr.
        rng: chooses the delays (seed it for a reproducible run).
        max_delay_s: a kill lands uniformly in [0, max_delay_s] after a batch is planned.
        stall_timeout_s: fail if the checkpoint shows no progress (a batch planned or
            committed) for this long.
        max_self_exits: how many times the process may exit by itself (a stream that
            fails while its broker restarts) and be restarted, as a job scheduler's
            retry would; each is recorded in :attr:`CrashRun.self_exits`.

    Raises:
        CrashRunError: the process exited by itself more than ``max_self_exits``
            times, or stalled.
    """
    out = CrashRun()
    t0 = time.monotonic()
    while out.kills < kills:
        planned_before = batch_files(checkpoint, "offsets")
        proc = _start(conf, log)
        try:
            deadline = time.monotonic() + stall_timeout_s
            seen = (len(planned_before), len(batch_files(checkpoint, "commits")))
            exited = False
            while True:
                if proc.poll() is not None:
                    if len(out.self_exits) >= max_self_exits:
                        raise CrashRunError(
                            f"the pipeline exited by itself (code {proc.returncode}) before kill "
                            f"{out.kills + 1}:\n{_tail(log)}"
                        )
                    out.self_exits.append((proc.returncode, _tail(log, 12)))
                    exited = True
                    break
                planned = batch_files(checkpoint, "offsets")
                in_flight = planned - batch_files(checkpoint, "commits")
                fresh = planned - planned_before
                if fresh and in_flight:
                    break
                progress = (len(planned), len(batch_files(checkpoint, "commits")))
                if progress != seen:  # a replayed batch committing is progress too
                    seen, deadline = progress, time.monotonic() + stall_timeout_s
                if time.monotonic() > deadline:
                    raise CrashRunError(
                        f"no micro-batch planned or committed for {stall_timeout_s:.0f} s:\n{_tail(log)}"
                    )
                time.sleep(0.05)
            if exited:
                continue
            delay = rng.uniform(0.0, max_delay_s)
            time.sleep(delay)
            out.kill_points.append((max(in_flight), round(delay, 2)))
        finally:
            _kill_group(proc)
        out.kills += 1
    out.wall_s = time.monotonic() - t0
    out.committed_batches = len(batch_files(checkpoint, "commits"))
    return out


def _commits(table: Path) -> int:
    """How many commits ``table``'s Delta log holds (0 before it exists)."""
    log = table / "_delta_log"
    if not log.is_dir():
        return 0
    return sum(1 for p in log.iterdir() if p.suffix == ".json" and p.stem.isdigit())


def _phase(quarantine: Path, target: Path, checkpoint: Path, batch: int, before: tuple[int, int]) -> str:
    """The point batch ``batch`` has reached, its tables' commit counts at its plan being ``before``."""
    if batch in batch_files(checkpoint, "commits"):
        return COMMITTED
    written = (_commits(quarantine) > before[0]) + (_commits(target) > before[1])
    return (PLANNED, BETWEEN, WRITTEN)[written]


def run_with_phase_kills(
    conf: Path,
    checkpoint: Path,
    *,
    quarantine: Path,
    target: Path,
    log: Path,
    rng: random.Random,
    phases: tuple[str, ...] = KILL_PHASES,
    max_kills: int = 6,
    jitter_s: float = 0.3,
    stall_timeout_s: float = 180.0,
) -> CrashRun:
    """Start the pipeline and SIGKILL it once in each of ``phases`` of a micro-batch, restarting each time.

    Each kill aims at one phase (in ``phases``' order): the process is killed
    ``uniform(0, jitter_s)`` seconds after a freshly planned batch reached it (its commit
    counts read from the two tables' ``_delta_log``, polled every 20 ms). A phase the batch
    skipped past before the kill is aimed at again on a later batch. Once the process is dead,
    the phase its batch had reached is recorded (:attr:`CrashRun.phases`): that is where the kill
    landed, whatever was aimed.

    Args:
        conf: a config with a ``processing_time`` trigger (it never ends by itself) whose
            micro-batches each write ``quarantine`` (quarantined rows in every batch) and ``target``.
        checkpoint: its ``target.checkpoint``.
        quarantine: the quarantine table's folder.
        target: the target table's folder.
        log: the processes' combined stdout/stderr.
        rng: chooses the delays (seed it for a reproducible choice).
        phases: the kinds of kill points to land (:data:`KILL_PHASES`).
        max_kills: kills allowed in all, misses included.
        jitter_s: a kill lands uniformly in [0, jitter_s] after its phase began.
        stall_timeout_s: fail if the checkpoint shows no progress for this long.

    Raises:
        CrashRunError: the process exited by itself or stalled, or ``max_kills`` kills
            did not land every phase.
    """
    out = CrashRun()
    t0 = time.monotonic()
    todo = list(phases)
    while todo:
        if out.kills >= max_kills:
            raise CrashRunError(f"{max_kills} kills landed on {out.phases}, not on {todo}")
        aim = todo[0]
        # never batch 0: it may create the tables, commits that are no batch's write
        planned_before = batch_files(checkpoint, "offsets") | {0}
        proc = _start(conf, log)
        try:
            deadline = time.monotonic() + stall_timeout_s
            batch, before, quiet, began = -1, (0, 0), None, 0.0
            while True:
                if proc.poll() is not None:
                    raise CrashRunError(
                        f"the pipeline exited by itself (code {proc.returncode}) before kill "
                        f"{out.kills + 1}:\n{_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise CrashRunError(f"no micro-batch reached {aim!r} within {stall_timeout_s:.0f} s:\n{_tail(log)}")
                if batch < 0:
                    # the tables' counts are a batch's "before" only if read while no batch was in
                    # flight (every planned batch's writes done), before it was planned
                    in_flight = batch_files(checkpoint, "offsets") - batch_files(checkpoint, "commits")
                    fresh = in_flight - planned_before
                    if fresh and quiet is not None:
                        batch, before = max(fresh), quiet
                        deadline = time.monotonic() + stall_timeout_s
                    elif fresh:  # planned before a quiet moment was seen: let it go, aim at the next
                        planned_before |= fresh
                    quiet = None if in_flight else (_commits(quarantine), _commits(target))
                else:
                    now = _phase(quarantine, target, checkpoint, batch, before)
                    if now == aim:
                        began = time.monotonic()
                        break
                    if KILL_PHASES.index(aim) < (*KILL_PHASES, COMMITTED).index(now):
                        planned_before.add(batch)  # it went past the phase aimed at: the next batch
                        batch, quiet = -1, None
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, jitter_s))
            delay = time.monotonic() - began
        finally:
            _kill_group(proc)
        landed = _phase(quarantine, target, checkpoint, batch, before)
        out.kills += 1
        out.kill_points.append((batch, round(delay, 2)))
        out.phases.append(landed)
        if landed in todo:
            todo.remove(landed)
    out.wall_s = time.monotonic() - t0
    out.committed_batches = len(batch_files(checkpoint, "commits"))
    return out


def run_to_completion(conf: Path, log: Path, *, timeout_s: float = 600.0) -> float:
    """Run the pipeline (an ``available_now`` config) until it exits; return its wall time.

    Raises:
        CrashRunError: it failed or did not finish within ``timeout_s``.
    """
    t0 = time.monotonic()
    proc = _start(conf, log)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CrashRunError(
            f"the final run did not finish within {timeout_s:.0f} s:\n{_tail(log)}"
        ) from None
    if code != 0:
        raise CrashRunError(f"the final run failed (exit {code}):\n{_tail(log)}")
    return time.monotonic() - t0
