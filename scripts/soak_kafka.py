"""Soak test: SIGKILL the streaming pipeline many times over a real broker; check exactly-once.

    .venv/bin/python scripts/soak_kafka.py --kills 20 [--records 300000] [--seed 1]

Starts its own broker (loopback, temp dir), produces order events (1% poison)
to 2 topics x 2 partitions, runs ``quarantine run`` with a processing-time
trigger and kills it (SIGKILL to the whole driver, Python + JVM) at random
points while a micro-batch is in flight, ``--kills`` times, restarting each
time; then drains with an available-now run and prints the ledger: records,
kills, duplicates, lost, byte mismatches, wall time. Exit 0 only when exactly once.
Not part of CI (it takes tens of minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from quarantine.session import get_spark
from quarantine.testing import (
    KafkaBroker,
    create_topics,
    kafka_pipeline_conf,
    ledger,
    order_records,
    produce,
)
from quarantine.testing.crash import run_to_completion, run_with_kills, write_conf

SPARK_CONF = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--max-offsets", type=int, default=10_000, help="max.offsets.per.trigger")
    ap.add_argument("--max-delay", type=float, default=5.0, help="kill within this many s of a batch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=None, help="keep tables/logs here (default: a temp dir)")
    args = ap.parse_args(argv)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="quarantine-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    broker = KafkaBroker(work / "kafka")
    broker.start()
    try:
        topics = ["soak-orders", "soak-payments"]
        create_topics(broker.bootstrap, dict.fromkeys(topics, 2))
        produced = produce(broker.bootstrap, order_records(topics, 2, args.records, seed=args.seed))
        stream = kafka_pipeline_conf(
            broker.bootstrap, work, topics=topics, pipeline="orders_soak",
            processing_time="1 second", max_offsets_per_trigger=args.max_offsets,
            spark_conf=SPARK_CONF,
        )
        stream_yml = write_conf(stream, work / "stream.yml")
        final_yml = write_conf({**stream, "trigger": "available_now"}, work / "final.yml")
        log = work / "pipeline.log"
        crashes = run_with_kills(
            stream_yml, work / "checkpoint", kills=args.kills, log=log,
            rng=random.Random(args.seed), max_delay_s=args.max_delay, stall_timeout_s=300,
        )
        final_s = run_to_completion(final_yml, log, timeout_s=1800)
        spark = get_spark("quarantine-soak-check", SPARK_CONF)
        book = ledger(spark, produced, target=str(work / "target"),
                      quarantine=str(work / "quarantine"), pipeline="orders_soak")
        spark.stop()
    finally:
        broker.stop()
    figures = {
        "records": book.produced,
        "poison_in_quarantine": book.in_quarantine,
        "in_target": book.in_target,
        "kills": crashes.kills,
        "kill_points(batch,delay_s)": crashes.kill_points,
        "duplicates": len(book.duplicates),
        "lost": len(book.lost),
        "unexpected": len(book.unexpected),
        "bytes_mismatch": len(book.bytes_mismatch),
        "kill_phase_s": round(crashes.wall_s, 1),
        "final_run_s": round(final_s, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "workdir": str(work),
    }
    print(json.dumps(figures, indent=2))
    return 0 if book.exactly_once else 1


if __name__ == "__main__":
    sys.exit(main())
