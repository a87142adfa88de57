"""Metrics observed by the runner match the records, per batch, per run, per stage and per topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.metrics.cells import MetricNames
from quarantine.metrics.observed import OTHER_TOPIC
from quarantine.pipeline import Pipeline
from quarantine.stage import ReportsRetries
from quarantine.stages import build_stage as decode_from_spec
from quarantine.stages.python import PythonStage, python_stage
from tests.helpers import kafka_df

N = MetricNames
JSON = "order_id STRING, amount DOUBLE"


def _config(d: Path, stages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "pipeline": "metrics_test",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": stages
        or [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": JSON, "required": ["order_id"]}},
        ],
    }


def _pipeline(spark: Any, d: Path) -> Pipeline:
    return Pipeline.from_config(parse_config(_config(d)), spark, listeners=[])


class _RetryingStage(PythonStage):
    """A python stage whose function retries a flaky service itself and returns its attempts.

    It implements :class:`ReportsRetries`, so retries of records that finally
    succeeded are counted in the same pass as the data.
    """

    def retries(self, column: Column) -> Column:
        return column.getField("result").getField("attempts") - 1


def _service_stage() -> PythonStage:
    def call_service(x: str) -> dict[str, Any]:
        # "flaky" times out once then succeeds; "bad*" is rejected for good (not retriable)
        attempts = 0
        while True:
            attempts += 1
            try:
                if x.startswith("bad"):
                    raise ValueError(f"service rejected {x}")
                if x == "flaky" and attempts == 1:
                    raise TimeoutError("service timed out")
                return {"value": x.upper(), "attempts": attempts}
            except TimeoutError:
                if attempts >= 3:
                    raise

    base = python_stage("call", call_service, "value STRING, attempts INT", input="decode")
    return _RetryingStage(name=base.name, fn=base.fn, returns=base.returns, input=base.input)


def test_metric_counts_match_the_records_three_failures_one_retried_success_two_skipped(
    spark: Any, table_dir: Path
) -> None:
    cfg = parse_config(_config(table_dir, [{"name": "decode", "type": "decode_utf8"}]))
    stage = _service_stage()
    assert isinstance(stage, ReportsRetries)
    decode = decode_from_spec(cfg.stages[0])
    pipe = Pipeline.from_config(cfg, spark, listeners=[], stages=[decode, stage])
    run = pipe.start_run()

    report = run.process_batch(kafka_df(spark, [b"ok1", b"flaky", b"bad1", b"ok2", b"bad2"]), 0)

    m = report.metrics
    assert (report.records_in, report.records_ok, report.records_quarantined) == (5, 3, 2)
    # Kafka's ErrorHandlingMetrics: every failed attempt is a failure (2 final + 1 retried),
    # the retried success is one retry, the two rejected records are errors and skipped.
    assert m[N.TOTAL_RECORD_FAILURES] == 3
    assert m[N.TOTAL_RETRIES] == 1
    assert m[N.TOTAL_RECORD_ERRORS] == 2
    assert m[N.TOTAL_RECORDS_SKIPPED] == 2
    assert m[N.DEADLETTERQUEUE_PRODUCE_REQUESTS] == 2
    assert m[N.DEADLETTERQUEUE_PRODUCE_FAILURES] == 0
    assert m["total-retries/stage/call"] == 1
    assert m["total-record-failures/stage/call"] == 3
    target = spark.read.format("delta").load(str(table_dir / "target"))
    assert sorted(r["value"] for r in target.collect()) == ["FLAKY", "OK1", "OK2"]
    quarantine = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert quarantine.where("stage = 'call' AND error_class = 'ValueError'").count() == m[N.TOTAL_RECORD_ERRORS]


def test_per_stage_and_per_topic_counts_with_two_topics(spark: Any, table_dir: Path) -> None:
    orders = [b'{"order_id":"a","amount":1}', b"\xff", b'{"amount":2}', b'{"order_id":"b","amount":3}', b"{"]
    refunds = [b'{"order_id":"r","amount":-1}', b"\xfe", b'{"order_id":"s","amount":"x"}']
    df = kafka_df(spark, orders, topic="orders").unionByName(kafka_df(spark, refunds, topic="refunds"))
    report = _pipeline(spark, table_dir).start_run().process_batch(df, 0)

    m = report.metrics
    assert report.quarantined_by_topic == {"orders": 3, "refunds": 2}
    assert report.quarantined_by_stage == {"decode": 2, "parse": 3}
    assert (m["records-in/topic/orders"], m["records-in/topic/refunds"]) == (5, 3)
    assert (m["records-ok/topic/orders"], m["records-ok/topic/refunds"]) == (2, 1)
    assert m["records-quarantined/stage/decode/topic/orders"] == 1
    assert m["records-quarantined/stage/decode/topic/refunds"] == 1
    assert m["records-quarantined/stage/parse/topic/orders"] == 2
    assert m["records-quarantined/stage/parse/topic/refunds"] == 1
    assert not any(OTHER_TOPIC in k for k in m)
    # the observed counts are the quarantine table's own counts
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    counted = q.groupBy("stage", "topic").agg(F.count("*").alias("n")).collect()
    actual = {(r["stage"], r["topic"]): r["n"] for r in counted}
    observed = {tuple(k.split("/")[2::2]): v for k, v in m.items() if k.startswith("records-quarantined/stage/")}
    assert observed == actual


def test_last_error_timestamp_is_the_latest_source_timestamp_of_a_failed_record(spark: Any, table_dir: Path) -> None:
    df = kafka_df(spark, [b"\xff", b'{"order_id":"a","amount":1}', b"{", b'{"order_id":"b","amount":2}'])
    report = _pipeline(spark, table_dir).start_run().process_batch(df, 0)

    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    expected = q.select(F.max(F.unix_millis("timestamp"))).first()[0]  # type: ignore[index]
    assert report.metrics[N.LAST_ERROR_TIMESTAMP] == expected
    # offset 2 (timestamp T0 + 2 s) is the last failure; offset 3 succeeded later
    assert expected == 1_767_225_600_000 + 2_000


def test_run_metrics_add_up_the_batches_of_a_run(spark: Any, table_dir: Path) -> None:
    pipe = _pipeline(spark, table_dir)
    run = pipe.start_run()
    run.process_batch(kafka_df(spark, [b"\xff", b'{"order_id":"a","amount":1}'], topic="orders"), 0)
    run.process_batch(kafka_df(spark, [b"{", b"{", b'{"order_id":"b"}'], topic="refunds", start_offset=10), 1)

    totals = run.metrics
    assert totals.run_id == run.run_id and totals.batches == 2
    assert totals.value(N.RECORDS_IN) == 5
    assert totals.value(N.RECORDS_QUARANTINED) == 3
    assert totals.value(N.RECORDS_QUARANTINED, stage="parse") == 2
    assert totals.value(N.RECORDS_IN, topic="refunds") == 3
    assert totals.value(N.RECORDS_OK) == 2
    # a new run of the same pipeline starts from zero; the first run's totals stay its own
    again = pipe.start_run()
    assert again.run_id != run.run_id and again.metrics.batches == 0 and run.metrics.batches == 2


def test_a_clean_batch_reports_zero_errors_for_every_metric(spark: Any, table_dir: Path) -> None:
    run = _pipeline(spark, table_dir).start_run()
    report = run.process_batch(kafka_df(spark, [b'{"order_id":"a","amount":1}']), 0)
    for metric in MetricNames:
        if metric in (MetricNames.RECORDS_DISCARDED, MetricNames.ALERTS_SENT, MetricNames.ALERTS_UNDELIVERED,
                      MetricNames.ALERTS_HELD):  # a discard's own metric; the alerts' rows of the run
            assert metric.value not in report.metrics
            continue
        assert metric.value in report.metrics
    assert report.metrics[N.RECORDS_OK] == 1
    assert report.metrics[N.TOTAL_RECORD_ERRORS] == 0
    assert report.metrics[N.LAST_ERROR_TIMESTAMP] == 0


@pytest.mark.parametrize("mode", ["row", "vectorized"])
def test_successful_retries_of_a_python_stage_count_in_total_retries(
    spark: Any, table_dir: Path, mode: str
) -> None:
    from tests import fixtures_py_stage as fx

    raw = _config(table_dir, [{"name": "decode", "type": "decode_utf8"}])
    raw["errors"].update({"retry.timeout": 5000, "retry.initial.backoff.ms": 1, "retry.delay.max.ms": 5})
    cfg = parse_config(raw)
    decode = decode_from_spec(cfg.stages[0])
    flaky = python_stage("call", fx.FailFirstCalls(2), "STRING", input="decode", mode=mode,
                         retriable=(fx.TransientError,))
    pipe = Pipeline.from_config(cfg, spark, listeners=[], stages=[decode, flaky])
    run = pipe.start_run()
    # one record: the function object (and its count of calls to fail) is per task
    report = run.process_batch(kafka_df(spark, [b"a"]), 0)
    assert (report.records_ok, report.records_quarantined) == (1, 0)
    assert report.metrics[N.TOTAL_RETRIES] == 2
    assert report.metrics[N.TOTAL_RECORD_FAILURES] == 2  # each failed attempt is a failure


def test_per_topic_counts_without_approx_top_k_are_exact_and_merge_across_partitions(spark: Any) -> None:
    """Spark 4.0 (Databricks Runtime 17.3 LTS) has no ``approx_top_k``: every batch failed
    there with UNRESOLVED_ROUTINE. Its replacement counts items exactly, through
    ``observe`` as the pipeline uses it, with NULLs (rows a CASE WHEN filtered out) left out."""
    from pyspark.sql import Observation

    from quarantine.metrics.columns import _exact_items, _observed_items
    from quarantine.metrics.observed import _items

    topics = ["orders"] * 700 + ["refunds"] * 29 + [None] * 11 + ["a.b-c_d"] * 3 + ["ünï"]
    df = spark.createDataFrame([(t,) for t in topics], "topic STRING").repartition(4)
    obs = Observation("items")
    exact = F.to_json(_exact_items(F.col("topic")))
    observed = _observed_items(F.col("topic"))
    df.observe(obs, exact.alias("t"), observed.alias("u"), F.count(F.lit(1)).alias("n")).collect()
    assert _items(obs.get["t"]) == {"orders": 700, "refunds": 29, "a.b-c_d": 3, "ünï": 1}
    assert _items(obs.get["u"]) == _items(obs.get["t"])  # approx_top_k (Spark 4.1) or the same function (4.0)
    assert obs.get["n"] == len(topics)
