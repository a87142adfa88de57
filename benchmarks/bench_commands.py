"""Each ``quarantine`` command's time to first output on the demo tables, as a user runs it.

    python -m benchmarks.bench_commands [--records N] [--repeat K] [--only COMMAND ...] [--smoke]
    python -m benchmarks.bench_commands --repeat 3 --only --help --only --version --only validate

Every command is a fresh process (``python -m quarantine ...``: a new interpreter and,
where the command reads tables, a new JVM), started from outside in a folder holding the
demo (``init-demo`` then ``run`` of ``conf/orders_demo.yml``, written once per repeat
round by the two commands themselves, which are timed too). Timed: from the process's
start to its first line on stdout (the command's answer: its log lines go to stderr, as
do the JVM's, which an older build printed before any answer) and to its exit.
Rounds alternate the order of the read-only commands (A B C, then C B A), and the median
of ``--repeat`` rounds is reported.

A row: ``baseline`` is the time to first output, ``subject`` the time to exit; the goal
(issue 37) is a read-only command's first output within :data:`READ_ONLY_GOAL_S` on a
2-core machine, and (issue 53) the first output of a command that starts at once within
its :data:`STARTUP_GOALS_S`. Those commands (:data:`STARTUP`, and ``validate``) read no table:
when ``--only`` names none but them, no demo is written. The machine is shared: the load
average at each sample's start is kept with the samples (``load`` in the results file), and
should be read beside the figures.

``--smoke`` (the suite's check, ``tests/e2e/test_benchmarks_smoke.py``) runs every arm once,
and every arm that reads tables in this process (:func:`run_in_process`: ``quarantine.cli.main``
in the demo's folder, on this process's Spark session) instead of a process of its own: the
arms are the same commands on the same tables, without a JVM start each (``validate``,
``--help`` and ``--version``, which start none, still run as processes: :func:`time_command` runs too).
Its timings are not a command's time to first output (measures nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import Row, add_smoke, bench_dir, markdown_table, median
from quarantine.cli import main as cli_main

__all__ = [
    "COMMANDS", "JVM_FREE_GOALS_S", "ON_SPARK", "READ_ONLY", "READ_ONLY_GOAL_S", "STARTUP", "STARTUP_GOALS_S",
    "Timing", "demo_commands", "main", "run_in_process", "time_command",
]

_REPO = Path(__file__).resolve().parent.parent
#: Seconds within which a read-only command on the demo tables shows its first line.
READ_ONLY_GOAL_S = 10.0
_CONF = "conf/orders_demo.yml"
#: The commands timed after the demo's two, by label: the arguments after ``quarantine``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "validate": ("validate", "--conf", _CONF),
    "inspect": ("inspect", "--conf", _CONF, "--limit", "5"),
    "stats": ("stats", "--conf", _CONF),
    "sql top_errors": ("sql", "top_errors", "--conf", _CONF),
    "sql error_rate": ("sql", "error_rate", "--conf", _CONF),
    "views --print": ("views", "--conf", _CONF, "--print"),
    "replay --dry-run": ("replay", "--conf", _CONF, "--dry-run"),
    "report": ("report", "--conf", _CONF, "--out", "r.html"),
    "maintain": ("maintain", "--conf", _CONF),
}
#: The commands that only read tables (the goal's); ``validate`` never starts Spark.
READ_ONLY = frozenset({"validate", "inspect", "stats", "sql top_errors", "sql error_rate", "views --print",
                       "replay --dry-run", "report"})
#: Arms that read the same tables on Spark (``$QUARANTINE_READ_ENGINE=spark``): the JVM-free path's
#: "before", in the same rounds. Label ``X (spark)`` runs command ``X``.
ON_SPARK: tuple[str, ...] = ("inspect", "stats", "sql top_errors", "sql error_rate", "report", "replay --dry-run")
#: Seconds to first output of the read-only commands that answer without a JVM on path tables (issue 53):
#: ``report``'s first line follows the page written; ``replay --dry-run``'s is its selection (its
#: outcomes, after, run the stages on Spark: its exit is a JVM's).
JVM_FREE_GOALS_S: dict[str, float] = {"inspect": 1.0, "stats": 1.0, "sql top_errors": 1.0, "sql error_rate": 1.0,
                                      "report": 2.0, "replay --dry-run": 2.0}
#: The command line's own answers, by label: the arguments after ``quarantine`` (no config, no table).
STARTUP: dict[str, tuple[str, ...]] = {"--help": ("--help",), "--version": ("--version",)}
#: Seconds to first output within which a command that imports no engine answers (issue 53's goals).
STARTUP_GOALS_S: dict[str, float] = {"--help": 0.3, "--version": 0.3, "validate": 1.0}


@dataclass(frozen=True)
class Timing:
    """One command's process, timed.

    Attributes:
        first_s: seconds from its start to its first line on stdout.
        exit_s: seconds from its start to its exit.
        load: the 1-minute load average when it started.
    """

    first_s: float
    exit_s: float
    load: float


def time_command(args: Sequence[str], cwd: Path, env_extra: dict[str, str] | None = None) -> Timing:
    """Run ``python -m quarantine *args`` in ``cwd`` (``env_extra`` added to its environment); its :class:`Timing`.

    Raises:
        RuntimeError: the command exited with a code other than 0 (its output is in the message).
    """
    env = {k: v for k, v in os.environ.items() if k != "QUARANTINE_SPARK_LOG_LEVEL"}  # as a user's shell
    env["PYTHONPATH"] = str(_REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(env_extra or {})
    load = os.getloadavg()[0]
    start = time.monotonic()
    first: list[float] = []
    lines: list[str] = []
    lock = threading.Lock()
    proc = subprocess.Popen([sys.executable, "-m", "quarantine", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(stream: object, answers: bool) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with lock:
                if answers and not first:
                    first.append(time.monotonic() - start)
                lines.append(line)

    readers = [threading.Thread(target=read, args=(s, s is proc.stdout), daemon=True)
               for s in (proc.stdout, proc.stderr)]
    for r in readers:
        r.start()
    code = proc.wait()
    for r in readers:
        r.join()
    ended = time.monotonic() - start
    if code != 0:
        raise RuntimeError(f"quarantine {' '.join(args)} exited {code}:\n{''.join(lines)[-3000:]}")
    return Timing(first[0] if first else ended, ended, load)


def run_in_process(args: Sequence[str], cwd: Path, env_extra: dict[str, str] | None = None) -> Timing:
    """Run ``quarantine *args`` in this process (``quarantine.cli.main``) in ``cwd``, with
    ``env_extra`` set in the environment for its duration; its :class:`Timing` (``--smoke``).

    Its Spark session is this process's (created if there is none, kept after). ``first_s``
    is its exit time: the output is collected, not watched.

    Raises:
        RuntimeError: the command returned an exit code other than 0 (its output is in the message).
    """
    saved = {k: os.environ.get(k) for k in (env_extra or {})}
    os.environ.update(env_extra or {})
    out = io.StringIO()
    load = os.getloadavg()[0]
    start = time.monotonic()
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out):
            code = cli_main(list(args))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ended = time.monotonic() - start
    if code != 0:
        raise RuntimeError(f"quarantine {' '.join(args)} exited {code} (in process):\n{out.getvalue()[-3000:]}")
    return Timing(ended, ended, load)


def demo_commands(records: int) -> dict[str, tuple[str, ...]]:
    """The demo's two commands, by label, that write the tables the others read: the arguments after ``quarantine``."""
    return {
        "init-demo": ("init-demo", "--out", "data/demo", "--records", str(records)),
        "run": ("run", "--conf", _CONF),
    }


def _demo(records: int, cwd: Path, smoke: bool = False) -> dict[str, Timing]:
    """A fresh demo in ``cwd`` (a copy of ``conf/``): ``init-demo`` and ``run``, timed (``smoke``: in process)."""
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    shutil.copytree(_REPO / "conf", cwd / "conf")
    timer = run_in_process if smoke else time_command
    return {label: timer(args, cwd) for label, args in demo_commands(records).items()}


def run(records: int, repeat: int, only: Sequence[str] = (), *, smoke: bool = False) -> list[Row]:
    """``repeat`` rounds over a demo of ``records`` records; one row per command.

    With ``only`` naming just commands that read no table (:data:`STARTUP_GOALS_S`'s), the
    rounds run in a folder holding ``conf/`` and no demo. ``smoke``: every command that starts
    a JVM runs in this process (:func:`run_in_process`; not :data:`STARTUP_GOALS_S`'s), and its
    round's line says where each ran.
    """
    timed = {**STARTUP, **COMMANDS, **{f"{c} (spark)": COMMANDS[c] for c in ON_SPARK}}
    labels = [c for c in timed if (not only and c not in STARTUP) or c in only]
    tables = any(c not in STARTUP_GOALS_S for c in labels)
    samples: dict[str, list[Timing]] = {}
    for i in range(repeat):
        cwd = bench_dir() / "commands"
        if tables:
            for label, t in _demo(records, cwd, smoke).items():
                samples.setdefault(label, []).append(t)
        else:
            shutil.rmtree(cwd, ignore_errors=True)
            shutil.copytree(_REPO / "conf", cwd / "conf")
        reads = [c for c in labels if c != "maintain"]
        order = reads if i % 2 == 0 else reads[::-1]
        for label in [*order, *(["maintain"] if "maintain" in labels else [])]:  # maintain writes: last
            spark = {"QUARANTINE_READ_ENGINE": "spark"} if label.endswith(" (spark)") else None
            in_process = smoke and label not in STARTUP_GOALS_S
            timer = run_in_process if in_process else time_command
            samples.setdefault(label, []).append(timer(timed[label], cwd, spark))
            t = samples[label][-1]
            where = "in process" if in_process else "a process"
            print(f"  round {i + 1} {label} ({where}): first output {t.first_s:.2f} s, exit {t.exit_s:.2f} s "
                  f"(load {t.load:.2f})", flush=True)
    rows = []
    for label, ts in samples.items():
        first, ended = median([t.first_s for t in ts]), median([t.exit_s for t in ts])
        if label in JVM_FREE_GOALS_S:
            goal, met = f"first output <= {JVM_FREE_GOALS_S[label]:g} s", first <= JVM_FREE_GOALS_S[label]
        elif label in STARTUP_GOALS_S:
            goal, met = f"first output <= {STARTUP_GOALS_S[label]:g} s", first <= STARTUP_GOALS_S[label]
        elif label in READ_ONLY or label.endswith(" (spark)"):
            goal, met = f"first output <= {READ_ONLY_GOAL_S:.0f} s", first <= READ_ONLY_GOAL_S
        else:
            goal, met = "-", True
        case = f"quarantine {label}" + (f" ({records:,}-record demo)" if tables else " (no demo)")
        rows.append(Row(
            bench="commands", case=case, baseline_s=first,
            subject_s=ended, ratio=ended / first if first else 0.0, goal=goal, met=met,
            samples={"first_s": [t.first_s for t in ts], "exit_s": [t.exit_s for t in ts],
                     "load": [t.load for t in ts]},
        ))
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """``--records N --repeat K --only LABEL``: run, print the table, return the rows."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000, help="the demo's records (default: the demo's 10000)")
    ap.add_argument("--repeat", type=int, default=3)
    arms = [*STARTUP, *COMMANDS, *(f"{c} (spark)" for c in ON_SPARK)]
    ap.add_argument("--only", action="append", default=[], choices=arms, metavar="COMMAND",
                    help=f"time only this command besides the demo's two (repeatable): "
                         f"{', '.join(arms)}; --help, --version and validate alone need no demo")
    # every command is an arm, run once per round: nothing to leave out; --smoke runs them in process
    add_smoke(ap)
    args = ap.parse_args([] if argv is None else list(argv))
    rows = run(args.records, args.repeat, args.only, smoke=args.smoke)
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
