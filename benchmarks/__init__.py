"""Benchmarks: throughput, overhead against plain PySpark and dqx, driver memory.

Run them all with ``python -m benchmarks.run`` (see ``benchmarks/README.md``).
This package module holds what every benchmark shares and nothing else:

* :func:`bench_dir` — where sources and output tables go (``$BENCH_DIR`` or
  ``/tmp/quarantine-bench``), never inside the repo;
* :func:`bench_spark` — the local session every benchmark uses (UI off, local[2]);
* :func:`ensure_source` — the demo generator's Kafka-shaped source, written once
  to Delta per ``(records, poison_rate)`` and reused across runs;
* :class:`Measurement` / :func:`median` / :func:`timed` — wall-clock timing;
* :class:`Row` / :func:`markdown_table` — the one result row and its rendering;
* :func:`standard_main` — the command line most benchmarks take, and :func:`add_smoke`,
  every benchmark's ``--smoke`` (every arm once on the smallest inputs, no warm-up, JVMs
  compiling with C1 only with the serial GC, Spark expressions interpreted: the suite's check
  that the benchmarks run; it measures nothing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

__all__ = [
    "SMOKE_ENV",
    "SMOKE_HELP",
    "SMOKE_JVM_OPTIONS",
    "SMOKE_SPARK_CONF",
    "Row",
    "add_smoke",
    "bench_dir",
    "bench_spark",
    "drop_dir",
    "ensure_source",
    "fresh_dir",
    "markdown_table",
    "median",
    "smoke_jvms",
    "standard_main",
    "timed",
]

#: The Spark settings every benchmark runs with (on top of quarantine's local defaults).
BENCH_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}

#: Generator seed: every benchmark reads the same records.
SEED = 7


def bench_dir() -> Path:
    """The benchmark working directory (``$BENCH_DIR`` or ``/tmp/quarantine-bench``), created."""
    d = Path(os.environ.get("BENCH_DIR", "/tmp/quarantine-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def fresh_dir(label: str) -> Path:
    """A new, empty directory under :func:`bench_dir` for one repeat's output tables."""
    d = bench_dir() / "out" / f"{label}-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    return d


def drop_dir(d: Path) -> None:
    """Delete a repeat's output directory (ignore it if already gone)."""
    shutil.rmtree(d, ignore_errors=True)


def bench_spark(app: str = "quarantine-bench", conf: dict[str, str] | None = None) -> SparkSession:
    """The local Delta session for benchmarks (``local[2]``, Spark UI off)."""
    from quarantine.spark.session import get_spark

    return get_spark(app, {**BENCH_CONF, **(conf or {})})


def ensure_source(spark: SparkSession, records: int, poison_rate: float) -> str:
    """Path of a Delta table of :func:`quarantine.demo.orders.orders_source` records.

    Written once per ``(records, poison_rate)`` and reused: a marker file is
    written after the Delta commit, so a half-written table is rewritten.
    """
    from quarantine.demo.orders import orders_source

    name = f"source-{records}-p{round(poison_rate * 1000):04d}"
    path = bench_dir() / "sources" / name
    marker = path.parent / f"{name}.ok"
    if not marker.exists():
        drop_dir(path)
        slices = max(4, records // 250_000)
        (
            orders_source(spark, records, poison_rate=poison_rate, seed=SEED, slices=slices)
            .write.format("delta").mode("overwrite").save(str(path))
        )
        marker.write_text(f"{records}\n", encoding="utf-8")
    return str(path)


def timed(fn: Callable[[], Any]) -> float:
    """Run ``fn`` once and return its wall-clock time in seconds."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(xs: Sequence[float]) -> float:
    """The median of a non-empty sequence."""
    return float(statistics.median(xs))


@dataclass(frozen=True)
class Row:
    """One measured comparison: ``subject`` against ``baseline``.

    Attributes:
        bench: the benchmark's name (``pipeline``, ``dqx``, ``memory`` …).
        case: what was measured (``0% poison, listeners=[]`` …).
        baseline_s: median seconds of the baseline (or the first value compared).
        subject_s: median seconds of the subject (or the second value compared).
        ratio: ``subject / baseline`` (for memory: 5M peak / 1M peak).
        goal: the goal as text (``<= 1.15x``).
        met: whether the goal was met.
        unit: the unit of ``baseline_s`` / ``subject_s`` (``s`` or ``MiB``).
        samples: every sample, for the JSON results file.
    """

    bench: str
    case: str
    baseline_s: float
    subject_s: float
    ratio: float
    goal: str
    met: bool
    unit: str = "s"
    samples: dict[str, list[float]] = field(default_factory=dict)


def markdown_table(rows: Sequence[Row]) -> str:
    """Render result rows as a markdown table."""
    head = "| bench | case | baseline | subject | ratio | goal | met |\n|---|---|---:|---:|---:|---|---|"
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r.bench} | {r.case} | {r.baseline_s:.2f} {r.unit} | {r.subject_s:.2f} {r.unit} "
            f"| {r.ratio:.2f}x | {r.goal} | {'yes' if r.met else 'NO'} |"
        )
    return "\n".join(lines)


#: ``--smoke``'s help, the same in every benchmark (``benchmarks.run --smoke`` passes it to each).
SMOKE_HELP = (
    "run every arm once on the smallest inputs, without warm-ups or a second case of the same "
    "arms, every JVM compiling with C1 only and collecting with the serial GC, every Spark "
    "session evaluating expressions interpreted: proves the benchmark runs, measures nothing "
    "(the suite's test of each benchmark)"
)
#: The JVM options ``--smoke`` gives every JVM it starts, its own and its child processes'
#: (``JAVA_TOOL_OPTIONS``), for JVMs that start, run a few small queries and exit:
#:
#: * ``-XX:TieredStopAtLevel=1``: C2's compiles pay off over long loops, which a smoke run's
#:   processes never reach. ``benchmarks.run --only process --smoke``: 134-146 CPU s with
#:   C2, 75-82 with C1 only (2026-11-28, load 3-14).
#: * ``-XX:+UseSerialGC``: G1 (the default on 2 cores) sets up its regions and runs its
#:   concurrent threads for heaps a smoke run barely uses. ``quarantine stats`` on the
#:   2,000-record demo, as ``bench_commands`` starts it: 18-22 CPU s with G1, 15-19 serial
#:   (2026-11-28, two each, load 8-11). The test Kafka broker runs with both (tests/support/kafka.py).
SMOKE_JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: The Spark settings ``--smoke`` gives every local Spark session started after it, its own
#: and its child processes' (``PYSPARK_SUBMIT_ARGS``, which PySpark's ``spark-submit`` reads):
#: expressions evaluated interpreted, as the test suite's sessions are (tests/conftest.py,
#: ``INTERPRETED``). A smoke run's queries are new and run once over a few thousand records,
#: so generating and compiling their code (Janino, then the JIT) is CPU the check does not
#: need: the four process-starting smoke tests, 581 -> 534 CPU s (2026-11-28, load 1-12).
#: A setting a session is given (the builder's, a config's ``spark.conf``) still wins.
SMOKE_SPARK_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: The environment variables ``--smoke`` sets (:func:`smoke_jvms`): a caller that runs a
#: benchmark in its own process puts them back after.
SMOKE_ENV: tuple[str, ...] = ("JAVA_TOOL_OPTIONS", "PYSPARK_SUBMIT_ARGS")


def smoke_jvms() -> None:
    """Every JVM started from now on, in this process and its children, gets :data:`SMOKE_JVM_OPTIONS`,
    and every local Spark session it starts evaluates expressions interpreted (:data:`SMOKE_SPARK_CONF`)."""
    given = os.environ.get("JAVA_TOOL_OPTIONS", "")
    missing = [o for o in SMOKE_JVM_OPTIONS if o not in given.split()]
    if missing:
        os.environ["JAVA_TOOL_OPTIONS"] = " ".join([given, *missing]).strip()
    # PySpark's default is "pyspark-shell" (the last word: what spark-submit runs)
    submit = os.environ.get("PYSPARK_SUBMIT_ARGS", "").strip() or "pyspark-shell"
    missing = [f"--conf {k}={v}" for k, v in SMOKE_SPARK_CONF.items() if f"{k}=" not in submit]
    if missing:
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join([*missing, submit])


class _Smoke(argparse.Action):
    """``--smoke``: ``smoke`` True, and :func:`smoke_jvms` at once (before any JVM of this run starts)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        smoke_jvms()


def add_smoke(ap: argparse.ArgumentParser, help: str = SMOKE_HELP) -> None:
    """Give a benchmark's parser ``--smoke`` (``args.smoke``; see :data:`SMOKE_HELP`)."""
    ap.add_argument("--smoke", action=_Smoke, help=help)


def standard_main(
    doc: str | None, run: Callable[..., list[Row]], argv: Sequence[str] | None
) -> list[Row]:
    """A benchmark's ``main``: ``--records N --repeat K [--smoke]``, run, print the table (``argv`` None: defaults).

    ``run`` is called as ``run(records, repeat, smoke=...)``.
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    add_smoke(ap)
    args = ap.parse_args([] if argv is None else list(argv))
    rows = run(args.records, args.repeat, smoke=args.smoke)
    print(markdown_table(rows), flush=True)
    return rows
