"""Run every benchmark and write the results: ``python -m benchmarks.run``.

    python -m benchmarks.run [--only NAME ...] [--records N] [--repeat K]

Benchmarks, by name: ``pipeline`` (plain PySpark vs quarantine), ``dqx``
(dqx vs quarantine), ``memory`` (driver RSS, subprocess), and — when their
modules exist — ``python_stage``, ``streaming``, ``expectations``,
``vectorized_fallback``, ``avro`` (owned by their authors; each has a ``main()`` that
prints its own table).

Writes ``benchmarks/results/<UTC date>.json`` (every row with its samples,
plus the machine and versions) and prints one markdown table.
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
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks import Row, markdown_table

__all__ = ["BENCHMARKS", "environment", "main"]

RESULTS = Path(__file__).resolve().parent / "results"

#: Benchmarks owned here: name -> (module, takes --records/--repeat).
_OWN = {"pipeline": "benchmarks.bench_pipeline", "dqx": "benchmarks.bench_dqx", "memory": "benchmarks.bench_memory"}
#: Benchmarks owned by other engineers: name -> module with ``main()``.
_OTHERS = {
    "python_stage": "benchmarks.bench_python_stage",
    "streaming": "benchmarks.bench_streaming",
    "expectations": "benchmarks.bench_expectations",
    "vectorized_fallback": "benchmarks.bench_vectorized_fallback",
    "avro": "benchmarks.bench_avro",
}
BENCHMARKS: tuple[str, ...] = (*_OWN, *_OTHERS)


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
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()

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


def _own(name: str, records: int, repeat: int, memory_large: int, profile: bool) -> list[Row]:
    module = importlib.import_module(_OWN[name])
    if name == "memory":
        rows: list[Row] = module.run(1_000_000, memory_large)
    elif name == "pipeline":
        rows = module.run(records, repeat, with_profile=profile)
    else:
        rows = module.run(records, repeat)
    return rows


def _other(name: str) -> Callable[[list[str]], Any] | None:
    try:
        module = importlib.import_module(_OTHERS[name])
    except ModuleNotFoundError as exc:
        if exc.name == _OTHERS[name]:
            return None
        raise
    fn: Callable[[list[str]], Any] = module.main
    return fn


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks; return 0 (goals missed are reported, not errors)."""
    ap = argparse.ArgumentParser(description="Run the quarantine benchmarks.")
    ap.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME",
                    help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per source (pipeline, dqx)")
    ap.add_argument("--repeat", type=int, default=3, help="repeats per arm, median reported (>= 3 advised)")
    ap.add_argument("--memory-large", type=int, default=5_000_000,
                    help="records of the memory benchmark's large run (its small run is 1M)")
    ap.add_argument("--profile", action="store_true", help="pipeline: also time each phase of process_batch")
    args = ap.parse_args(argv)
    selected = args.only or list(BENCHMARKS)
    env = environment()
    rows: list[Row] = []
    others: dict[str, str] = {}
    for name in selected:
        if name in _OWN:
            rows.extend(_own(name, args.records, args.repeat, args.memory_large, args.profile))
            continue
        fn = _other(name)
        if fn is None:
            others[name] = "module not present"
            print(f"{name}: {_OTHERS[name]} not present, skipped", file=sys.stderr)
            continue
        print(f"\n## {name}\n", flush=True)
        out = fn([])  # [] = the module's defaults, not this command line
        if isinstance(out, list) and all(isinstance(r, Row) for r in out):
            rows.extend(out)
            others[name] = f"ran ({len(out)} rows)"
        else:
            others[name] = "ran (see its table above)" if out is None else repr(out)[:2000]
    env["load_avg_at_end"] = list(os.getloadavg())
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{dt.datetime.now(dt.UTC):%Y-%m-%d}.json"
    runs = _earlier_runs(path)
    runs.append({
        "environment": env,
        "args": {"only": selected, "records": args.records, "repeat": args.repeat,
                 "memory_large": args.memory_large},
        "rows": [dataclasses.asdict(r) for r in rows],
        "other_benchmarks": others,
    })
    path.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    print()
    print(markdown_table(rows))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
