"""The quarantine write kept encrypted: the same failed records written as read and encrypted, side by side.

    .venv/bin/python -m benchmarks.bench_encryption [--records 1000000] [--poison-rate 0.1] [--repeats 6] [--smoke]

Over the pipeline benchmark's source and stages (:mod:`benchmarks.bench_pipeline`), the batch is
staged once and its failed records are persisted (what a batch run writes its quarantine rows
from). Then, interleaved (A B C D, then D C B A, …), each arm writes them through the pipeline's
quarantine writer (:meth:`QuarantineWriter.write <quarantine.sinks.quarantine.QuarantineWriter.write>`:
the rows, the redaction, the Delta commit), medians reported:

* **append** — into a new quarantine table (a run's first batch: created, then appended);
* **merge** — into a table that already holds them (a re-run's MERGE: every row updated, its
  history grown); the table's first write is not timed;

each **plain** (``errors.deadletterqueue.encryption.*`` unset) and **encrypted** (a 32-byte key:
AES-256-GCM over key, value, header values, message and history messages,
:func:`quarantine.encryption.seal_rows`). The goal: encrypted at most 1.10x plain.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from statistics import median

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from benchmarks import drop_dir, fresh_dir, timed
from benchmarks.bench_pipeline import DEMO_CONF, demo_config, standalone_setup
from quarantine.batch.settle import prepare
from quarantine.columns import ERROR
from quarantine.config import PipelineConfig, parse_config
from quarantine.pipeline import Pipeline
from quarantine.stage import Stage

__all__ = ["GOAL", "main"]

#: The issue's goal: the encrypted write at most this many times the plain one.
GOAL = 1.10
#: The environment variable the encrypted arms' key is read from.
_KEY_ENV = "QUARANTINE_BENCH_KEY"


def _config(source: str, out: Path, *, encrypted: bool) -> PipelineConfig:
    """The demo config into ``out``; with the encryption keys when ``encrypted``."""
    raw = dict(demo_config(source, out).raw)
    if encrypted:
        raw["errors"] = {**raw["errors"], "deadletterqueue.encryption.key": f"env:{_KEY_ENV}",
                         "deadletterqueue.encryption.key.id": "bench"}
    return parse_config(raw, base_dir=DEMO_CONF.parent)


@dataclass(frozen=True)
class _Failed:
    """The batch's failed records, persisted, and what the writer's pipeline is built from."""

    stages: Sequence[Stage]
    source: str
    rows: DataFrame
    records: int


def _write(failed: _Failed, out: Path, *, encrypted: bool, merge: bool) -> float:
    """One arm's write of the failed records into ``out``'s quarantine table; its seconds."""
    pipe = Pipeline.from_config(_config(failed.source, out, encrypted=encrypted), failed.rows.sparkSession,
                                listeners=[], stages=failed.stages)
    now = dt.datetime.now(dt.UTC)

    def write(batch: int) -> None:
        pipe.quarantine_writer().write(failed.rows, run_id=f"bench-{batch}", batch_id=batch, now=now, error=ERROR,
                                       records=failed.records)

    if merge:
        write(0)  # the table holds them: the timed write is a MERGE updating every row
    return timed(lambda: write(1))


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the arms; print and return each arm's median seconds."""
    args, spark, _, stages, source = standalone_setup(
        __doc__, argv, app="bench-encryption", poison_rate=0.10, repeats=6
    )
    os.environ[_KEY_ENV] = "b" * 32
    probe = fresh_dir("probe")
    pipe = Pipeline.from_config(_config(source, probe, encrypted=False), spark, listeners=[], stages=stages)
    batch = pipe.split_frame(prepare(pipe, spark.read.format("delta").load(source)))
    failed = batch.where(F.col(ERROR).isNotNull()).persist(StorageLevel.MEMORY_AND_DISK)
    n = failed.count()
    drop_dir(probe)
    given = _Failed(stages, source, failed, n)
    arms: dict[str, Callable[[Path], float]] = {
        f"{kind} {mode}": partial(_write, given, encrypted=mode == "encrypted", merge=kind == "merge")
        for kind in ("append", "merge") for mode in ("plain", "encrypted")
    }
    if not args.smoke:  # warm: each arm once, untimed
        for fn in arms.values():
            out = fresh_dir("warm")
            fn(out)
            drop_dir(out)
    samples: dict[str, list[float]] = {a: [] for a in arms}
    names = list(arms)
    for k in range(args.repeats):
        for name in names if k % 2 == 0 else list(reversed(names)):
            out = fresh_dir(name.replace(" ", "-"))
            try:
                samples[name].append(arms[name](out))
            finally:
                drop_dir(out)
            print(f"  [{name}] repeat {k + 1}/{args.repeats}: {samples[name][-1]:.2f}s", file=sys.stderr, flush=True)
    failed.unpersist()
    spark.stop()
    medians = {a: median(v) for a, v in samples.items()}
    print(f"\nquarantine write, encrypted vs plain: {n:,} failed records of {args.records:,} "
          f"({args.poison_rate:.0%} poison), median of {args.repeats}")
    print("| arm | median s | samples | encrypted / plain |\n|---|---:|---|---:|")
    for a, v in samples.items():
        ratio = "" if a.endswith("plain") else f"{medians[a] / medians[a.replace('encrypted', 'plain')]:.3f}x"
        print(f"| {a} | {medians[a]:.2f} | {', '.join(f'{x:.2f}' for x in v)} | {ratio} |")
    print(f"goal: encrypted ≤ {GOAL:.2f}x plain")
    return medians


if __name__ == "__main__":
    main()
