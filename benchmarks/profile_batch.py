"""Where a batch run's time goes besides Spark's work on the rows: the driver's share.

    .venv/bin/python -m benchmarks.profile_batch [--records 1000000] [--poison-rate 0.0] [--repeats 3]

Over the pipeline benchmark's source and stages (:mod:`benchmarks.bench_pipeline`), each
repeat with a fresh pipeline, in one warm JVM, medians reported:

* **build** — :meth:`Pipeline.prepare` and :meth:`Pipeline.split_frame`: the narrow
  job that checks the source's coordinates (:func:`quarantine.identity.unique_coordinates`),
  the Python side building the stages' Column expressions, one Py4J round trip per call
  into the JVM (``py4j calls`` counts them, with Py4J's releases of collected objects,
  so the count varies a little from repeat to repeat), plus Spark's eager analysis of
  each DataFrame step;
* **optimize** — Catalyst's optimizer over that plan;
* **prepare** — the physical plan made ready to run (``toRdd``). With adaptive
  execution this *runs* the plan's shuffles: for a Delta source with duplicate or
  unkeyed records, the ``identify`` shuffle of :mod:`quarantine.identity` (the
  benchmark's source has none since stop 30: nothing is shuffled);
* **staged noop** and **plain noop** — the whole staged batch and the plain arm's
  expressions, each written to Spark's ``noop`` sink (rows computed, nothing stored);
* **plain append** and **run** — the plain arm's Delta append and a whole batch run
  (``listeners=[]``), the two arms ``bench_pipeline`` compares.

Not part of ``benchmarks.run``: it explains a ratio, it has no goal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from statistics import median
from typing import Any

from benchmarks import drop_dir, fresh_dir
from benchmarks.bench_pipeline import demo_config, plain_target, run_plain, run_quarantine, standalone_setup, warm_up
from quarantine.batch.settle import prepare
from quarantine.pipeline import Pipeline

__all__ = ["main"]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def _py4j_calls(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the Py4J commands it sent to the JVM."""
    from py4j.clientserver import ClientServerConnection

    real = ClientServerConnection.send_command
    sent = 0

    def counting(self: ClientServerConnection, command: str) -> Any:
        nonlocal sent
        sent += 1
        return real(self, command)

    ClientServerConnection.send_command = counting  # type: ignore[method-assign]
    try:
        return fn(), sent
    finally:
        ClientServerConnection.send_command = real  # type: ignore[method-assign]


def _repeat(spark: Any, source: str, specs: Any, stages: Any) -> dict[str, float]:
    """One repeat: a fresh pipeline, each phase timed (see the module docstring)."""
    out = fresh_dir("profile")
    try:
        pipe = Pipeline.from_config(demo_config(source, out), spark, listeners=[], stages=stages)
        df = spark.read.format("delta").load(source)
        (split, calls), build = _timed(lambda: _py4j_calls(lambda: pipe.split_frame(prepare(pipe, df))))
        jqe = split._jdf.queryExecution()
        return {
            "build": build,
            "py4j calls": float(calls),
            "optimize": _timed(jqe.optimizedPlan)[1],
            "prepare": _timed(jqe.toRdd)[1],
            "staged noop": _timed(lambda: split.write.format("noop").mode("overwrite").save())[1],
            "plain noop": _timed(lambda: plain_target(df, specs).write.format("noop").mode("overwrite").save())[1],
            "plain append": _timed(lambda: run_plain(spark, source, specs, out / "plain"))[1],
            "run": _timed(lambda: run_quarantine(spark, source, stages, out / "run", default=False))[1],
        }
    finally:
        drop_dir(out)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the repeats; print and return each phase's median (seconds; ``py4j calls`` a count)."""
    args, spark, specs, stages, source = standalone_setup(
        __doc__, argv, app="profile-batch", poison_rate=0.0, repeats=3
    )
    if not args.smoke:
        warm_up(spark, specs, stages)

    phases: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        seen = _repeat(spark, source, specs, stages)
        print("  " + ", ".join(f"{k} {v:,.2f}" for k, v in seen.items()), flush=True)
        for k, v in seen.items():
            phases.setdefault(k, []).append(v)
    result = {k: median(v) for k, v in phases.items()}
    print(f"\nbatch run, {args.records:,} records, {args.poison_rate:.0%} poison, medians of {args.repeats}")
    print("| phase | median |\n|---|---:|")
    for k, v in result.items():
        print(f"| {k} | {v:,.0f} |" if k == "py4j calls" else f"| {k} | {v:.2f} s |")
    return result


if __name__ == "__main__":
    main()
