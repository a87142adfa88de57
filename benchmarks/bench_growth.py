"""What a run costs as its source grows: day 2 over N settled records plus 1 % new, against the new alone.

    python -m benchmarks.bench_growth [--records N | --sizes 1000000,4000000] [--new-rate 0.01]
        [--poison-rate R] [--repeat K] [--smoke]

Issue 61, point 1. A pipeline lives for years: a batch job run on a schedule over a
Kafka-shaped Delta source that grows every day. Every arm is a fresh ``quarantine run``
process (a new JVM, as a Databricks job pays), timed from its start to its exit with the
peak memory of its process tree (PSS sum, RSS beside it;
:func:`benchmarks.bench_memory.watch`), with the ``process`` benchmark's config
(:func:`benchmarks.bench_process.quarantine_config`: the demo's decode -> json -> cast ->
checks stages, the metrics table on, MLflow off) and source (``init-demo``, 1 % poison,
:func:`benchmarks.bench_process.ensure_demo_source`). With ``new`` = 1 % of N
(``--new-rate``), the arms, side by side in one run:

* **alone** — a first run over the ``new`` records alone, into new tables: what one day's
  records cost. Its source holds exactly the records day 2 appends.
* **day1** — a first run over the N records into new tables (the setup of the next arms;
  timed, once per size).
* **day2** — the source gets the ``new`` records appended as one Delta commit (a plain
  append: the same topic and partitions, each partition's offsets continuing after its
  last, :func:`quarantine.demo.orders.orders_source` with ``first=N``); then one run into
  day 1's tables.
* **nothing_new** — a run again, right after day 2, the source unchanged.
* **stream_day1** / **stream_day2** — the same with ``source.streaming: true`` and
  ``trigger: available_now`` into tables of their own (and ``target.checkpoint``): day 1
  over the N records, then, after the append, the same stream restarted from the same
  checkpoint (timed: stream_day2).

The ratios reported are day2 / alone, nothing_new / alone and stream_day2 / alone (issue
61's goals: <= 1.3x at 4M, <= 1.5x at 16M; <= 0.5x; <= 1.3x), each with its peak memory.

Sources and state: the N-record source is the ``process`` benchmark's, written once per
size; the day-2 source (a copy of it with the ``new`` records appended as its version 1)
and the ``new`` records alone are written once per size beside it (``growth-sources``).
Day 1 runs over a copy of the N-record source; day 2's commit is then copied into that
copy (the commit's log entry and its data files: the table becomes the day-2 source, the
stream's checkpoint sees version 1 of the table it read). Day 1's tables (both the batch
and the stream's, with its checkpoint) are copied aside once after day 1 and copied back
before each repeat after the first, so every ``--repeat`` of day2, nothing_new and
stream_day2 starts from the day-1 state; ``alone`` gets new tables each repeat. Arms are
interleaved (alone, day2, nothing_new, stream_day2, then stream_day2, day2, nothing_new,
alone, ...).

Counts checked (from the Delta logs, no Spark): the stream's tables hold what the batch's
hold on each day; day 2's target and quarantine tables hold day 1's plus what ``alone``
wrote (the same new records), and nothing new changes nothing.

``--smoke``: every arm once (``--repeat`` ignored), on N = 2,000 (unless ``--records`` is
given), the first size only, the sources written in this process; every arm is still a
process of its own (six ``quarantine run`` processes, one after another).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import yaml

from benchmarks import Row, add_smoke, bench_dir, drop_dir, fresh_dir, markdown_table, median
from benchmarks.bench_memory import watch
from benchmarks.bench_process import Sample, child_env, delta_rows, ensure_demo_source, quarantine_config
from benchmarks.run import environment, write_results

__all__ = [
    "ARMS", "DEFAULT_RECORDS", "GOALS", "SMOKE_RECORDS", "ensure_growth_sources", "main", "new_records", "run",
    "run_quarantine",
]

_REPO = Path(__file__).resolve().parent.parent

#: Every arm, in the order the table shows them.
ARMS: tuple[str, ...] = ("alone", "day1", "day2", "nothing_new", "stream_day1", "stream_day2")
#: The arms run on each repeat (day 1's are the setup, run once per size), in the first round's order.
_REPEATED: tuple[str, ...] = ("alone", "day2", "nothing_new", "stream_day2")
#: The streaming arms (``source.streaming: true``, ``trigger: available_now``, a checkpoint).
_STREAMING = frozenset({"stream_day1", "stream_day2"})
#: Each arm / alone (issue 61's goals); day2's at 16M settled and beyond is :data:`GOAL_DAY2_LARGE`.
GOALS: dict[str, float] = {"day2": 1.3, "nothing_new": 0.5, "stream_day2": 1.3}
#: day2 / alone at :data:`LARGE` settled records or more.
GOAL_DAY2_LARGE = 1.5
LARGE = 16_000_000
DEFAULT_RECORDS = 4_000_000
SMOKE_RECORDS = 2_000

#: What each arm is, in the table.
_WHAT: dict[str, str] = {
    "alone": "first run over the new records alone (new tables)",
    "day1": "batch, day 1 (new tables)",
    "day2": "batch, day 2: day 1's tables, the new records appended",
    "nothing_new": "batch, day 2 again, nothing new",
    "stream_day1": "available-now stream, day 1 (new tables, new checkpoint)",
    "stream_day2": "the same stream restarted on day 2",
}

#: The first argument of this module's child that writes the growth sources (not a benchmark option).
_WRITE_SOURCES = "--write-sources"


class CountMismatchError(RuntimeError):
    """An arm's tables do not hold the rows the others' say they must."""


def new_records(records: int, new_rate: float) -> int:
    """How many records day 2 appends to a source of ``records``: ``new_rate`` of them, at least 1."""
    return max(1, round(records * new_rate))


def _write_sources(base: str, grown: Path, alone: Path, records: int, new: int, poison_rate: float) -> None:
    """``grown``: a copy of ``base`` with ``new`` records appended (one commit); ``alone``: those records alone.

    Written by this process's session (:func:`benchmarks.bench_spark`); the records are
    :func:`quarantine.demo.orders.orders_source`'s ``records`` … ``records + new - 1``th, with
    ``init-demo``'s seed, topic and partitions, so each partition's offsets continue.
    """
    from benchmarks import bench_spark
    from quarantine.demo.orders import orders_source

    spark = bench_spark("bench-growth")
    drop_dir(grown)
    drop_dir(alone)
    shutil.copytree(base, grown)
    added = orders_source(spark, new, poison_rate=poison_rate, first=records)
    added.write.format("delta").mode("append").save(str(grown))
    added.write.format("delta").mode("overwrite").save(str(alone))


def ensure_growth_sources(
    records: int, new: int, poison_rate: float, *, in_process: bool = False
) -> tuple[str, Path, str]:
    """The N-record source (the ``process`` benchmark's), the day-2 source and the new records alone.

    The last two are written once per ``(records, new, poison_rate)`` (a marker after them), by
    this process's session when ``in_process`` (``--smoke``), else by a child process (so this
    one starts no JVM beside the arms it measures).

    Returns:
        ``(day-1 source, day-2 source, the new records' source)``.
    """
    base = ensure_demo_source(records, poison_rate, in_process=in_process)
    name = f"demo-{records}-p{round(poison_rate * 1000):04d}-plus-{new}"
    out = bench_dir() / "growth-sources" / name
    marker = out.parent / f"{name}.ok"
    grown, alone = out / "day2-source", out / "new-alone"
    if not marker.exists():
        out.mkdir(parents=True, exist_ok=True)
        print(f"growth: writing the day-2 source ({records:,} + {new:,} records) and the {new:,} alone "
              + ("in this process" if in_process else "in a child process"), file=sys.stderr, flush=True)
        if in_process:
            _write_sources(base, grown, alone, records, new, poison_rate)
        else:
            subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_growth", _WRITE_SOURCES, base, str(grown), str(alone),
                 str(records), str(new), str(poison_rate)],
                check=True, cwd=_REPO, env=child_env(), stdout=subprocess.DEVNULL,
            )
        marker.write_text(f"{records} + {new}\n", encoding="utf-8")
    return base, grown, str(alone)


def _append_commit(grown: Path, source: Path) -> None:
    """Make the table at ``source`` (a copy of day 1's) the day-2 source: copy in the files ``grown`` adds
    (its version-1 commit, that commit's data files)."""
    for f in sorted(grown.rglob("*")):
        dest = source / f.relative_to(grown)
        if f.is_file() and not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)


def _config(arm: str, source: str, out: Path) -> dict[str, object]:
    config = quarantine_config(source, out)
    if arm in _STREAMING:
        # sections freshly loaded from the demo config's YAML for this call: set in place
        cast(dict[str, Any], config["source"])["streaming"] = True
        cast(dict[str, Any], config["target"])["checkpoint"] = str(out / "checkpoint")
        config["trigger"] = "available_now"
    return config


def run_quarantine(arm: str, source: str, out: Path) -> Sample:
    """One ``quarantine run`` process of ``arm`` over ``source`` into the tables under ``out`` (kept).

    Raises:
        RuntimeError: the process failed (its output's last lines in the message).
    """
    out.mkdir(parents=True, exist_ok=True)
    conf = out / f"{arm}.yml"
    conf.write_text(yaml.safe_dump(_config(arm, source, out), sort_keys=False), encoding="utf-8")
    cmd = [sys.executable, "-m", "quarantine", "run", "--conf", str(conf)]
    log = out / f"{arm}.log"
    with log.open("wb") as fh:
        start = time.perf_counter()
        mem = watch(subprocess.Popen(cmd, cwd=_REPO, env=child_env(), stdout=fh, stderr=subprocess.STDOUT), start)
    if mem.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"growth: {arm} exited {mem.returncode}: {' '.join(cmd)}\n{tail}")
    # no quarantine table: no record failed (a small ``alone`` may hold no poison)
    quarantined = delta_rows(out / "quarantine") if (out / "quarantine").is_dir() else 0
    return Sample(arm, mem, delta_rows(out / "target"), quarantined)


def _counts(s: Sample) -> tuple[int, int]:
    return s.target_rows, s.quarantined_rows or 0


def _check(day1: Sample, stream_day1: Sample, round_: dict[str, Sample]) -> None:
    """The counts one round must show (see the module's docstring).

    Raises:
        CountMismatchError: they do not.
    """
    alone, day2 = round_["alone"], round_["day2"]
    grown = tuple(a + b for a, b in zip(_counts(day1), _counts(alone), strict=True))
    want = {"stream_day1": _counts(day1), "day2": grown, "nothing_new": grown, "stream_day2": grown}
    got = {"stream_day1": _counts(stream_day1), **{a: _counts(round_[a]) for a in want if a != "stream_day1"}}
    wrong = {a: (got[a], want[a]) for a in want if got[a] != want[a]}
    if wrong:
        raise CountMismatchError(
            "growth: (target rows, quarantined rows) differ from what they must be, arm: (got, expected): "
            f"{wrong}; day1 {_counts(day1)}, alone {_counts(alone)}, day2 {_counts(day2)}"
        )


def _restore(snapshot: Path, work: Path) -> None:
    """Put day 1's tables (batch and stream, with its checkpoint) back from ``snapshot``."""
    for name in ("batch", "stream"):
        drop_dir(work / name)
        shutil.copytree(snapshot / name, work / name)


def _say(arm: str, k: int, repeat: int, s: Sample) -> None:
    print(f"  [{arm}] repeat {k + 1}/{repeat}: {s.memory.seconds:.1f}s, peak PSS {s.memory.peak_pss_mib:.0f} MiB, "
          f"target {s.target_rows:,} rows, quarantined {s.quarantined_rows or 0:,}", file=sys.stderr, flush=True)


def measure_size(records: int, new: int, poison_rate: float, repeat: int, *, smoke: bool = False) -> list[Sample]:
    """Day 1 once (batch and stream), then every repeated arm ``repeat`` times from the day-1 state."""
    base, grown, alone_source = ensure_growth_sources(records, new, poison_rate, in_process=smoke)
    work = fresh_dir(f"growth-{records}")
    try:
        source = work / "source"
        shutil.copytree(base, source)
        day1 = run_quarantine("day1", str(source), work / "batch")
        _say("day1", 0, 1, day1)
        stream_day1 = run_quarantine("stream_day1", str(source), work / "stream")
        _say("stream_day1", 0, 1, stream_day1)
        snapshot = work / "day1-tables"
        for name in ("batch", "stream"):
            shutil.copytree(work / name, snapshot / name)
        _append_commit(grown, source)
        samples = [day1, stream_day1]
        for k in range(repeat):
            if k:
                _restore(snapshot, work)
            order = _REPEATED if k % 2 == 0 else (_REPEATED[-1], *_REPEATED[1:-1], _REPEATED[0])
            round_: dict[str, Sample] = {}
            for arm in order:
                if arm == "alone":
                    out = work / f"alone-{k}"
                    s = run_quarantine(arm, alone_source, out)
                    drop_dir(out)
                else:
                    s = run_quarantine(arm, str(source), work / ("stream" if arm in _STREAMING else "batch"))
                _say(arm, k, repeat, s)
                round_[arm] = s
            _check(day1, stream_day1, round_)
            samples.extend(round_[a] for a in _REPEATED)
        return samples
    finally:
        drop_dir(work)


def _in_source(arm: str, records: int, new: int) -> int:
    return new if arm == "alone" else records if arm in ("day1", "stream_day1") else records + new


def _table(records: int, new: int, poison_rate: float, by_arm: dict[str, list[Sample]]) -> str:
    alone = median([s.memory.seconds for s in by_arm["alone"]])
    lines = [
        f"growth: {records:,} settled + {new:,} new records, {poison_rate:.1%} poison, fresh JVM each run, "
        f"median of {len(by_arm['day2'])} (day 1: one run)",
        "| arm | run | records in the source | runs | median s | min-max s | / alone | peak PSS MiB "
        "| peak RSS MiB | target rows | quarantined rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in ARMS:
        xs = by_arm[arm]
        secs = [s.memory.seconds for s in xs]
        lines.append(
            f"| {arm} | {_WHAT[arm]} | {_in_source(arm, records, new):,} | {len(xs)} | {median(secs):.1f} "
            f"| {min(secs):.1f}-{max(secs):.1f} | {median(secs) / alone:.2f}x "
            f"| {max(s.memory.peak_pss_mib for s in xs):.0f} | {max(s.memory.peak_rss_mib for s in xs):.0f} "
            f"| {xs[-1].target_rows:,} | {xs[-1].quarantined_rows or 0:,} |"
        )
    return "\n".join(lines)


def _rows(records: int, new: int, poison_rate: float, by_arm: dict[str, list[Sample]]) -> list[Row]:
    def secs(arm: str) -> list[float]:
        return [s.memory.seconds for s in by_arm[arm]]

    def pss(arm: str) -> list[float]:
        return [s.memory.peak_pss_mib for s in by_arm[arm]]

    alone = median(secs("alone"))
    size = f"{records:,} settled + {new:,} new, {poison_rate:.0%} poison, fresh JVM each run"
    cases = {
        "day2": f"batch day 2 vs a first run over the {new:,} new alone",
        "nothing_new": f"batch re-run, nothing new, vs a first run over the {new:,} new alone",
        "stream_day2": f"available-now stream restarted on day 2 vs a first run over the {new:,} new alone",
    }
    rows = []
    for arm, what in cases.items():
        goal = GOAL_DAY2_LARGE if arm == "day2" and records >= LARGE else GOALS[arm]
        subject = median(secs(arm))
        rows.append(Row(
            "growth", f"{size}: {what}", alone, subject, subject / alone, f"<= {goal:.2f}x", subject / alone <= goal,
            samples={"alone": secs("alone"), arm: secs(arm),
                     **({"day1": secs("day1")} if arm == "day2" else {}),
                     **({"stream_day1": secs("stream_day1")} if arm == "stream_day2" else {})},
        ))
    base_mib, day2_mib = max(pss("alone")), max(pss("day2"))
    rows.append(Row(
        "growth", f"{size}: peak driver PSS (python+JVM), batch day 2 vs the new alone",
        base_mib, day2_mib, day2_mib / base_mib, "reported", True, unit="MiB",
        samples={
            **{f"peak_pss_mib:{a}": pss(a) for a in ARMS},
            **{f"peak_rss_mib:{a}": [s.memory.peak_rss_mib for s in by_arm[a]] for a in ARMS},
            **{f"seconds:{a}": secs(a) for a in ARMS},
            **{f"target_rows:{a}": [float(by_arm[a][-1].target_rows)] for a in ARMS},
        },
    ))
    return rows


def run(records: int = DEFAULT_RECORDS, repeat: int = 3, *, new_rate: float = 0.01, poison_rate: float = 0.01,
        sizes: Sequence[int] = (), smoke: bool = False) -> list[Row]:
    """Measure every arm at each size (``sizes``, else ``records``); return the result rows.

    ``smoke``: the first size only, its sources written in this process, every arm once.

    Raises:
        CountMismatchError: an arm's tables hold other counts than they must.
        RuntimeError: an arm's process failed.
    """
    rows: list[Row] = []
    repeat = 1 if smoke else repeat
    for n in (sizes or (records,))[: 1 if smoke else None]:
        new = new_records(n, new_rate)
        print(f"growth: {n:,} records + {new:,} new, {poison_rate:.1%} poison, {repeat} repeats of day 2",
              file=sys.stderr)
        samples = measure_size(n, new, poison_rate, repeat, smoke=smoke)
        by_arm = {a: [s for s in samples if s.arm == a] for a in ARMS}
        print(_table(n, new, poison_rate, by_arm), flush=True)
        rows.extend(_rows(n, new, poison_rate, by_arm))
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run, print the tables and return the rows (``argv`` None: the defaults, as ``benchmarks.run`` calls it)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=None,
                    help=f"settled records N (default {DEFAULT_RECORDS:,}; --smoke: {SMOKE_RECORDS:,})")
    ap.add_argument("--sizes", default="", help="comma-separated N, each measured (instead of --records)")
    ap.add_argument("--new-rate", type=float, default=0.01, help="day 2's new records, a fraction of N (default 0.01)")
    ap.add_argument("--poison-rate", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of alone, day2, nothing_new and stream_day2 each, median reported "
                         "(day 1: once; --smoke: 1)")
    add_smoke(ap)
    args = ap.parse_args([] if argv is None else list(argv))
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    records = args.records if args.records is not None else SMOKE_RECORDS if args.smoke else DEFAULT_RECORDS
    try:
        rows = run(records, max(args.repeat, 1), new_rate=args.new_rate, poison_rate=args.poison_rate, sizes=sizes,
                   smoke=args.smoke)
    except CountMismatchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        raise
    print(markdown_table(rows), flush=True)
    return rows


def _child(argv: Sequence[str]) -> None:
    """``python -m benchmarks.bench_growth --write-sources BASE GROWN ALONE N NEW POISON_RATE``:
    :func:`_write_sources` (this module's child, :func:`ensure_growth_sources`)."""
    base, grown, alone, records, new, poison_rate = argv
    _write_sources(base, Path(grown), Path(alone), int(records), int(new), float(poison_rate))


if __name__ == "__main__":
    if sys.argv[1:2] == [_WRITE_SOURCES]:
        _child(sys.argv[2:])
    else:
        started = environment()
        done = main(sys.argv[1:])
        print(f"\nresults: {write_results(done, {'only': ['growth'], 'argv': sys.argv[1:]}, {}, started)}")
