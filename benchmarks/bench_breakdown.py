"""The per-record work, stage by stage: the staged plan against the hand-written job's columns.

    python -m benchmarks.bench_breakdown [--records 2000000] [--repeat 3] [--case NAME ...]
        [--without strict-strings|drift|messages ...] [--smoke]

Issue 49's breakdown. Over the ``process`` benchmark's kind of source (the demo generator,
1 % poison), in one warm session, each case builds two frames once and writes each to
Spark's ``noop`` sink (every row computed, nothing stored), ``--repeat`` times, interleaved
(A B, then B A, …); the best and the median are reported:

* **staged** — :meth:`quarantine.batch.plan.Plan.split_frame` over the prepared source
  (:func:`quarantine.batch.settle.prepare`, as a batch run calls it) with the demo config's
  stages up to the case's (``decode``; ``json``, its strings ``coerce`` then ``strict``, the
  default; ``cast``; ``checks``), every projection the two writes need;
* **hand-written** — the same source's raw columns and coordinates with the columns a careful
  engineer writes for the same rules (:mod:`benchmarks.handwritten.rules`: ``is_valid_utf8``,
  one PERMISSIVE ``from_json``, ``try_to_timestamp``, a reason). The json ``strict`` case's
  hand-written arm also lists each record's undeclared top-level fields
  (``json_object_keys``), what the stage counts as drift in both modes; no hand-written arm
  checks strict strings (a careful engineer does not: the demo's poison has none).

Beside each case's times, facts read from ``explain("formatted")`` of each frame's executed
plan (whole-stage code generation on, as users run): how many times ``from_json``,
``try_parse_json`` and ``json_object_keys`` appear, how many projections run outside
whole-stage code generation (``Project`` without ``*``), and how many ``Generate`` operators.

``--without`` leaves a feature out of the staged arm (:data:`ABLATIONS`: the json stage's strict
strings, its drift, every error message), to see what each costs per record.

The fixed costs of a whole run, phase by phase (issue 49, point 1's second half), are
:mod:`benchmarks.bench_phases`'s.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import quarantine.stage as stage_module
from benchmarks import Row, add_smoke, bench_spark, ensure_source, markdown_table, median, timed
from benchmarks.bench_pipeline import available_stages, demo_config
from benchmarks.handwritten.rules import COORDINATES, ORDER_SCHEMA, parsed, reason
from quarantine.batch.settle import prepare
from quarantine.pipeline import Pipeline
from quarantine.stage import Stage
from quarantine.stages.json import JsonParse, Strings

__all__ = ["ABLATIONS", "CASES", "PlanFacts", "main", "plan_facts", "run"]

_CORRUPT = "_corrupt_record"
_REQUIRED = ("order_id", "amount", "currency")


@dataclass(frozen=True)
class PlanFacts:
    """What ``explain("formatted")`` of a frame's executed plan shows.

    Attributes:
        from_json: occurrences of ``from_json(`` (one per parse a row may run).
        try_parse_json: occurrences of ``try_parse_json(``/``parse_json(`` (parses into VARIANT).
        json_object_keys: occurrences of ``json_object_keys(`` (a scan of the record's keys).
        outside_codegen: ``Project`` operators outside whole-stage code generation.
        generate: ``Generate`` operators.
    """

    from_json: int
    try_parse_json: int
    json_object_keys: int
    outside_codegen: int
    generate: int

    def text(self) -> str:
        """One line, for the table's case."""
        return (f"from_json x{self.from_json}, parse_json x{self.try_parse_json}, "
                f"json_object_keys x{self.json_object_keys}, {self.outside_codegen} Project outside codegen, "
                f"{self.generate} Generate")


def plan_facts(frame: DataFrame) -> PlanFacts:
    """The :class:`PlanFacts` of ``frame`` (planned, not run)."""
    jvm = frame.sparkSession._jvm
    assert jvm is not None
    mode = jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
    text: str = frame._jdf.queryExecution().explainString(mode)
    tree, _, details = text.partition("\n\n")
    return PlanFacts(
        from_json=details.count("from_json("),
        # an expression Spark replaces at runtime shows as its implementation's static_invoke
        try_parse_json=len(re.findall(r"parse_json\(|VariantExpressionEvalUtils\.parseJson", details)),
        json_object_keys=len(re.findall(r"json_object_keys\(|JsonExpressionUtils\.jsonObjectKeys", details)),
        outside_codegen=len(re.findall(r"^[\s:+\-]*Project \(", tree, re.M)),
        generate=len(re.findall(r"^[\s:+\-]*\*? ?Generate \(", tree, re.M)),
    )


# --------------------------------------------------------------------------- the hand-written columns


def _hand_decode(raw: DataFrame) -> DataFrame:
    value = F.col("value")
    why = F.when(value.isNull(), F.lit("value is NULL")).when(~F.is_valid_utf8(value), F.lit("not UTF-8"))
    return raw.select("key", "value", "headers", *COORDINATES, why.alias("reason"))


def _json_reason(p: Column) -> Column:
    missing = [p.getField(r).isNull() for r in _REQUIRED]
    return (
        F.when(F.col("value").isNull(), F.lit("value is NULL"))
        .when(~F.col("_utf8"), F.lit("value is not valid UTF-8"))
        .when(p.isNull() | p.getField(_CORRUPT).isNotNull(), F.lit("malformed JSON or a field of the wrong type"))
        .when(missing[0] | missing[1] | missing[2], F.lit("a required field is missing"))
    )


def _hand_json(raw: DataFrame) -> DataFrame:
    base = parsed(raw, "key", "value", "headers", *COORDINATES)
    return base.select("key", "value", "headers", *COORDINATES, "_p", _json_reason(F.col("_p")).alias("reason"))


def _hand_json_drift(raw: DataFrame) -> DataFrame:
    declared = F.array(*[F.lit(f.name) for f in ORDER_SCHEMA.fields])
    keys = F.array_except(F.json_object_keys(F.col("value").cast("string")), declared)
    return _hand_json(raw).withColumn("drift", F.when(F.size(keys) > 0, F.array_join(F.sort_array(keys), ",")))


def _hand_cast(raw: DataFrame) -> DataFrame:
    base = parsed(raw, "key", "value", "headers", *COORDINATES)
    p = F.col("_p")
    why = _json_reason(p).when(
        p.getField("created_at").isNotNull() & F.col("_ts").isNull(), F.lit("created_at is not a timestamp")
    )
    return base.select("key", "value", "headers", *COORDINATES, "_p", "_ts", why.alias("reason"))


def _hand_checks(raw: DataFrame) -> DataFrame:
    return parsed(raw, "key", "value", "headers", *COORDINATES).withColumn("reason", reason())


@dataclass(frozen=True)
class Case:
    """One step of the breakdown: the stages staged, the hand-written columns beside them."""

    name: str
    stages: int  # how many of the demo's stages (decode, json, cast, checks)
    strings: Strings
    hand: Callable[[DataFrame], DataFrame]


CASES: tuple[Case, ...] = (
    Case("decode", 1, Strings.STRICT, _hand_decode),
    Case("json, strings: coerce", 2, Strings.COERCE, _hand_json),
    Case("json, strings: strict (default), drift", 2, Strings.STRICT, _hand_json_drift),
    Case("json + cast", 3, Strings.STRICT, _hand_cast),
    Case("json + cast + checks (the demo's chain)", 4, Strings.STRICT, _hand_checks),
)


#: What ``--without`` can leave out of the staged arm, to see what each costs (the hand-written arm
#: is unchanged): the json stage's strict strings (it runs ``strings: coerce``, a config option), its
#: drift (its ``json_object_keys`` replaced by a NULL array: no config turns drift off, so this is an
#: ablation, not a configuration), every stage's error class and message (literals instead).
ABLATIONS = ("strict-strings", "drift", "messages")


def _stages(all_stages: Sequence[Stage], case: Case, without: Collection[str] = ()) -> list[Stage]:
    strings = Strings.COERCE if "strict-strings" in without else case.strings
    out: list[Stage] = []
    for stage in all_stages[: case.stages]:
        if isinstance(stage, JsonParse) and stage.strings is not strings:
            stage = JsonParse(name=stage.name, schema=stage.schema, required=stage.required, input=stage.input,
                              strings=strings, undeclared_fields=stage.undeclared_fields)
        out.append(stage)
    return out


@contextmanager
def _ablated(without: Collection[str]) -> Iterator[None]:
    """While the staged frame is built: the ``drift`` and ``messages`` of :data:`ABLATIONS` left out
    (the expressions are fixed when the frame is built; the hand-written arm is built outside)."""
    saved = (F.json_object_keys, stage_module.error_column)
    if "drift" in without:
        F.json_object_keys = lambda col: F.lit(None).cast("array<string>")  # type: ignore[assignment]
    if "messages" in without:
        real = stage_module.error_column

        def literal(stage: str, kind: Any, error_class: Any, message: Any, **_: Any) -> Column:
            return real(stage, kind, F.lit("Error"), F.lit("ablated"))

        stage_module.error_column = literal
    try:
        yield
    finally:
        F.json_object_keys, stage_module.error_column = saved  # type: ignore[assignment]


def _noop(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def run(
    records: int = 2_000_000, repeat: int = 3, *, spark: SparkSession | None = None, smoke: bool = False,
    cases: Sequence[str] = (), without: Collection[str] = (),
) -> list[Row]:
    """Every case's staged and hand-written frames to ``noop``; one row per case (ratio staged / hand-written).

    ``cases``: only the cases whose name holds one of these (none: every case). ``without``: the
    :data:`ABLATIONS` left out of the staged arm."""
    unknown = set(without) - set(ABLATIONS)
    if unknown:
        raise ValueError(f"--without {sorted(unknown)}: one of {', '.join(ABLATIONS)}")
    spark = spark or bench_spark("bench-breakdown")
    source = ensure_source(spark, records, 0.01)
    out = Path("/tmp/quarantine-bench-breakdown")  # never written: the frames go to noop
    config = demo_config(source, out)
    _, all_stages, _ = available_stages(config)
    raw = spark.read.format("delta").load(source)
    chosen = [c for c in CASES if not cases or any(k in c.name for k in cases)]
    if not smoke:  # warm the JVM: every chosen case's frames once over a small source
        warm = spark.read.format("delta").load(ensure_source(spark, 20_000, 0.10))
        for case in chosen:
            pipe = Pipeline.from_config(config, spark, listeners=[], stages=_stages(all_stages, case, without))
            with _ablated(without):
                staged = pipe.split_frame(prepare(pipe, warm))
            _noop(staged)
            _noop(case.hand(warm))
    rows: list[Row] = []
    for case in chosen:
        pipe = Pipeline.from_config(config, spark, listeners=[], stages=_stages(all_stages, case, without))
        with _ablated(without):
            staged = pipe.split_frame(prepare(pipe, raw))
        frames = {"hand-written": case.hand(raw), "staged": staged}
        facts = {arm: plan_facts(f) for arm, f in frames.items()}
        samples: dict[str, list[float]] = {arm: [] for arm in frames}
        arms = list(frames)
        for k in range(repeat):
            for arm in arms if k % 2 == 0 else reversed(arms):
                samples[arm].append(timed(lambda f=frames[arm]: _noop(f)))  # type: ignore[misc]
                print(f"  [{case.name}: {arm}] {k + 1}/{repeat}: {samples[arm][-1]:.2f}s", file=sys.stderr, flush=True)
        base, subj = median(samples["hand-written"]), median(samples["staged"])
        ablated = f", staged without {', '.join(sorted(without))}" if without else ""
        best = min(samples["staged"]) / min(samples["hand-written"])
        rows.append(Row(
            bench="breakdown",
            case=(f"{records:,} rec, 1% poison, {case.name}{ablated} (best {best:.2f}x); "
                  f"staged: {facts['staged'].text()}; hand-written: {facts['hand-written'].text()}"),
            baseline_s=base, subject_s=subj, ratio=subj / base, goal="<= 1.10x", met=subj / base <= 1.10,
            samples=samples,
        ))
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """``python -m benchmarks.bench_breakdown [--records N] [--repeat K] [--case NAME] [--without X] [--smoke]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", action="append", default=[], help="only the cases whose name holds this (repeatable)")
    ap.add_argument("--without", action="append", default=[], choices=ABLATIONS,
                    help="leave this out of the staged arm, to see what it costs (repeatable)")
    add_smoke(ap)
    args = ap.parse_args(argv)  # None: the command line's
    rows = run(args.records, max(args.repeat, 1), smoke=args.smoke, cases=args.case, without=args.without)
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    main()
