"""Overhead of error capture: plain PySpark vs the quarantine pipeline, same source, same work.

Both arms read the same Kafka-shaped Delta source (the demo generator, written
once) and do the demo config's work — UTF-8 decode, ``from_json`` against the
order schema with required fields, the timestamp cast, the range/in-set checks:

* **plain** — the same expressions with no error capture: each step drops its
  bad rows with a filter and only the target Delta table is written;
* **quarantine** — :class:`quarantine.pipeline.Pipeline` with the demo config's
  stages (``errors.tolerance: all``): result-or-error columns, the quarantine
  MERGE, observed counts, the target write. Measured with ``listeners=[]`` (the
  fair comparison) and with the config's default listeners.

Each repeat writes fresh output tables; arms are interleaved (A/B/C then C/B/A)
so drift on a shared machine hits them alike; the median of K repeats is
reported. ``--profile`` also times each phase of ``process_batch`` once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from benchmarks import (
    Row,
    add_smoke,
    bench_spark,
    drop_dir,
    ensure_source,
    fresh_dir,
    markdown_table,
    median,
    timed,
)
from quarantine.config import PipelineConfig, StageSpec, load_config
from quarantine.listeners.events import RunListener
from quarantine.metrics.columns import observed_counts
from quarantine.pipeline import Pipeline, default_listeners
from quarantine.stage import Stage

__all__ = ["DEMO_CONF", "PlainStep", "available_stages", "demo_config", "main", "plain_target", "profile", "run"]

_REPO = Path(__file__).resolve().parent.parent
#: The config whose stages both arms run.
DEMO_CONF = _REPO / "conf" / "orders_demo.yml"

#: Goals of issue 2, by poison rate: quarantine time / plain time.
#: Issue 11's goals, by (poison rate, default listeners on).
GOALS: Mapping[tuple[float, bool], float] = {
    (0.0, False): 1.05, (0.0, True): 1.10, (0.10, False): 1.25, (0.10, True): 1.25,
}

_CORRUPT = "_corrupt_record"


def demo_config(source: str, out: Path, conf_path: Path = DEMO_CONF) -> PipelineConfig:
    """The demo config pointed at a benchmark source and a fresh output directory."""
    return load_config(
        conf_path,
        {
            "source.path": source,
            "target.table": str(out / "target"),
            "errors.deadletterqueue.table.name": str(out / "quarantine"),
            # the default listeners' outputs stay inside the benchmark directory
            "metrics.table": str(out / "metrics"),
            "mlflow.tracking_uri": f"sqlite:///{out.parent / 'mlflow.db'}",
        },
    )


#: Stage types the plain arm can mirror (row-level work); others are left out of both arms.
PLAIN_TYPES = frozenset({"decode_utf8", "json", "cast", "checks"})


def available_stages(config: PipelineConfig) -> tuple[list[StageSpec], list[Stage], list[str]]:
    """The config's row-level stages (both arms run these), and the stages left out.

    A stage is left out of *both* arms, so the comparison stays like for like,
    when the plain arm has no equivalent for its type (``expectation``: a GX
    batch validation, measured by ``bench_expectations``; ``python``) or its
    module is missing here. The names left out are reported with the results.
    """
    from quarantine.stages import build_stage

    specs: list[StageSpec] = []
    stages: list[Stage] = []
    left_out: list[str] = []
    for spec in config.stages:
        if spec.type not in PLAIN_TYPES:
            left_out.append(f"{spec.name}({spec.type})")
            continue
        try:
            stages.append(build_stage(spec))
        except ModuleNotFoundError:
            left_out.append(f"{spec.name}({spec.type}, module missing)")
            continue
        specs.append(spec)
    return specs, stages, left_out


# --------------------------------------------------------------------------- the plain arm


def _check(rule: Mapping[str, Any], v: Column) -> Column:
    """A rule of the ``checks`` stage as a plain boolean filter (NULL means pass, as there)."""
    col = v.getField(str(rule["column"]))
    check = rule["check"]
    if check == "range":
        lo, hi = rule.get("min"), rule.get("max")
        cond = F.lit(True)
        if lo is not None:
            cond = cond & (col >= F.lit(lo))
        if hi is not None:
            cond = cond & (col <= F.lit(hi))
        return cond
    if check == "in_set":
        return col.isin(list(rule["values"]))
    if check == "not_null":
        return col.isNotNull()
    if check == "regex":
        pattern = str(rule["pattern"])
        full = rule.get("match", "full") == "full"
        return col.rlike(f"\\A(?:{pattern})\\z" if full else pattern)
    raise ValueError(f"plain arm: unsupported check {check!r}; expected range | in_set | not_null | regex")


@dataclass(frozen=True)
class PlainStep:
    """One stage's work without error capture, as a careful hand-written pipeline does it.

    ``computed`` is evaluated once per row into its own column; ``keep`` and ``value``
    read that column. (Written inline, an expression such as ``from_json`` referenced
    by both the filter and the projection is evaluated once per reference: Spark does
    not eliminate subexpressions on the right of ``AND``. A fair baseline parses once.)

    Attributes:
        computed: the step's expensive value (the parse, the conversions).
        keep: given ``(computed, input)``, whether the row is kept.
        value: given ``computed``, the step's output value.
    """

    computed: Column
    keep: Callable[[Column, Column], Column]
    value: Callable[[Column], Column]


def _plain_step(spec: StageSpec, v: Column) -> PlainStep:
    """One stage of the demo config, without error capture (see :class:`PlainStep`)."""
    opts = spec.options
    if spec.type == "decode_utf8":
        return PlainStep(
            v, lambda c, old: F.coalesce(F.is_valid_utf8(old), F.lit(False)), lambda c: c.cast("string")
        )
    if spec.type == "json":
        schema = cast(StructType, StructType.fromDDL(str(opts["schema"])))
        parse = StructType([*schema.fields, StructField(_CORRUPT, StringType())])
        required = [str(r) for r in opts.get("required", [])]

        def keep_json(c: Column, old: Column) -> Column:
            ok = c.isNotNull() & c.getField(_CORRUPT).isNull()
            for r in required:
                ok = ok & c.getField(r).isNotNull()
            return ok

        return PlainStep(
            F.from_json(v, parse, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}),
            keep_json,
            lambda c: F.struct(*[c.getField(f.name).alias(f.name) for f in schema.fields]),
        )
    if spec.type == "cast":
        formats: Mapping[str, str] = opts.get("formats", {})
        columns = {str(k): str(t) for k, t in dict(opts["columns"]).items()}
        converted = v
        for name, type_ in columns.items():
            old = v.getField(name)
            if name in formats and type_.upper() == "TIMESTAMP":
                converted = converted.withField(name, F.try_to_timestamp(old, F.lit(formats[name])))
            else:
                converted = converted.withField(name, old.try_cast(type_))

        def keep_cast(c: Column, old: Column) -> Column:
            ok = F.lit(True)
            for name in columns:
                ok = ok & (old.getField(name).isNull() | c.getField(name).isNotNull())
            return ok

        return PlainStep(converted, keep_cast, lambda c: c)
    if spec.type == "checks":

        def keep_checks(c: Column, old: Column) -> Column:
            ok = F.lit(True)
            for rule in opts["rules"]:
                ok = ok & F.coalesce(_check(rule, c), F.lit(True))
            return ok

        return PlainStep(v, keep_checks, lambda c: c)
    raise ValueError(f"plain arm: no plain equivalent for stage type {spec.type!r}")


def plain_target(df: DataFrame, specs: Sequence[StageSpec]) -> DataFrame:
    """The plain pipeline: each stage's expressions, bad rows dropped by a filter.

    Returns the target rows in the same shape as the quarantine pipeline's
    target (the final struct's fields plus ``_source_*`` coordinates).
    """
    cur = df.select(
        F.col("topic").alias("_source_topic"), F.col("partition").alias("_source_partition"),
        F.col("offset").alias("_source_offset"), F.col("timestamp").alias("_source_timestamp"),
        F.col("value").alias("_v"),
    )
    coords = ["_source_topic", "_source_partition", "_source_offset", "_source_timestamp"]
    for spec in specs:
        step = _plain_step(spec, F.col("_v"))
        cur = (
            cur.select(*coords, F.col("_v").alias("_old"), step.computed.alias("_c"))
            .where(step.keep(F.col("_c"), F.col("_old")))
            .select(*coords, step.value(F.col("_c")).alias("_v"))
        )
    return cur.select("_v.*", *coords)


def run_plain(spark: SparkSession, source: str, specs: Sequence[StageSpec], out: Path) -> None:
    """Read the source, run :func:`plain_target`, append to ``out/target`` (Delta)."""
    df = spark.read.format("delta").load(source)
    plain_target(df, specs).write.format("delta").mode("append").save(str(out / "target"))


def run_quarantine(
    spark: SparkSession, source: str, stages: Sequence[Stage], out: Path, *, default: bool
) -> None:
    """Run the quarantine pipeline once into ``out`` (listeners=[] unless ``default``)."""
    config = demo_config(source, out)
    listeners: list[RunListener] | None = None if default else []
    Pipeline.from_config(config, spark, listeners=listeners, stages=stages).run()


def warm_up(spark: SparkSession, specs: Sequence[StageSpec], stages: Sequence[Stage]) -> None:
    """Warm the JVM (JIT, Delta classes) on a small source so the first timed run is not penalised."""
    warm = ensure_source(spark, 20_000, 0.10)
    warm_arms: list[Callable[[Path], None]] = [
        partial(run_plain, spark, warm, specs),
        partial(run_quarantine, spark, warm, stages, default=False),
    ]
    for fn in warm_arms:
        out = fresh_dir("warmup")
        fn(out)
        drop_dir(out)


def standalone_setup(
    doc: str | None, argv: Sequence[str] | None, *, app: str, poison_rate: float, repeats: int
) -> tuple[argparse.Namespace, SparkSession, list[StageSpec], list[Stage], str]:
    """A standalone benchmark's start: ``--records``/``--poison-rate``/``--repeats``/``--smoke`` parsed,
    the session, this benchmark's stages (both arms') and its source, written once."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0] if doc else None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--poison-rate", type=float, default=poison_rate)
    ap.add_argument("--repeat", "--repeats", dest="repeats", type=int, default=repeats)
    add_smoke(ap)
    args = ap.parse_args(argv)
    spark = bench_spark(app)
    specs, stages, _ = available_stages(demo_config("/tmp/probe-source", Path("/tmp/probe-out")))
    return args, spark, specs, stages, ensure_source(spark, args.records, args.poison_rate)


# --------------------------------------------------------------------------- profiling


def profile(spark: SparkSession, source: str, specs: Sequence[StageSpec], stages: Sequence[Stage]) -> dict[str, float]:
    """Seconds spent in each phase of ``process_batch`` (one run), and the plain arm's parts.

    Phases follow :meth:`Pipeline.process_batch`: the staged, persisted batch
    built by one observed noop pass; the quarantine MERGE; the target write.
    ``plain_noop`` / ``staged_noop`` compare the expressions alone (no writes).
    """
    from pyspark.sql import Observation

    from quarantine.sinks.quarantine import merge_quarantine, quarantine_rows

    out = fresh_dir("profile")
    try:
        pipe = Pipeline.from_config(demo_config(source, out), spark, listeners=[], stages=stages)
        df = spark.read.format("delta").load(source)
        phases: dict[str, float] = {}
        phases["plain_noop"] = timed(
            lambda: plain_target(df, specs).write.format("noop").mode("overwrite").save()
        )
        phases["staged_noop"] = timed(
            lambda: pipe.split_frame(df).write.format("noop").mode("overwrite").save()
        )
        split = pipe.split_frame(df).persist(StorageLevel.MEMORY_AND_DISK)
        obs = Observation("bench_profile")
        phases["persist+observe"] = timed(
            lambda: split.observe(obs, *observed_counts(pipe.chain(df), "_q_error"))
            .write.format("noop").mode("overwrite").save()
        )
        failed = split.where(F.col("_q_error").isNotNull())
        rows = quarantine_rows(failed, pipeline="bench", run_id="profile", batch_id=0, now=pipe.clock())
        phases["quarantine_merge"] = timed(
            lambda: merge_quarantine(spark, str(out / "quarantine"), rows, pipeline="bench")
        )
        phases["target_write"] = timed(
            lambda: pipe.target_rows(split).write.format("delta").mode("append").save(str(out / "target"))
        )
        split.unpersist()
        return phases
    finally:
        drop_dir(out)


# --------------------------------------------------------------------------- the benchmark


def _interleaved(
    arms: Mapping[str, Callable[[Path], None]], repeat: int
) -> dict[str, list[float]]:
    """Run every arm ``repeat`` times, order A..Z then Z..A, fresh output each time."""
    samples: dict[str, list[float]] = {a: [] for a in arms}
    names = list(arms)
    for k in range(repeat):
        order = names if k % 2 == 0 else list(reversed(names))
        for name in order:
            out = fresh_dir(name)
            try:
                samples[name].append(timed(partial(arms[name], out)))
            finally:
                drop_dir(out)
            print(f"  [{name}] repeat {k + 1}/{repeat}: {samples[name][-1]:.2f}s", file=sys.stderr, flush=True)
    return samples


def run(
    records: int = 1_000_000,
    repeat: int = 3,
    *,
    poison_rates: Sequence[float] = (0.0, 0.10),
    with_profile: bool = False,
    spark: SparkSession | None = None,
    smoke: bool = False,
) -> list[Row]:
    """Measure plain vs quarantine at each poison rate; return one row per comparison.

    ``smoke``: no warm-up, and only the last poison rate (every arm once: the check that it runs).
    """
    spark = spark or bench_spark("bench-pipeline")
    probe = demo_config("/tmp/probe-source", Path("/tmp/probe-out"))
    specs, stages, missing = available_stages(probe)
    note = f" (left out of both arms: {', '.join(missing)})" if missing else ""
    has_default = bool(default_listeners(probe, spark))
    if smoke:
        poison_rates = poison_rates[-1:]
    else:
        warm_up(spark, specs, stages)

    rows: list[Row] = []
    for rate in poison_rates:
        source = ensure_source(spark, records, rate)
        arms: dict[str, Callable[[Path], None]] = {
            "plain": partial(run_plain, spark, source, specs),
            "quarantine": partial(run_quarantine, spark, source, stages, default=False),
        }
        if has_default:
            arms["quarantine+listeners"] = partial(run_quarantine, spark, source, stages, default=True)
        print(f"pipeline: {records:,} records, {rate:.0%} poison, {repeat} repeats", file=sys.stderr)
        samples = _interleaved(arms, repeat)
        base = median(samples["plain"])
        for arm in arms:
            if arm == "plain":
                continue
            subj = median(samples[arm])
            label = "listeners=[]" if arm == "quarantine" else "default listeners"
            goal = GOALS.get((rate, arm != "quarantine"), 1.25)
            rows.append(
                Row(
                    bench="pipeline",
                    case=f"{records:,} rec, {rate:.0%} poison, {label}{note}",
                    baseline_s=base, subject_s=subj, ratio=subj / base,
                    goal=f"<= {goal:.2f}x", met=subj / base <= goal,
                    samples={"plain": samples["plain"], arm: samples[arm]},
                )
            )
        if not has_default:
            print("  (default_listeners() returns no listeners: the 'default listeners' arm equals listeners=[])",
                  file=sys.stderr)
        if with_profile:
            phases = profile(spark, source, specs, stages)
            print(f"  profile at {rate:.0%} poison: "
                  + ", ".join(f"{k} {v:.2f}s" for k, v in phases.items()), file=sys.stderr)
            rows.append(
                Row(
                    bench="pipeline-profile",
                    case=f"{rate:.0%} poison: staged noop vs plain noop (expressions only)",
                    baseline_s=phases["plain_noop"], subject_s=phases["staged_noop"],
                    ratio=phases["staged_noop"] / phases["plain_noop"], goal="info", met=True,
                    samples={k: [v] for k, v in phases.items()},
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """``python -m benchmarks.bench_pipeline [--records N] [--repeat K] [--profile] [--smoke]``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="also time each phase of process_batch")
    add_smoke(ap)
    args = ap.parse_args(argv)
    rows = run(args.records, max(args.repeat, 1), with_profile=args.profile, smoke=args.smoke)
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    main()
