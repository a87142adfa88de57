"""How much the ``python`` stage costs next to the plain UDFs people would write instead.

Two comparisons, each over the same generated string column (``rows`` values,
a ``poison`` fraction of which do not parse as a float):

* row mode vs a row-at-a-time ``F.udf`` with its own ``try/except`` returning
  ``STRUCT<result, error>`` (and Spark's Arrow-optimised ``F.udf(useArrow=True)``),
  on poisoned data;
* vectorized mode vs a plain ``pandas_udf`` on clean data (a plain pandas UDF
  cannot survive poison at all: one bad value fails the task), plus vectorized
  mode on poisoned data to show what bisection costs.

Each case is evaluated in full with the ``noop`` sink, once to warm up the
Python workers and then ``repeats`` times; the best time is reported. Numbers
are wall-clock on whatever machine runs this; compare rows, not machines.

Run: ``python benchmarks/bench_python_stage.py [rows] [poison]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd  # module level: pandas_udf resolves the string type hints of vec_float here

__all__ = ["Case", "main", "run_cases"]


@dataclass(frozen=True)
class Case:
    """One measured variant: a name, the data it runs on, and its column."""

    name: str
    data: str  # "poisoned" | "clean"
    column: Callable[[Any], Any]  # input Column -> output Column


def _cases() -> list[Case]:
    from pyspark.sql import functions as F

    from quarantine.stage import StageContext
    from quarantine.stages.python import python_stage

    ctx = StageContext(skip=F.lit(False))

    def vec_float(s: pd.Series) -> pd.Series:
        return s.astype(float)

    def plain_try(x: str | None) -> tuple[float | None, str | None]:
        try:
            return float(x), None  # type: ignore[arg-type]
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"

    row_udf = F.udf(plain_try, "struct<result: double, error: string>")
    arrow_row_udf = F.udf(plain_try, "struct<result: double, error: string>", useArrow=True)
    plain_pandas = F.pandas_udf(vec_float, "double")  # type: ignore[call-overload]
    row_stage = python_stage("p", float, "DOUBLE")
    vec_stage = python_stage("p", vec_float, "DOUBLE", mode="vectorized")
    return [
        Case("python stage, row mode", "poisoned", lambda c: row_stage.evaluate(c, ctx)),
        Case("F.udf + try/except (pickled rows)", "poisoned", lambda c: row_udf(c)),
        Case("F.udf(useArrow=True) + try/except", "poisoned", lambda c: arrow_row_udf(c)),
        Case("python stage, vectorized mode", "clean", lambda c: vec_stage.evaluate(c, ctx)),
        Case("plain pandas_udf", "clean", lambda c: plain_pandas(c)),
        Case("python stage, vectorized mode", "poisoned", lambda c: vec_stage.evaluate(c, ctx)),
    ]


def _data(spark: Any, rows: int, poison: float) -> dict[str, Any]:
    from pyspark.sql import functions as F

    every = max(1, round(1 / poison)) if poison > 0 else 0
    base = spark.range(rows)
    text = F.format_string("%.2f", F.col("id") * F.lit(0.5))
    poisoned = base.select(
        F.when(F.col("id") % every == 0, F.lit("n/a")).otherwise(text).alias("text") if every else text.alias("text")
    )
    return {"poisoned": poisoned.cache(), "clean": base.select(text.alias("text")).cache()}


def run_cases(spark: Any, rows: int = 300_000, poison: float = 0.01, repeats: int = 2) -> list[dict[str, Any]]:
    """Time every case; returns one dict per case (name, data, seconds, rows_per_s)."""
    from pyspark.sql import functions as F

    frames = _data(spark, rows, poison)
    for df in frames.values():
        df.count()  # materialise the cache outside the timings
    results = []
    for case in _cases():
        df = frames[case.data]
        out = df.select(case.column(F.col("text")).alias("out"))
        best = float("inf")
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            out.write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - t0
            if i > 0:  # the first run warms up the Python workers
                best = min(best, elapsed)
        results.append({"case": case.name, "data": case.data, "seconds": best, "rows_per_s": rows / best})
    for df in frames.values():
        df.unpersist()
    return results


def _table(results: list[dict[str, Any]], rows: int, poison: float) -> str:
    lines = [
        f"python stage benchmark: {rows:,} rows, poisoned data has {poison:.2%} bad values",
        f"{'case':<38} {'data':<9} {'seconds':>8} {'rows/s':>12}",
        "-" * 70,
    ]
    for r in results:
        lines.append(f"{r['case']:<38} {r['data']:<9} {r['seconds']:>8.2f} {r['rows_per_s']:>12,.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the table. ``argv``: optional ``[rows, poison]``."""
    from quarantine.session import get_spark

    args = sys.argv[1:] if argv is None else argv
    rows = int(args[0]) if args else 300_000
    poison = float(args[1]) if len(args) > 1 else 0.01
    spark = get_spark(
        "bench-python-stage",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    print(_table(run_cases(spark, rows, poison), rows, poison))


if __name__ == "__main__":
    main()
