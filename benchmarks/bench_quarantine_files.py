"""A batch run's quarantine write: failed records one file per ``ROWS_PER_FILE``, or as they lie.

    .venv/bin/python -m benchmarks.bench_quarantine_files [--records 1000000] [--poison-rate 0.1] [--repeats 4]

Three arms over the pipeline benchmark's source and stages (:mod:`benchmarks.bench_pipeline`),
interleaved, medians reported:

* **plain** — the plain arm (expressions and one Delta append of the target);
* **quarantine** — a batch run, its failed records written one file per
  :data:`~quarantine.sinks.quarantine.ROWS_PER_FILE` of them;
* **scattered** — the same run with failed records written as they lie, one file
  (or more) per partition of the batch: the way before stop 28.

The streaming side of the same lever is ``bench_streaming``'s ``scattered`` arm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.bench_pipeline import _interleaved, run_plain, run_quarantine, standalone_setup, warm_up
from quarantine.sinks.quarantine import QuarantineWriter

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the arms; print and return each arm's median seconds."""
    args, spark, specs, stages, source = standalone_setup(
        __doc__, argv, app="bench-quarantine-files", poison_rate=0.10, repeats=4
    )
    real = QuarantineWriter.write

    def as_they_lie(self: QuarantineWriter, failed: Any, **kwargs: Any) -> Any:
        return real(self, failed, **{**kwargs, "records": None})

    def scattered(out: Path) -> None:
        QuarantineWriter.write = as_they_lie  # type: ignore[method-assign]
        try:
            run_quarantine(spark, source, stages, out, default=False)
        finally:
            QuarantineWriter.write = real  # type: ignore[method-assign]

    arms: dict[str, Callable[[Path], None]] = {
        "plain": partial(run_plain, spark, source, specs),
        "quarantine": partial(run_quarantine, spark, source, stages, default=False),
        "scattered": scattered,
    }
    if not args.smoke:
        warm_up(spark, specs, stages)
    samples = _interleaved(arms, args.repeats)
    spark.stop()
    medians = {a: median(v) for a, v in samples.items()}
    print(f"\nquarantine files: {args.records:,} records, {args.poison_rate:.0%} poison, median of {args.repeats}")
    print("| arm | median s | samples |\n|---|---:|---|")
    for a, v in samples.items():
        print(f"| {a} | {medians[a]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
    return medians


if __name__ == "__main__":
    main()
