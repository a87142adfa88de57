"""Streaming overhead: the quarantine runner vs a plain streaming query, same broker, same data.

    .venv/bin/python -m benchmarks.bench_streaming [--records 200000] [--repeat 2] [--smoke]

A real local broker (:class:`tests.support.KafkaBroker`) gets order events
(1% poison) on 2 topics x 2 partitions, produced once. Both arms read them with
``readStream.format("kafka")`` from the earliest offsets, an available-now
trigger and the same ``maxOffsetsPerTrigger``, into fresh tables:

* **plain** — ``from_json`` of the value cast to string, no error capture; rows
  missing a required field are dropped; one Delta append per micro-batch
  (``writeStream.format("delta")``) of only the target;
* **quarantine** — :func:`quarantine.runners.streaming.run_stream` with the
  ``decode_utf8`` + ``json`` stages: result-or-error columns, one persisted
  read, the quarantine MERGE, the txn target append, observed counts;
* **serial** (reported, no goal) — the quarantine arm with every micro-batch
  written while counted, the way before 2026-11-26: the target append, then the
  quarantine write from its cache. Today a micro-batch after one with failed
  records is counted first and makes both commits at once (:mod:`quarantine.batch.run`);
  this arm keeps that lever's effect measurable side by side.
* **scattered** (reported, no goal) — the quarantine arm with each micro-batch's
  failed records written as they lie, one file per partition of the batch (four
  here), the way before stop 28. Today the writer writes them from one partition
  per ``ROWS_PER_FILE`` failed records (:mod:`quarantine.sinks.quarantine`): one
  file per micro-batch here.

Reported: wall time per arm (median of repeats, arms interleaved) and their
ratio, and per-micro-batch latency (``triggerExecution`` from the query's
progress, p50/p95) at the fixed batch size.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from benchmarks import Row
from quarantine.batch.run import Run
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.streaming import run_stream
from quarantine.sinks.quarantine import QuarantineWriter
from tests.support import (
    KafkaBroker,
    create_topics,
    kafka_pipeline_conf,
    order_records,
    produce,
)
from tests.support.kafka import ORDER_SCHEMA_DDL

__all__ = ["main", "run_plain", "run_quarantine", "run_scattered", "run_serial"]

TOPICS = ("bench-orders", "bench-payments")
GOAL = 1.2
#: issue 11: p50 micro-batch latency at most the plain query's plus this
P50_SLACK_MS = 500.0


def _batch_ms(progress: Sequence[Any]) -> list[float]:
    return [
        float(p["durationMs"]["triggerExecution"])
        for p in progress
        if p.get("numInputRows", 0) > 0 and "triggerExecution" in p.get("durationMs", {})
    ]


def run_plain(spark: SparkSession, bootstrap: str, out: Path, max_offsets: int) -> tuple[float, list[float]]:
    """The plain arm: parse without error capture, write only the target. Returns (s, batch ms)."""
    schema = StructType.fromDDL(ORDER_SCHEMA_DDL)
    assert isinstance(schema, StructType)
    src = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(TOPICS))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .load()
    )
    parsed = src.select(
        F.from_json(F.col("value").cast("string"), schema).alias("o"),
        "topic", "partition", "offset", "timestamp",
    ).where(F.col("o.order_id").isNotNull() & F.col("o.amount").isNotNull() & F.col("o.currency").isNotNull())
    rows = parsed.select(
        "o.*", F.col("topic").alias("_source_topic"), F.col("partition").alias("_source_partition"),
        F.col("offset").alias("_source_offset"), F.col("timestamp").alias("_source_timestamp"),
    )
    t0 = time.perf_counter()
    q = (
        rows.writeStream.format("delta")
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "target"))
    )
    q.awaitTermination()
    elapsed = time.perf_counter() - t0
    return elapsed, _batch_ms(q.recentProgress)


def run_quarantine(
    spark: SparkSession, bootstrap: str, out: Path, max_offsets: int
) -> tuple[float, list[float]]:
    """The framework arm: run_stream with decode + json stages. Returns (s, batch ms)."""
    raw = kafka_pipeline_conf(
        bootstrap, out, topics=TOPICS, pipeline="bench_streaming", max_offsets_per_trigger=max_offsets
    )
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])
    queries: list[Any] = []
    t0 = time.perf_counter()
    run_stream(pipe, on_started=queries.append)
    elapsed = time.perf_counter() - t0
    return elapsed, [ms for q in queries for ms in _batch_ms(q.recentProgress)]


def run_serial(spark: SparkSession, bootstrap: str, out: Path, max_offsets: int) -> tuple[float, list[float]]:
    """The quarantine arm with every micro-batch written while counted (the way before 2026-11-26).

    A run that forgets its last batch had failed records writes the next one while
    counting it (:meth:`quarantine.batch.run.Run.process_batch`), as every batch was written then.
    """
    real = Run.process_batch

    def forgetful(self: Run, *args: Any, **kwargs: Any) -> Any:
        if self._last_failed:
            self._last_failed = None
        return real(self, *args, **kwargs)

    Run.process_batch = forgetful  # type: ignore[method-assign]
    try:
        return run_quarantine(spark, bootstrap, out, max_offsets)
    finally:
        Run.process_batch = real  # type: ignore[method-assign]


def run_scattered(spark: SparkSession, bootstrap: str, out: Path, max_offsets: int) -> tuple[float, list[float]]:
    """The quarantine arm with failed records written one file per partition (the way before stop 28)."""
    real = QuarantineWriter.write

    def as_they_lie(self: QuarantineWriter, failed: Any, **kwargs: Any) -> Any:
        return real(self, failed, **{**kwargs, "records": None})

    QuarantineWriter.write = as_they_lie  # type: ignore[method-assign]
    try:
        return run_quarantine(spark, bootstrap, out, max_offsets)
    finally:
        QuarantineWriter.write = real  # type: ignore[method-assign]


def _pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run, print the table and return the result rows (``argv`` None: the command line)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--poison-rate", type=float, default=0.01)
    ap.add_argument("--max-offsets", type=int, default=20_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--repeat", "--repeats", dest="repeats", type=int, default=2)

    from benchmarks import add_smoke, bench_spark

    add_smoke(ap)
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="quarantine-bench-stream-"))
    broker = KafkaBroker(work / "kafka")
    broker.start()
    try:
        create_topics(broker.bootstrap, dict.fromkeys(TOPICS, 2))
        produce(broker.bootstrap, order_records(
            list(TOPICS), 2, args.records, poison_rate=args.poison_rate, seed=7))
        # a session this run did not start (``benchmarks.run``'s earlier benchmark's, a test's) is left running
        owned = SparkSession.getActiveSession() is None
        spark = bench_spark("quarantine-bench-streaming")
        arms = {"plain": run_plain, "quarantine": run_quarantine, "serial": run_serial, "scattered": run_scattered}
        secs: dict[str, list[float]] = {k: [] for k in arms}
        batch_ms: dict[str, list[float]] = {k: [] for k in arms}
        # one warm-up of each (JIT, Delta, Kafka consumer pools; not with --smoke), then interleaved repeats
        order = list(arms)
        for i in range(1 if args.smoke else 0, args.repeats + 1):
            for name in order if i % 2 == 0 else order[::-1]:
                out = work / f"{name}-{i}"
                s, ms = arms[name](spark, broker.bootstrap, out, args.max_offsets)
                shutil.rmtree(out, ignore_errors=True)
                if i > 0:
                    secs[name].append(s)
                    batch_ms[name].extend(ms)
        if owned:
            spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    plain, quar = statistics.median(secs["plain"]), statistics.median(secs["quarantine"])
    ratio = quar / plain
    print(f"\nstreaming: {args.records:,} records, {args.poison_rate:.0%} poison, "
          f"2 topics x 2 partitions, maxOffsetsPerTrigger={args.max_offsets:,}, "
          f"available-now, median of {args.repeats}")
    print("| arm | wall s | records/s | batch p50 ms | batch p95 ms | batches |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in arms:
        med, ms = statistics.median(secs[name]), batch_ms[name]
        print(f"| {name} | {med:.1f} | {args.records / med:,.0f} | {_pct(ms, 0.5):,.0f} | "
              f"{_pct(ms, 0.95):,.0f} | {len(ms) // max(1, args.repeats)} |")
    print(f"\nratio quarantine/plain = {ratio:.2f}x (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})")
    case = (f"{args.records:,} rec from Kafka, {args.poison_rate:.0%} poison, 2 topics x 2 partitions, "
            f"maxOffsetsPerTrigger={args.max_offsets:,}")
    p50 = {k: _pct(batch_ms[k], 0.5) for k in batch_ms}
    earlier = {
        "serial": "every micro-batch written while counted (serial)",
        "scattered": "failed records one file per partition (scattered)",
    }
    reported = [
        row
        for arm, how in earlier.items()
        for row in (
            Row("streaming", case + f": wall time, {how} / today's way", statistics.median(secs[arm]), quar,
                quar / statistics.median(secs[arm]), "reported", True),
            Row("streaming", case + f": micro-batch latency p50, {arm} / today's way", p50[arm], p50["quarantine"],
                p50["quarantine"] / p50[arm], "reported", True, unit="ms"),
        )
    ]
    return [
        Row("streaming", case + ": wall time", plain, quar, ratio, f"<= {GOAL}x", ratio <= GOAL,
            samples={k: list(v) for k, v in secs.items()}),
        Row("streaming", case + ": micro-batch latency p50", p50["plain"], p50["quarantine"],
            p50["quarantine"] / p50["plain"], f"<= plain + {P50_SLACK_MS:.0f} ms",
            p50["quarantine"] <= p50["plain"] + P50_SLACK_MS, unit="ms",
            samples={k: list(v) for k, v in batch_ms.items()}),
        *reported,
    ]


if __name__ == "__main__":
    main()
