"""The fastest plain job that keeps only the good rows: parse once, filter, append.

    python -m benchmarks.handwritten.good_only --source PATH --target PATH

Reads the Kafka-shaped Delta source, decodes and parses each record once
(:mod:`benchmarks.handwritten.rules`), drops the bad rows and appends the good ones
(the order's fields and the coordinates) to ``--target``. Bad rows are lost. The
session is built as ``quarantine run`` builds its own (:func:`quarantine.spark.session.get_spark`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from benchmarks.handwritten.rules import COORDINATES, good_columns, parsed, reason
from quarantine.spark.session import get_spark


def main(argv: Sequence[str] | None = None) -> None:
    """Run the job once (``--explain``: print the physical plan instead of writing)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--explain", action="store_true")
    args = ap.parse_args(argv)
    spark = get_spark("handwritten:good_only")
    raw = spark.read.format("delta").load(args.source)
    # Spark pushes a filter below a deterministic projection by inlining its aliases: a
    # filter on the parse's fields would run from_json once per reference, and the
    # projection once more. The parse made by a generator (explode of a one-element
    # array) cannot be inlined, so each record is parsed once (check: --explain).
    once = parsed(raw, *COORDINATES, generate=True)
    good = once.where(reason().isNull()).select(*good_columns())
    if args.explain:
        good.explain("formatted")
    else:
        good.write.format("delta").mode("append").save(args.target)
    spark.stop()


if __name__ == "__main__":
    main()
