"""PySpark's DataFrame debugging on and off: what building a batch's plan costs in each.

    .venv/bin/python -m benchmarks.bench_debugging [--records 1000000] [--poison-rate 0.0] [--repeats 4] [--smoke]

PySpark 4 sends the Python call site of every Column call to the JVM while
``spark.python.sql.dataFrameDebugging.enabled`` is true (Spark's default): about eight
Py4J round trips a call instead of one. Local sessions from ``get_spark()`` turn it
off (``quarantine.spark.session.LOCAL_DEFAULTS``); this module measures both ways in one
process. PySpark reads the setting once per process, so each arm sets PySpark's cached
answer (``pyspark.errors.utils._enable_debugging_cache``) for its run: a benchmark's
switch, not something the library does.

Two parts, medians reported:

* **batch** — over the pipeline benchmark's source and stages
  (:mod:`benchmarks.bench_pipeline`), interleaved: the plain arm, a batch run
  (``listeners=[]``) with debugging off (the library's way), and with it on;
* **micro-batch columns** — the Python side of one Kafka micro-batch that
  :meth:`Run.process_batch <quarantine.batch.run.Run.process_batch>` builds per batch (its
  observed counts, the quarantine rows with their redaction, the target rows), over a
  staged frame of the streaming benchmark's stages, built 20 times each way; no job runs.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from statistics import median

import pyspark.errors.utils as pyspark_errors
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.bench_pipeline import _interleaved, run_plain, run_quarantine, standalone_setup, warm_up
from quarantine.batch.writes import Batch, BatchMode
from quarantine.columns import ERROR
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline

__all__ = ["main", "micro_batch_columns"]


def _set_debugging(on: bool) -> None:
    """PySpark's cached answer to "is DataFrame debugging on" (read once per process)."""
    pyspark_errors._enable_debugging_cache = on  # type: ignore[assignment]  # typed None until first read


def _debugging(on: bool, run: Callable[[Path], None], out: Path) -> None:
    _set_debugging(on)
    try:
        run(out)
    finally:
        _set_debugging(False)


def micro_batch_columns(spark: SparkSession, *, on: bool, times: int = 20) -> float:
    """Seconds to build one micro-batch's per-batch columns, the median of ``times``, debugging ``on`` or off."""
    from tests.support.kafka import kafka_pipeline_conf

    raw = kafka_pipeline_conf("localhost:9092", "/tmp/bench-debugging", topics=["orders"], pipeline="bench")
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])
    source = spark.createDataFrame([], "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                                   "timestamp TIMESTAMP, timestampType INT, "
                                   "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    split = pipe.split_frame(source)
    run = pipe.start_run()
    writer = pipe.quarantine_writer()
    samples = []
    _set_debugging(on)
    try:
        for i in range(times + 2):
            t0 = time.perf_counter()
            batch = Batch(split=split, chain=pipe.chain(split), batch_id=i, now=dt.datetime.now(dt.UTC),
                          mode=BatchMode.micro_batch(), append=True)
            run._writer._observed(batch)
            failed = split.where(F.col(ERROR).isNotNull())
            writer.rows(failed, run_id=run.run_id, batch_id=i, now=batch.now)
            pipe.target_rows(split)
            if i >= 2:
                samples.append(time.perf_counter() - t0)
    finally:
        _set_debugging(False)
    return median(samples)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run both parts; print and return each arm's median seconds."""
    args, spark, specs, stages, source = standalone_setup(
        __doc__, argv, app="bench-debugging", poison_rate=0.0, repeats=4
    )
    arms: dict[str, Callable[[Path], None]] = {
        "plain": partial(run_plain, spark, source, specs),
        "quarantine (debugging off)": partial(_debugging, False, partial(run_quarantine, spark, source, stages,
                                                                         default=False)),
        "quarantine (debugging on)": partial(_debugging, True, partial(run_quarantine, spark, source, stages,
                                                                       default=False)),
    }
    if not args.smoke:
        warm_up(spark, specs, stages)
    samples = _interleaved(arms, args.repeats)
    medians = {a: median(v) for a, v in samples.items()}
    if not args.smoke:
        for on in (False, True):
            micro_batch_columns(spark, on=on, times=3)  # warm: the JVM's classes and the session's
    for on in (False, True):
        medians[f"micro-batch columns (debugging {'on' if on else 'off'})"] = micro_batch_columns(
            spark, on=on, times=1 if args.smoke else 20
        )
    spark.stop()
    print(f"\nPySpark DataFrame debugging: {args.records:,} records, {args.poison_rate:.0%} poison, "
          f"median of {args.repeats}")
    print("| arm | median s | / plain | samples |\n|---|---:|---:|---|")
    for a, v in samples.items():
        print(f"| {a} | {medians[a]:.2f} | {medians[a] / medians['plain']:.2f}x | {', '.join(f'{x:.2f}' for x in v)} |")
    for a, m in medians.items():
        if a.startswith("micro-batch"):
            print(f"| {a} | {m:.3f} | | |")
    return medians


if __name__ == "__main__":
    main()
