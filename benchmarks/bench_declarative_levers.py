"""Levers on a declarative pipeline's update, each beside the plain arm in one interleaved run.

    python -m benchmarks.bench_declarative_levers [--records N] [--repeat K]
        [--arms plain,view,...] [--arm NAME=SOURCE.py ...] [--conf KEY=VALUE ...]

The arms of :mod:`benchmarks.bench_declarative` (``plain``: ``from_json`` + one filter into one
table; ``view``: ``pipelines/orders/`` as it is, ``declare("orders.yml")``), and any other arm
given as ``NAME=FILE``: ``pipelines/orders/`` with ``FILE`` as its source file (a variant of
``declare`` under test). ``--conf`` settings go to the one ``quarantine connect-server`` all
arms run against, so they apply to every arm alike. Each update runs on fresh storage and
tables; arms are interleaved (A B C, then C B A, ...); medians, every sample, and ``uptime``
before and after are printed, and each update's output is kept beside its project.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from benchmarks import bench_dir
from benchmarks.bench_declarative import _project, _Server

__all__ = ["main"]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: Sequence[str] | None = None) -> dict[str, list[float]]:
    """Run the arms; print and return every arm's samples (seconds)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arms", default="plain,view", help="built-in arms: plain, view")
    ap.add_argument("--arm", action="append", default=[], metavar="NAME=FILE", help="an arm whose source file is FILE")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a connect-server setting")
    args = ap.parse_args(argv)
    sources: dict[str, Path | None] = {a: None for a in args.arms.split(",") if a}
    sources.update({k: Path(v).resolve() for k, v in (a.split("=", 1) for a in args.arm)})
    root = bench_dir() / "declarative-levers"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    from quarantine.demo.orders import write_demo_source
    from quarantine.spark.session import get_spark

    source = root / "source"
    spark = get_spark("bench:declarative-levers")
    write_demo_source(spark, str(source), args.records, poison_rate=0.1, seed=38)
    spark.stop()
    print("before:", _uptime(), flush=True)
    server = _Server(root, conf=args.conf)
    times: dict[str, list[float]] = {a: [] for a in sources}
    order = list(sources)
    try:
        for i in range(args.repeat):
            for arm in order if i % 2 == 0 else order[::-1]:
                project = _project(root, "plain" if arm == "plain" else "quarantine", i, source, label=arm)
                custom = sources[arm]
                if custom is not None:
                    shutil.copy(custom, project / "transformations" / "orders.py")
                started = time.perf_counter()
                out = server.run(project)
                times[arm].append(time.perf_counter() - started)
                (project / "update.log").write_text(out, encoding="utf-8")
                print(f"{arm} #{i}: {times[arm][-1]:.1f} s  ({_uptime()})", flush=True)
    finally:
        server.close()
    print("after:", _uptime())
    base = median(times["plain"]) if "plain" in times else None
    print(f"\n{args.records:,} records, 10% poison, conf {args.conf or 'none'}, median of {args.repeat}")
    print("| arm | median s | vs plain | samples |\n|---|---:|---:|---|")
    for a, t in times.items():
        ratio = f"{median(t) / base:.2f}x" if base else "-"
        print(f"| {a} | {median(t):.1f} | {ratio} | {', '.join(f'{x:.1f}' for x in t)} |")
    return times


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main(sys.argv[1:])
