"""The quarantine a careful engineer writes by hand: good rows to one Delta table, bad rows to another.

    python -m benchmarks.handwritten.split_job --source PATH --target PATH --quarantine PATH

Reads the Kafka-shaped Delta source, decodes and parses each record once
(:mod:`benchmarks.handwritten.rules`), caches the checked rows, appends the good ones
(the order's fields and the coordinates) to ``--target`` and the bad ones (raw key,
value and headers, topic/partition/offset/timestamp and a reason) to ``--quarantine``.
The session is built as ``quarantine run`` builds its own (:func:`quarantine.spark.session.get_spark`).
No exactly-once re-run, no error struct, no metrics.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark import StorageLevel
from pyspark.sql import functions as F

from benchmarks.handwritten.rules import COORDINATES, good_columns, parsed, reason
from quarantine.spark.session import get_spark


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job once."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--quarantine", required=True)
    args = ap.parse_args(argv)
    spark = get_spark("handwritten:split_job")
    raw = spark.read.format("delta").load(args.source)
    checked = (
        parsed(raw, "key", "value", "headers", *COORDINATES)
        .withColumn("reason", reason())
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    checked.where(F.col("reason").isNull()).select(*good_columns()).write.format("delta").mode("append").save(
        args.target
    )
    checked.where(F.col("reason").isNotNull()).select("key", "value", "headers", *COORDINATES, "reason").write.format(
        "delta"
    ).mode("append").save(args.quarantine)
    checked.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
