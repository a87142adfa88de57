"""Chaining: a record that failed once is never run again; its first error rides to the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages, final_error, final_result
from quarantine.config import StageSpec
from quarantine.stages import build_stages
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.python import python_stage
from tests import fixtures_py_stage as fx
from tests.helpers import kafka_df

DEMO_STAGES = [
    {"name": "decode", "type": "decode_utf8"},
    {
        "name": "parse_order",
        "type": "json",
        "options": {
            "schema": "order_id STRING, amount DOUBLE, currency STRING, quantity INT, created_at STRING",
            "required": ["order_id", "amount", "currency"],
        },
    },
    {
        "name": "convert",
        "type": "cast",
        "options": {"columns": {"created_at": "TIMESTAMP"}, "formats": {"created_at": "yyyy-MM-dd HH:mm:ss"}},
    },
    {
        "name": "check_order",
        "type": "checks",
        "options": {
            "rules": [
                {"column": "amount", "check": "range", "min": 0, "max": 10000},
                {"column": "currency", "check": "in_set", "values": ["EUR", "USD", "GBP"]},
            ]
        },
    },
]


def _specs(raw: list[dict[str, Any]]) -> list[StageSpec]:
    return [StageSpec(s["name"], s["type"], s.get("input"), s.get("options", {}), i) for i, s in enumerate(raw)]


def test_each_record_ends_with_the_error_of_the_first_stage_it_failed(spark: Any) -> None:
    good = b'{"order_id": "A1", "amount": 10, "currency": "EUR", "created_at": "2026-01-02 03:04:05"}'
    values = [
        good,
        b"\xff\xfe",  # decode
        b'{"order_id": "A2"',  # parse_order
        b'{"order_id": "A3", "amount": 1, "currency": "EUR", "created_at": "2026-13-45 00:00:00"}',  # convert
        b'{"order_id": "A4", "amount": 15000.5, "currency": "JPY"}',  # check_order
    ]
    stages = build_stages(_specs(DEMO_STAGES))
    out = apply_stages(kafka_df(spark, values), stages)
    actual = out.select(
        "offset",
        final_error(stages).getField("stage").alias("stage"),
        final_error(stages).getField("error_class").alias("error_class"),
        final_result(stages).getField("order_id").alias("order_id"),
    )
    expected = spark.createDataFrame(
        [
            (0, None, None, "A1"),
            (1, "decode", "InvalidUtf8", None),
            (2, "parse_order", "MalformedJson", None),
            (3, "convert", "CastFailed", None),
            (4, "check_order", "range", None),
        ],
        "offset BIGINT, stage STRING, error_class STRING, order_id STRING",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)

    # Every stage column after the failing one carries the identical error struct.
    rows = {r.offset: r for r in out.collect()}
    names = [s.name for s in stages]
    for offset, first in [(1, "decode"), (2, "parse_order"), (3, "convert"), (4, "check_order")]:
        row = rows[offset]
        origin = row[first].error
        for later in names[names.index(first) :]:
            assert row[later].result is None
            assert row[later].error == origin
    for name in names:
        for row in rows.values():
            assert (row[name].result is None) != (row[name].error is None)


def test_python_stage_never_sees_records_an_earlier_stage_failed(spark: Any, tmp_path: Path) -> None:
    first, second = fx.Recorder(tmp_path / "first.log"), fx.Recorder(tmp_path / "second.log")
    values = [b"a", b"\xff", b"boom", None, "ü".encode(), b"b"]
    stages = [
        DecodeUtf8("decode"),
        python_stage("first", first, "STRING"),
        python_stage("second", second, "STRING"),
    ]
    out = apply_stages(kafka_df(spark, values), stages)
    rows = {r.offset: r for r in out.collect()}

    # Stage 1 ran only on what decode let through; "boom" raised there.
    assert sorted(first.seen()) == sorted(["'a'", "'boom'", "'ü'", "'b'"])
    # Stage 2 never saw "boom" (failed in stage 1), nor the bad bytes or the NULL (failed in decode).
    assert sorted(second.seen()) == sorted(["'a'", "'ü'", "'b'"])
    assert rows[2].second.error.stage == "first"
    assert rows[2].second.error.message == "boom is not allowed"
    assert rows[1].second.error.stage == rows[3].second.error.stage == "decode"
    assert [rows[i].second.result for i in (0, 4, 5)] == ["a", "ü", "b"]


def test_vectorized_python_stage_honours_skip_too(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "seen.log"

    def record_batch(s: Any) -> Any:
        with open(log, "a", encoding="utf-8") as f:
            f.writelines(f"{v}\n" for v in s.tolist())
        return s.str.upper()

    stages = [DecodeUtf8("decode"), python_stage("up", record_batch, "STRING", mode="vectorized")]
    out = apply_stages(kafka_df(spark, [b"x", b"\xc3", b"y", None]), stages)
    assert sorted(r.up.result for r in out.collect() if r.up.result is not None) == ["X", "Y"]
    assert sorted(log.read_text(encoding="utf-8").splitlines()) == ["x", "y"]


def test_stage_reading_an_explicit_earlier_stage(spark: Any) -> None:
    stages = [
        DecodeUtf8("decode"),
        python_stage("length", len, "INT"),
        python_stage("echo", fx.shout, "STRING", input="decode"),
    ]
    out = apply_stages(kafka_df(spark, [b"abc"]), stages)
    (row,) = out.select(F.col("length.result").alias("n"), F.col("echo.result").alias("e")).collect()
    assert (row.n, row.e) == (3, "ABC!")


class _Tripwire(DecodeUtf8):
    """A stage whose once-per-row value raises if it is ever computed for the record b"boom".

    It reads the raw source ``value`` (not its input, which is already NULL for a record
    that failed upstream), as a stage with an ``expr`` over source columns may.
    """

    def evaluate(self, value: Any, ctx: Any) -> Any:
        raw = F.col("value").cast("string")
        checked = ctx.once(
            "checked", F.when(raw == F.lit("boom"), F.raise_error(F.lit("ran on a failed row"))).otherwise(value)
        )
        return super().evaluate(checked.cast("binary"), ctx)


def test_a_once_per_row_value_is_not_computed_for_rows_an_earlier_stage_failed(spark: Any) -> None:
    from quarantine.stages.checks import Checks, parse_rules

    stages = [
        DecodeUtf8("decode"),
        Checks("reject_boom", parse_rules([{"check": "not_in_set", "values": ["boom"]}], "rules")),
        _Tripwire("after", input="reject_boom"),
    ]
    staged = apply_stages(kafka_df(spark, [b"ok", b"boom"]), stages)
    rows = staged.select("offset", final_error(stages).getField("stage").alias("failed_at")).collect()
    assert {r["offset"]: r["failed_at"] for r in rows} == {0: None, 1: "reject_boom"}


def test_once_per_row_values_stay_out_of_the_staged_frame_and_the_parse_runs_once(spark: Any) -> None:
    stages = build_stages(_specs(DEMO_STAGES))
    staged = apply_stages(kafka_df(spark, [b'{"order_id": "A1"}']), stages)
    assert [c for c in staged.columns if c.startswith("__q_")] == []
    assert staged.columns[-len(stages):] == [s.name for s in stages]
    # every reference reads one hidden column: the declared-schema parse (the one with the
    # corrupt-record field) appears once in the optimized plan, not once per reference
    plan = staged.select(final_result(stages), final_error(stages))._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("columnNameOfCorruptRecord") == 1, plan


def test_a_filter_on_the_last_stages_error_plans_without_inlining_the_chain(spark: Any) -> None:
    # Without the Generate barrier, Spark pushes this filter down through every stage's
    # projection, inlining each stage into it: planning ran out of a 3 GiB heap.
    stages = build_stages(_specs(DEMO_STAGES))
    staged = apply_stages(kafka_df(spark, [b'{"order_id": "A1", "amount": -1, "currency": "EUR"}', b"{"]), stages)
    failed = staged.where(final_error(stages).isNotNull()).where(F.col("offset") >= 0)
    plan = failed._jdf.queryExecution().optimizedPlan()
    text = plan.toString()
    lines = text.splitlines()
    generate = next(i for i, ln in enumerate(lines) if "Generate inline" in ln)
    above = "\n".join(lines[:generate])
    assert "check_order" in above and "isnotnull" in above  # the stage filter stays above
    assert "offset" in "\n".join(lines[generate:]).split("Filter", 1)[-1]  # the source filter goes below
    assert len(text) < 100_000, len(text)
    assert sorted(r["offset"] for r in failed.select("offset").collect()) == [0, 1]


def test_a_unique_expectation_after_the_demo_stages_plans_without_inlining_the_chain(spark: Any) -> None:
    """``unique``'s aggregate filters on the checked value and its join infers another
    filter: both would be pushed down through every earlier stage (planning the demo
    pipeline over 1M rows ran out of a 2 GiB driver); the barrier keeps them above."""
    from quarantine.config import load_config

    repo = Path(__file__).resolve().parents[2]
    config = load_config(repo / "conf" / "orders_demo.yml")
    stages = build_stages(config.stages)
    assert type(stages[-1]).__name__ == "ExpectationStage"
    staged = apply_stages(kafka_df(spark, [b'{"order_id": "A1", "amount": 1, "currency": "EUR"}'] * 2), stages)
    failed = staged.where(final_error(stages).isNotNull())
    text = failed._jdf.queryExecution().optimizedPlan().toString()
    assert len(text) < 200_000, len(text)
    assert [r["offset"] for r in failed.select("offset").orderBy("offset").collect()] == [0, 1]


def test_the_demo_stages_plan_no_higher_order_function(spark: Any) -> None:
    """A higher-order function (``transform``, ``array_sort``'s comparator) is evaluated
    outside whole-stage code generation, and takes every expression of its projection out with it:
    the json stage's undeclared-fields message (computed only for failed rows) took the whole
    stage column out, for every row (issue 49's breakdown). The drift column the runner keeps
    beside the stage is sorted without one too."""
    from quarantine.stage import drift_column_names

    stages = build_stages(_specs(DEMO_STAGES))
    staged = apply_stages(kafka_df(spark, [b'{"order_id": "A1", "amount": 1, "currency": "EUR", "x": 1}']), stages)
    frame = staged.select(final_result(stages), final_error(stages), *drift_column_names(stages))
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    assert "lambdafunction" not in plan, plan[:2000]
