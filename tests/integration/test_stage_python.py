"""python: user functions run Arrow-batched; a raising row becomes that row's error, nothing else."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec
from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.sinks.dlq_topic import dlq_records
from quarantine.sinks.quarantine import quarantine_rows
from quarantine.stage import Stage, StageContext
from quarantine.stages import build_stage as from_spec
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.json import JsonParse
from quarantine.stages.python import python_stage
from tests import fixtures_py_stage as fx
from tests.helpers import kafka_df


def _run(spark: Any, values: list[str | bytes | None], *stages: Stage, stacktrace: bool = False) -> list[Any]:
    raw = [v.encode() if isinstance(v, str) else v for v in values]
    out = apply_stages(kafka_df(spark, raw), [DecodeUtf8("decode"), *stages], stacktrace=stacktrace)
    name = stages[-1].name
    return [r[name] for r in out.orderBy("offset").collect()]


def _classes(rows: list[Any]) -> list[str | None]:
    return [r.error.error_class if r.error is not None else None for r in rows]


@pytest.mark.parametrize("mode", ["row", "vectorized"])
def test_poison_row_becomes_its_own_error_and_the_rest_succeed(spark: Any, mode: str) -> None:
    fn = fx.parse_amount if mode == "row" else fx.parse_amount_vectorized
    rows = _run(spark, ["1.5", "oops", "2", "-0.25"], python_stage("amount", fn, "DOUBLE", mode=mode))
    assert [r.result for r in rows] == [1.5, None, 2.0, -0.25]
    e = rows[1].error
    assert (e.stage, e.kind, e.error_class) == ("amount", "transform", "ValueError")
    assert e.message == "could not convert string to float: 'oops'"
    assert (e.stacktrace, e.retriable, e.attempts) == (None, False, 1)
    assert [(r.result is None) != (r.error is None) for r in rows] == [True] * 4


def test_vectorized_search_finds_exactly_the_poison_rows(spark: Any) -> None:
    n = 3000
    poison = {7, 1500, 2999}
    amounts = [-(i + 1.0) if i in poison else float(i) for i in range(n)]
    df = spark.createDataFrame([(i, a) for i, a in enumerate(amounts)], "id INT, amount DOUBLE")
    df = df.repartition(1).sortWithinPartitions("id")  # one Arrow batch per 10k rows: all in one call
    stage = python_stage("taxed", fx.add_tax_vectorized, "DOUBLE", mode="vectorized", input="amount")
    out = apply_stages(kafka_df(spark, [b"x"]).drop("value").crossJoin(df), [stage]).select("id", "taxed")
    rows = {r.id: r.taxed for r in out.collect()}
    failed = {i for i, r in rows.items() if r.error is not None}
    assert failed == poison
    for i in poison:
        assert rows[i].error.error_class == "ValueError"
        assert rows[i].error.message == f"negative amount in batch: [{-(i + 1.0)}]"
    assert all(rows[i].result == pytest.approx(i * 1.2) for i in range(n) if i not in poison)


def test_struct_input_is_a_dict_in_row_mode_and_a_dataframe_in_vectorized_mode(spark: Any) -> None:
    from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType

    schema = StructType([StructField("amount", DoubleType()), StructField("quantity", IntegerType())])
    parse = JsonParse("parse", schema)
    values = ['{"amount": 2.5, "quantity": 4}', '{"amount": 1.0, "quantity": 3}']
    by_row = _run(spark, values, parse, python_stage("total", fx.amount_times_quantity, "DOUBLE"))
    by_batch = _run(
        spark,
        values,
        parse,
        python_stage("total", fx.amount_times_quantity_vectorized, "DOUBLE", mode="vectorized"),
    )
    # a struct input is extended by one field named after the stage (output: extend, the default)
    assert [(r.result.amount, r.result.total) for r in by_row] == [(2.5, 10.0), (1.0, 3.0)]
    assert [r.result.asDict() for r in by_batch] == [r.result.asDict() for r in by_row]


def test_struct_result_and_unicode(spark: Any) -> None:
    rows = _run(
        spark, ["Ada Lovelace", "Zoë 東京", "Cher"], python_stage("name", fx.split_name, "first STRING, last STRING")
    )
    assert rows[0].result.asDict() == {"first": "Ada", "last": "Lovelace"}
    assert rows[1].result.asDict() == {"first": "Zoë", "last": "東京"}
    assert rows[2].error.message == "not enough values to unpack (expected 2, got 1)"
    (loud,) = _run(spark, ["straße 🚀"], python_stage("loud", fx.shout, "STRING"))
    assert loud.result == "STRASSE 🚀!"


def test_result_of_the_wrong_type_and_none_results(spark: Any) -> None:
    (wrong,) = _run(spark, ["7"], python_stage("n", fx.wrong_type, "INT"))
    assert wrong.error.error_class == "ResultTypeMismatch"
    assert wrong.error.message.startswith("function returned 'not a number: 7' (str); expected INT")
    (none,) = _run(spark, ["7"], python_stage("n", fx.always_none, "INT"))
    assert (none.error.error_class, none.error.message) == (
        "NullResult",
        "function returned None for input '7'; expected INT (set nullable: true to allow NULL results)",
    )
    (allowed,) = _run(spark, ["7"], python_stage("n", fx.always_none, "INT", nullable=True))
    assert allowed.result is None and allowed.error is None


def test_vectorized_wrong_length_fails_every_row_with_a_clear_message(spark: Any) -> None:
    rows = _run(spark, ["1", "2"], python_stage("n", fx.wrong_length_vectorized, "STRING", mode="vectorized"))
    assert _classes(rows) == ["ResultTypeMismatch", "ResultTypeMismatch"]
    assert rows[0].error.message == (
        "function returned Series of length 0 for 1 input row(s); expected a Series of the same length"
    )


def test_stacktrace_only_when_asked(spark: Any) -> None:
    stage = python_stage("amount", fx.parse_amount, "DOUBLE")
    (without,) = _run(spark, ["x"], stage)
    (with_trace,) = _run(spark, ["x"], stage, stacktrace=True)
    assert without.error.stacktrace is None
    assert with_trace.error.stacktrace.startswith("Traceback (most recent call last):")
    assert "in parse_amount" in with_trace.error.stacktrace
    assert with_trace.error.stacktrace.rstrip().endswith("ValueError: could not convert string to float: 'x'")


def test_retriable_classes_are_marked_without_a_retry_policy(spark: Any) -> None:
    stage = python_stage("f", fx.flaky, "STRING", retriable=(fx.TransientError,))
    ok, timeout, bad = _run(spark, ["fine", "timeout", "bad"], stage)
    assert ok.result == "fine"
    assert (timeout.error.error_class, timeout.error.retriable, timeout.error.attempts) == (
        "TransientError",
        True,
        1,
    )
    assert (bad.error.error_class, bad.error.message, bad.error.retriable) == ("KeyError", "'bad'", False)


def _with_policy(spark: Any, values: list[str], stage: Stage, policy: RetryPolicy) -> list[Any]:
    df = kafka_df(spark, [v.encode() for v in values]).withColumn("text", F.col("value").cast("string"))
    col = stage.evaluate(F.col("text"), StageContext(skip=F.lit(False), retry=policy))
    return [r.out for r in df.select("offset", col.alias("out")).orderBy("offset").collect()]


@pytest.mark.parametrize("mode", ["row", "vectorized"])
def test_retry_policy_retries_transient_failures(spark: Any, mode: str) -> None:
    policy = RetryPolicy(timeout_ms=5000, initial_backoff_ms=1, max_delay_ms=5, jitter=0.0)
    stage = python_stage("f", fx.FailFirstCalls(2), "STRING", mode=mode, retriable=(fx.TransientError,))
    (row,) = _with_policy(spark, ["v"], stage, policy)
    assert row.error is None
    assert row.result == "v"


def test_retry_policy_gives_up_within_its_budget_and_counts_attempts(spark: Any) -> None:
    policy = RetryPolicy(
        timeout_ms=40,
        initial_backoff_ms=5,
        max_delay_ms=10,
        jitter=0.0,
        retriable=RetriableClassifier.of(["TransientError"]),
    )
    stage = python_stage("f", fx.flaky, "STRING")
    timeout, bad = _with_policy(spark, ["timeout", "bad"], stage, policy)
    assert timeout.error.retriable is True
    assert 2 <= timeout.error.attempts <= 10
    assert (bad.error.retriable, bad.error.attempts) == (False, 1)


def test_built_from_yaml_by_dotted_path(spark: Any) -> None:
    spec = StageSpec(
        "amount",
        "python",
        None,
        {"function": "tests.fixtures_py_stage.parse_amount", "returns": "double", "mode": "row"},
        1,
    )
    rows = _run(spark, ["3", "x"], from_spec(spec))
    assert rows[0].result == 3.0
    assert rows[1].error.error_class == "ValueError"


def test_all_rows_skipped_or_empty_input(spark: Any) -> None:
    rows = _run(spark, [b"\xff", None], python_stage("amount", fx.parse_amount, "DOUBLE"))
    assert [r.error.stage for r in rows] == ["decode", "decode"]
    empty = apply_stages(kafka_df(spark, []), [DecodeUtf8("decode"), python_stage("a", fx.parse_amount, "DOUBLE")])
    assert empty.collect() == []


def test_an_exception_without_a_message_is_kept_and_sent_as_a_sentence_not_null(spark: Any) -> None:
    """docs/error-handling.md, "A DLQ topic": Kafka Connect's ``DeadLetterQueueReporter`` adds
    ``__connect.errors.exception.message`` with a null value when the exception has no message;
    here the ``message`` column and that header read ``<Class> raised with no message``."""
    stage = python_stage("f", fx.raise_without_message, "STRING")
    out = apply_stages(kafka_df(spark, [b"x"]), [DecodeUtf8("decode"), stage])
    rows = quarantine_rows(out.withColumn("_err", F.col("f.error")), pipeline="p", run_id="r", batch_id=0,
                           now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), error="_err")
    (row,) = rows.collect()
    assert row.message == "LookupError raised with no message"
    (record,) = dlq_records(rows).collect()
    headers = {h.key: h.value for h in record.headers}
    assert headers["__connect.errors.exception.message"] == b"LookupError raised with no message"
