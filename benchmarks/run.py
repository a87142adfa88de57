"""Run every benchmark and write the results: ``python -m benchmarks.run``.

    python -m benchmarks.run [--only NAME ...] [--records N] [--repeat K] [--results DIR] [--smoke]

Benchmarks, by name: ``pipeline`` (plain PySpark vs quarantine), ``dqx``
(dqx vs quarantine), ``memory`` (driver memory, subprocess), ``python_stage``,
``streaming``, ``expectations``, ``vectorized_fallback``, ``avro``, ``protobuf``, ``process``
(a whole ``quarantine run`` process vs hand-written jobs), ``declarative`` (a
``spark-pipelines`` update with the stages vs a plain one), ``commands`` (each
command's time to first output on the demo tables), ``breakdown`` (the per-record
work to ``noop``, stage by stage, staged vs hand-written), ``phases`` (a whole ``quarantine
run`` process's wall time, phase by phase) and ``growth`` (a day-2 run over settled records
plus 1 % new, a nothing-new re-run and a restarted stream, against a first run over the new
records alone); a module that is not there
is skipped. Each has a ``main(argv)`` that takes ``--repeat`` (and ``--records``, where
it reads a source), prints its own table and returns its rows; ``--records`` and
``--repeat`` given here reach every one, and each keeps its own default otherwise.
``--smoke`` reaches every one too: each runs every arm once, without warm-ups, on its
smallest inputs; it proves the benchmarks run (the suite runs each one so,
tests/e2e/test_benchmarks_smoke.py) and measures nothing. Without it, every benchmark runs as its figures were measured.

Writes ``<results>/<UTC date>.json`` (every row with its samples, each benchmark's wall
time, the machine and versions; ``--results``, else ``$BENCH_RESULTS_DIR``, else
``benchmarks/results``) and prints one markdown table. Each benchmark's wall time is also
printed after its own table (``pipeline: 51.9 s``): where a run's time goes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks import SMOKE_HELP, Row, add_smoke, markdown_table

__all__ = ["BENCHMARKS", "RESULTS_ENV", "environment", "main", "results_dir", "write_results"]

RESULTS = Path(__file__).resolve().parent / "results"
#: Where the results go instead of :data:`RESULTS` (a test's temporary folder).
RESULTS_ENV = "BENCH_RESULTS_DIR"

#: Every benchmark: name -> module with ``main(argv) -> list[Row]``.
_MODULES = {
    "pipeline": "benchmarks.bench_pipeline",
    "dqx": "benchmarks.bench_dqx",
    "memory": "benchmarks.bench_memory",
    "python_stage": "benchmarks.bench_python_stage",
    "streaming": "benchmarks.bench_streaming",
    "expectations": "benchmarks.bench_expectations",
    "vectorized_fallback": "benchmarks.bench_vectorized_fallback",
    "avro": "benchmarks.bench_avro",
    "protobuf": "benchmarks.bench_protobuf",
    "process": "benchmarks.bench_process",
    "declarative": "benchmarks.bench_declarative",
    "commands": "benchmarks.bench_commands",
    "breakdown": "benchmarks.bench_breakdown",
    "phases": "benchmarks.bench_phases",
    "growth": "benchmarks.bench_growth",
}
#: Those that read a source of ``--records`` records (``vectorized_fallback`` times one
#: Arrow batch; ``memory`` takes its two sizes from ``--memory-small``/``--memory-large``).
_TAKE_RECORDS = frozenset({
    "pipeline", "dqx", "python_stage", "streaming", "expectations", "avro", "protobuf", "process", "declarative",
    "commands", "breakdown", "phases", "growth",
})
BENCHMARKS: tuple[str, ...] = tuple(_MODULES)


def environment() -> dict[str, Any]:
    """The machine and versions the numbers were measured on."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = next(
            int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal")
        )
    except (OSError, StopIteration, ValueError):
        mem_kib = 0
    java = [
        line for line in subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
        .splitlines() if not line.startswith("Picked up ")  # JAVA_TOOL_OPTIONS' notice (--smoke sets it)
    ]

    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return {
        "date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu": cpu,
        "load_avg_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "pyspark": v("pyspark"),
        "delta-spark": v("delta-spark"),
        "databricks-labs-dqx": v("databricks-labs-dqx"),
    }


def _argv(name: str, args: argparse.Namespace) -> list[str]:
    """The command line ``name``'s ``main`` gets: what was given here, its own defaults otherwise."""
    argv: list[str] = []
    if args.records is not None and name in _TAKE_RECORDS:
        argv += ["--records", str(args.records)]
    if args.repeat is not None:
        argv += ["--repeat", str(args.repeat)]
    if name == "memory":
        argv += ["--small", str(args.memory_small), "--large", str(args.memory_large)]
    if name == "pipeline" and args.profile:
        argv.append("--profile")
    if args.smoke:
        argv.append("--smoke")
    return argv


def _main_of(name: str) -> Callable[[list[str]], Any] | None:
    try:
        module = importlib.import_module(_MODULES[name])
    except ModuleNotFoundError as exc:
        if exc.name == _MODULES[name]:
            return None
        raise
    fn: Callable[[list[str]], Any] = module.main
    return fn


def results_dir(given: str | None = None) -> Path:
    """Where results go: ``given``, else ``$BENCH_RESULTS_DIR``, else ``benchmarks/results``."""
    return Path(given or os.environ.get(RESULTS_ENV) or RESULTS)


def _earlier_runs(path: Path) -> list[dict[str, Any]]:
    """Today's earlier runs, every one: this run is appended after them.

    benchmarks/README.md cites a run by its time and commit, so a later run of the
    same selection (``--only streaming`` twice) keeps the earlier one's samples.
    """
    if not path.is_file():
        return []
    try:
        runs: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")).get("runs", [])
    except (ValueError, AttributeError):
        return []
    return [r for r in runs if isinstance(r, dict)]


def write_results(
    rows: Sequence[Row],
    args: Mapping[str, Any],
    others: Mapping[str, str],
    env: dict[str, Any] | None = None,
    folder: Path | None = None,
) -> Path:
    """Append one run (``rows`` with their samples, ``args``, the machine) to today's results file.

    Args:
        rows: the run's result rows.
        args: how the run was asked for (``only``, ``records``, ``repeat``…).
        others: per benchmark that gave no rows, what happened (``module not present``…).
        env: :func:`environment` taken at the start (default: taken now).
        folder: where the file goes (default: :func:`results_dir`).

    Returns:
        The file, ``<folder>/<UTC date>.json``; today's earlier runs stay in it.
    """
    env = dict(env or environment())
    env["load_avg_at_end"] = list(os.getloadavg())
    folder = folder or results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dt.datetime.now(dt.UTC):%Y-%m-%d}.json"
    runs = _earlier_runs(path)
    runs.append({
        "environment": env,
        "args": dict(args),
        "rows": [dataclasses.asdict(r) for r in rows],
        "other_benchmarks": dict(others),
    })
    path.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks; return 0 (goals missed are reported, not errors)."""
    ap = argparse.ArgumentParser(description="Run the quarantine benchmarks.")
    ap.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME",
                    help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    ap.add_argument("--records", type=int, default=None,
                    help="records per source, for every benchmark that reads one (default: each one's own)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="repeats per arm, for every benchmark (default: each one's own; >= 3 advised)")
    ap.add_argument("--memory-small", type=int, default=1_000_000, help="records of the memory benchmark's small run")
    ap.add_argument("--memory-large", type=int, default=5_000_000, help="records of the memory benchmark's large run")
    ap.add_argument("--profile", action="store_true", help="pipeline: also time each phase of process_batch")
    add_smoke(ap, help="every benchmark gets --smoke: " + SMOKE_HELP + "; give --records and --repeat 1 too")
    ap.add_argument("--results", default=None,
                    help=f"folder of the results file (default: ${RESULTS_ENV}, else benchmarks/results)")
    args = ap.parse_args(argv)
    selected = args.only or list(BENCHMARKS)
    env = environment()
    rows: list[Row] = []
    others: dict[str, str] = {}
    for name in selected:
        fn = _main_of(name)
        if fn is None:
            others[name] = "module not present"
            print(f"{name}: {_MODULES[name]} not present, skipped", file=sys.stderr)
            continue
        print(f"\n## {name}\n", flush=True)
        started = time.perf_counter()
        out = fn(_argv(name, args))
        took = time.perf_counter() - started
        print(f"\n{name}: {took:.1f} s", flush=True)
        if isinstance(out, list) and all(isinstance(r, Row) for r in out):
            rows.extend(out)
            others[name] = f"ran ({len(out)} rows, {took:.1f} s)"
        else:
            others[name] = f"ran (see its table above, {took:.1f} s)" if out is None else repr(out)[:2000]
    path = write_results(
        rows,
        {"only": selected, "records": args.records, "repeat": args.repeat,
         "memory_small": args.memory_small, "memory_large": args.memory_large, "smoke": args.smoke},
        others, env, results_dir(args.results),
    )
    print()
    print(markdown_table(rows))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
