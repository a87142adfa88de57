"""A whole ``quarantine run`` process against hand-written jobs, each a fresh process and JVM.

    python -m benchmarks.bench_process [--records N] [--poison-rate R] [--repeat K] [--sizes 1000000,4000000]
        [--baseline REV] [--smoke]

A Databricks job pays a new JVM's start-up and JIT on every run, which the in-process
benchmarks (one warm session for every arm) do not see. Here every arm is an OS process
started from outside, on fresh output folders, timed from its start to its exit, with
the peak memory of its process tree (the Python driver and its JVM: PSS sum, and the
RSS sum beside it; :func:`benchmarks.bench_memory.watch`). Arms are interleaved (A B C,
then C B A, …) and the median of ``--repeat`` (at least 3 advised) is reported.

The source is Kafka-shaped Delta, written once per size beforehand by
``quarantine init-demo --out DIR --records N --poison-rate R`` (untimed).

* **quarantine** — ``python -m quarantine run --conf X.yml``, the config derived from
  ``conf/orders_demo.yml``: its decode -> json -> cast -> checks stages (the expectation
  stage dropped), the metrics table on, MLflow off, target and quarantine fresh per run;
* **handwritten_split** — :mod:`benchmarks.handwritten.split_job`: parse once, cache,
  good rows to one Delta table, bad rows (raw bytes, coordinates, a reason) to another;
* **handwritten_good_only** — :mod:`benchmarks.handwritten.good_only`: parse once, keep
  the good rows, append them; bad rows are lost;
* **baseline** (with ``--baseline REV``) — the quarantine arm's command and config, run by the
  code of commit ``REV`` (a git worktree of it under ``$BENCH_DIR/worktrees``, the same venv):
  a change measured against the code before it, side by side in one run, where the ratios to
  the hand-written job of two days are not comparable on a shared machine. Reported: each
  commit's ratio to the split job, and this commit's against ``REV``'s (goal: no worse).

All three build their session with :func:`quarantine.spark.session.get_spark` (same jars,
settings and JVM options) and keep the same rows: every run's target row count (and
quarantine row count, where an arm writes one) is checked against the others' (read from
the Delta log, without Spark).

Goals (issue 36): quarantine / hand-written split <= 1.15x; quarantine / good-only <= 1.30x.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks import Row, add_smoke, bench_dir, drop_dir, fresh_dir, markdown_table, median
from benchmarks.bench_memory import TreeMemory, watch
from benchmarks.run import environment, write_results

__all__ = [
    "ARMS", "BASELINE", "GOALS", "Sample", "baseline_tree", "child_env", "delta_rows", "ensure_demo_source", "main",
    "quarantine_config", "run",
    "run_arm",
]

_REPO = Path(__file__).resolve().parent.parent
DEMO_CONF = _REPO / "conf" / "orders_demo.yml"

#: The arms, in their first round's order.
ARMS: tuple[str, ...] = ("quarantine", "handwritten_split", "handwritten_good_only")
#: quarantine / each hand-written arm.
GOALS: dict[str, float] = {"handwritten_split": 1.15, "handwritten_good_only": 1.30}
#: The arm run by another commit's code (``--baseline``).
BASELINE = "baseline"


class CountMismatchError(RuntimeError):
    """The arms' targets do not hold the same number of rows: they are not doing the same work."""


@dataclass(frozen=True)
class Sample:
    """One run of one arm.

    Attributes:
        arm: the arm's name.
        memory: its wall time, peak memory and exit code.
        target_rows: rows in its target table afterwards.
        quarantined_rows: rows in its quarantine table (None: the arm writes none).
    """

    arm: str
    memory: TreeMemory
    target_rows: int
    quarantined_rows: int | None


def delta_rows(path: Path) -> int:
    """Rows of the Delta table at ``path``: the ``numRecords`` of its live files, from its JSON log.

    Raises:
        ValueError: the log has a checkpoint or a file without statistics (not so for the
            fresh tables this benchmark writes: a few commits each).
    """
    log = path / "_delta_log"
    if not log.is_dir():
        raise ValueError(f"{path}: no Delta table (no _delta_log)")
    if any(log.glob("*.checkpoint*.parquet")):
        raise ValueError(f"{path}: the log has a checkpoint; expected only JSON commits")
    live: dict[str, int] = {}
    for commit in sorted(log.glob("[0-9]*.json")):
        for line in commit.read_text(encoding="utf-8").splitlines():
            action = json.loads(line)
            if "add" in action:
                stats = action["add"].get("stats")
                if not stats:
                    raise ValueError(f"{path}: {action['add']['path']} has no statistics")
                live[action["add"]["path"]] = int(json.loads(stats)["numRecords"])
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return sum(live.values())


def quarantine_config(source: str, out: Path) -> dict[str, object]:
    """``conf/orders_demo.yml`` without its expectation stage, MLflow off, every table under ``out``."""
    config = yaml.safe_load(DEMO_CONF.read_text(encoding="utf-8"))
    config["stages"] = [s for s in config["stages"] if s["type"] != "expectation"]
    config["source"]["path"] = source
    config["target"]["table"] = str(out / "target")
    config["errors"]["deadletterqueue.table.name"] = str(out / "quarantine")
    config["metrics"] = {"table": str(out / "metrics")}
    config["mlflow"] = {"enabled": False}
    return dict(config)


def ensure_demo_source(records: int, poison_rate: float, *, in_process: bool = False) -> str:
    """The ``init-demo`` source for ``records`` at ``poison_rate``, written once (a marker after it).

    ``in_process``: written by this process's session (what ``init-demo`` calls, same seed, so
    the same records), not by an ``init-demo`` process: one JVM start fewer (``--smoke``).
    """
    name = f"demo-{records}-p{round(poison_rate * 1000):04d}"
    out = bench_dir() / "process-sources" / name
    marker = out.parent / f"{name}.ok"
    if not marker.exists():
        drop_dir(out)
        print(f"process: writing the source ({records:,} records, {poison_rate:.1%} poison) "
              + ("in this process" if in_process else "with init-demo"), file=sys.stderr, flush=True)
        if in_process:
            from benchmarks import bench_spark
            from quarantine.demo.orders import write_demo_source

            write_demo_source(bench_spark("bench-process"), str(out / "source"), records, poison_rate=poison_rate)
        else:
            subprocess.run(
                [sys.executable, "-m", "quarantine", "init-demo", "--out", str(out), "--records", str(records),
                 "--poison-rate", str(poison_rate)],
                check=True, cwd=_REPO, env=child_env(), stdout=subprocess.DEVNULL,
            )
        marker.write_text(f"{records}\n", encoding="utf-8")
    return str(out / "source")


def child_env(repo: Path = _REPO) -> dict[str, str]:
    """The children's environment: this one, with ``repo`` importable first (``quarantine``,
    ``benchmarks.handwritten``)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), path) if p)}


def baseline_tree(rev: str) -> Path:
    """A git worktree of ``rev`` (made once per commit under ``$BENCH_DIR/worktrees``), whose
    ``quarantine`` a ``baseline`` arm runs.

    Raises:
        subprocess.CalledProcessError: ``rev`` is not a commit of this repository.
    """
    commit = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    tree = bench_dir() / "worktrees" / commit[:12]
    if not (tree / "quarantine" / "__init__.py").is_file():
        subprocess.run(["git", "-C", str(_REPO), "worktree", "add", "--force", "--detach", str(tree), commit],
                       check=True, capture_output=True)
    return tree


def _command(arm: str, source: str, out: Path) -> list[str]:
    if arm in ("quarantine", BASELINE):
        conf = out / "quarantine.yml"
        conf.write_text(yaml.safe_dump(quarantine_config(source, out), sort_keys=False), encoding="utf-8")
        return [sys.executable, "-m", "quarantine", "run", "--conf", str(conf)]
    if arm == "handwritten_split":
        return [sys.executable, "-m", "benchmarks.handwritten.split_job", "--source", source,
                "--target", str(out / "target"), "--quarantine", str(out / "quarantine")]
    if arm == "handwritten_good_only":
        return [sys.executable, "-m", "benchmarks.handwritten.good_only", "--source", source,
                "--target", str(out / "target")]
    raise ValueError(f"unknown arm {arm!r}; expected one of {', '.join(ARMS)}")


def run_arm(arm: str, source: str, baseline: Path | None = None) -> Sample:
    """Run ``arm`` once as a fresh process on fresh output folders (deleted afterwards); the
    ``baseline`` arm in the worktree ``baseline`` (:func:`baseline_tree`).

    Raises:
        RuntimeError: the process failed (its output's last lines in the message).
    """
    out = fresh_dir(f"process-{arm}")
    try:
        cmd = _command(arm, source, out)
        log = out / "output.log"
        with log.open("wb") as fh:
            start = time.perf_counter()
            repo = baseline if arm == BASELINE and baseline is not None else _REPO
            mem = watch(subprocess.Popen(cmd, cwd=repo, env=child_env(repo), stdout=fh, stderr=subprocess.STDOUT),
                        start)
        if mem.returncode != 0:
            tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"process: {arm} exited {mem.returncode}: {' '.join(cmd)}\n{tail}")
        quarantined = delta_rows(out / "quarantine") if (out / "quarantine").is_dir() else None
        return Sample(arm, mem, delta_rows(out / "target"), quarantined)
    finally:
        drop_dir(out)


def _check_counts(samples: Sequence[Sample]) -> None:
    """Every arm's target holds as many rows as every other's, and so do the quarantine tables.

    Raises:
        CountMismatchError: they do not.
    """
    for what, counts in (
        ("target", {(s.arm, s.target_rows) for s in samples}),
        ("quarantine", {(s.arm, s.quarantined_rows) for s in samples if s.quarantined_rows is not None}),
    ):
        if len({n for _, n in counts}) > 1:
            raise CountMismatchError(
                f"process: the arms' {what} tables differ, so they are not doing the same work "
                f"(arm, rows): {sorted(counts)}; the hand-written rules "
                "(benchmarks/handwritten/rules.py) must decide 'good' as the quarantine config does"
            )


def measure_size(
    records: int, poison_rate: float, repeat: int, *, smoke: bool = False, baseline: Path | None = None
) -> list[Sample]:
    """Every arm (and ``baseline``'s) ``repeat`` times at one size, interleaved; the counts checked equal."""
    source = ensure_demo_source(records, poison_rate, in_process=smoke)
    samples: list[Sample] = []
    arms = ARMS if baseline is None else (ARMS[0], BASELINE, *ARMS[1:])
    for k in range(repeat):
        for arm in arms if k % 2 == 0 else arms[::-1]:
            s = run_arm(arm, source, baseline)
            samples.append(s)
            print(f"  [{arm}] {records:,} rec, repeat {k + 1}/{repeat}: {s.memory.seconds:.1f}s, "
                  f"peak PSS {s.memory.peak_pss_mib:.0f} MiB, target {s.target_rows:,} rows"
                  + (f", quarantined {s.quarantined_rows:,}" if s.quarantined_rows is not None else ""),
                  file=sys.stderr, flush=True)
            _check_counts(samples)
    return samples


def _table(records: int, poison_rate: float, by_arm: dict[str, list[Sample]]) -> str:
    med = {a: median([s.memory.seconds for s in xs]) for a, xs in by_arm.items()}
    lines = [
        f"process: {records:,} records, {poison_rate:.1%} poison, fresh JVM each run, "
        f"median of {len(by_arm[ARMS[0]])}; target rows {by_arm[ARMS[0]][0].target_rows:,}",
        "| arm | median s | min-max s | / handwritten_split | / handwritten_good_only "
        "| peak PSS MiB | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, xs in by_arm.items():
        secs = [s.memory.seconds for s in xs]
        lines.append(
            f"| {arm} | {med[arm]:.1f} | {min(secs):.1f}-{max(secs):.1f} "
            f"| {med[arm] / med['handwritten_split']:.2f}x | {med[arm] / med['handwritten_good_only']:.2f}x "
            f"| {max(s.memory.peak_pss_mib for s in xs):.0f} | {max(s.memory.peak_rss_mib for s in xs):.0f} |"
        )
    return "\n".join(lines)


def _rows(records: int, poison_rate: float, by_arm: dict[str, list[Sample]], baseline_rev: str = "") -> list[Row]:
    def secs(arm: str) -> list[float]:
        return [s.memory.seconds for s in by_arm[arm]]

    def pss(arm: str) -> list[float]:
        return [s.memory.peak_pss_mib for s in by_arm[arm]]

    q = median(secs("quarantine"))
    size = f"{records:,} rec, {poison_rate:.0%} poison, fresh JVM each run"
    rows = []
    for arm, goal in GOALS.items():
        base = median(secs(arm))
        what = "hand-written split job" if arm == "handwritten_split" else "hand-written good-rows-only job"
        rows.append(Row(
            "process", f"{size}: whole process vs {what}", base, q, q / base, f"<= {goal:.2f}x", q / base <= goal,
            samples={"quarantine": secs("quarantine"), arm: secs(arm)},
        ))
    if BASELINE in by_arm:
        split = median(secs("handwritten_split"))
        then, now = median(secs(BASELINE)) / split, q / split
        rows.append(Row(
            "process", f"{size}: whole process / hand-written split job, this commit vs {baseline_rev}",
            then, now, now / then, f"<= 1.00x (no worse than {baseline_rev})", now <= then,
            unit="x", samples={"quarantine": secs("quarantine"), BASELINE: secs(BASELINE),
                               "handwritten_split": secs("handwritten_split")},
        ))
    base_mib, q_mib = max(pss("handwritten_split")), max(pss("quarantine"))
    rows.append(Row(
        "process", f"{size}: peak driver PSS (python+JVM), whole process vs hand-written split job",
        base_mib, q_mib, q_mib / base_mib, "reported", True, unit="MiB",
        samples={
            **{f"peak_pss_mib:{a}": pss(a) for a in by_arm},
            **{f"peak_rss_mib:{a}": [s.memory.peak_rss_mib for s in xs] for a, xs in by_arm.items()},
            "target_rows": [float(by_arm["quarantine"][0].target_rows)],
        },
    ))
    return rows


def run(records: int = 2_000_000, repeat: int = 3, *, poison_rate: float = 0.01,
        sizes: Sequence[int] = (), smoke: bool = False, baseline: str = "") -> list[Row]:
    """Measure the arms at each size (``sizes``, else ``records``); return the result rows.

    ``baseline``: a commit whose code runs the quarantine arm too (:func:`baseline_tree`).

    ``smoke``: the first size only, its source written in this process; every arm is still a
    process of its own.

    Raises:
        CountMismatchError: an arm's target holds a different number of rows than another's.
        RuntimeError: an arm's process failed.
    """
    rows: list[Row] = []
    tree = baseline_tree(baseline) if baseline else None
    for n in (sizes or (records,))[: 1 if smoke else None]:
        print(f"process: {n:,} records, {poison_rate:.1%} poison, {repeat} repeats per arm", file=sys.stderr)
        samples = measure_size(n, poison_rate, repeat, smoke=smoke, baseline=tree)
        by_arm = {a: [s for s in samples if s.arm == a] for a in (*ARMS, *((BASELINE,) if tree else ()))}
        print(_table(n, poison_rate, by_arm), flush=True)
        rows.extend(_rows(n, poison_rate, by_arm, baseline))
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run, print the tables and return the rows (``argv`` None: the defaults, as ``benchmarks.run`` calls it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--poison-rate", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3, help="runs per arm, median reported (>= 3 advised)")
    ap.add_argument("--sizes", default="", help="comma-separated record counts, each measured (instead of --records)")
    ap.add_argument("--baseline", default="", metavar="REV",
                    help="also run the quarantine arm with commit REV's code, side by side (a git worktree)")
    add_smoke(ap)
    args = ap.parse_args([] if argv is None else list(argv))
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    try:
        rows = run(args.records, max(args.repeat, 1), poison_rate=args.poison_rate, sizes=sizes, smoke=args.smoke,
                   baseline=args.baseline)
    except CountMismatchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        raise
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    started = environment()
    done = main(sys.argv[1:])
    print(f"\nresults: {write_results(done, {'only': ['process'], 'argv': sys.argv[1:]}, {}, started)}")
