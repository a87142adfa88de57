"""The ``expectation`` stage: row routing from a GX suite, and the runner acting on GX's breaches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from pyspark.sql import functions as F

from quarantine.config import BreachAction, MlflowConfig, StageSpec, parse_config
from quarantine.errors import ConfigError, ExpectationBreachError
from quarantine.expectations.stage import ExpectationStage
from quarantine.listeners.mlflow import MlflowTracker
from quarantine.pipeline import Pipeline
from quarantine.stages import build_stage as from_spec
from tests.helpers import kafka_df

SUITE = str(Path(__file__).resolve().parents[2] / "conf" / "expectations" / "orders.json")
SCHEMA = (
    "order_id STRING, customer_email STRING, amount DOUBLE, currency STRING, "
    "quantity INT, sku STRING, status STRING"
)


def _order(order_id: str | None = "ord-000001", **kw: Any) -> bytes:
    o = {"order_id": order_id, "customer_email": "a@example.com", "amount": 10.5, "currency": "EUR",
         "quantity": 2, "sku": "SKU-0001", "status": "paid"}
    o.update(kw)
    return json.dumps(o, ensure_ascii=False).encode()


VALUES = [
    _order("ord-000001"),                                   # 0 ok
    _order("ord-000002"),                                   # 1 ok
    _order("ord-000003", amount=-5.0, currency="JPY"),      # 2 two failures
    _order("ORD-1"),                                        # 3 regex
    _order("ord-000004", customer_email="ü@exämple.de"),    # 4 ok: unicode email matches
    _order("ord-000005"),                                   # 5 duplicate
    _order("ord-000005"),                                   # 6 duplicate
    b"{",                                                   # 7 fails in parse, not here
    _order("ord-000008", status=None, customer_email=None),  # 8 ok: NULLs are ignored
    _order("ord-000009", sku="abc"),                        # 9 value length
]


def _config(d: Path, on_breach: Any = "warn") -> dict[str, Any]:
    return {
        "pipeline": "expect_test",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": SCHEMA}},
            {"name": "expect", "type": "expectation", "options": {"suite": SUITE, "on_breach": on_breach}},
        ],
    }


def _pipe(spark: Any, d: Path, on_breach: Any = "warn", listeners: list[Any] | None = None) -> Pipeline:
    kafka_df(spark, VALUES).write.format("delta").mode("overwrite").save(str(d / "source"))
    return Pipeline.from_config(parse_config(_config(d, on_breach)), spark, listeners=listeners or [])


def test_rows_failing_translated_expectations_are_routed_with_every_failure(spark: Any, table_dir: Path) -> None:
    pipe = _pipe(spark, table_dir)
    stage = pipe.stages[-1]
    assert isinstance(stage, ExpectationStage)
    assert {e.name for e in stage.untranslated} == {
        "expect_table_row_count_to_be_between", "expect_column_mean_to_be_between:amount"
    }
    out = pipe.transform(kafka_df(spark, VALUES)).select("offset", "parse", "expect").orderBy("offset").collect()
    err = {r["offset"]: r["expect"]["error"] for r in out}
    assert {o for o, e in err.items() if e is not None} == {2, 3, 5, 6, 7, 9}
    # 7 failed upstream: its error is the parse error, carried unchanged
    assert err[7]["stage"] == "parse" and err[7]["kind"] == "deserialize"
    e2 = err[2]
    assert (e2["stage"], e2["kind"]) == ("expect", "expectation")
    assert e2["error_class"] == "expect_column_values_to_be_between"  # first in suite order
    assert e2["message"] == (
        "expect_column_values_to_be_between(column=amount, min_value=0, max_value=10000, mostly=0.99): "
        "found '-5.0'; expect_column_values_to_be_in_set(column=currency, "
        'value_set=["EUR", "USD", "GBP"]): found \'JPY\''
    )
    assert err[3]["error_class"] == "expect_column_values_to_match_regex"
    assert "regex=^ord-[0-9]{6}$): found 'ORD-1'" in err[3]["message"]
    assert err[5]["message"] == (
        "expect_column_values_to_be_unique(column=order_id): found 'ord-000005' (2 times in the batch)"
    )
    assert "(length 3)" in err[9]["message"]
    # the result is the input, unchanged
    ok = {r["offset"]: r for r in out if r["expect"]["error"] is None}
    for o, r in ok.items():
        assert r["expect"]["result"] == r["parse"]["result"], o


def test_warn_breaches_are_reported_and_logged_to_mlflow(spark: Any, table_dir: Path, mlflow_store: str) -> None:
    tracker = MlflowTracker(MlflowConfig(enabled=True, tracking_uri=mlflow_store, experiment="expect"))
    summary = _pipe(spark, table_dir, listeners=[tracker]).run()
    report = summary.batches[0]
    assert (report.records_in, report.records_quarantined, report.records_ok) == (10, 6, 4)
    names = {b.name for b in report.breaches}
    assert "expect_column_values_to_be_between:amount" in names  # 1 of 9 > 1 - mostly
    assert "expect_column_values_to_be_unique:order_id" in names
    assert "expect_column_mean_to_be_between:amount" not in names
    assert all(b.action is BreachAction.WARN for b in report.breaches)
    amount = next(b for b in report.breaches if b.name == "expect_column_values_to_be_between:amount")
    assert "found 1 unexpected of 9 values" in amount.message
    assert amount.details["result"]["unexpected_count"] == 1
    assert any(u.startswith("expect_column_mean_to_be_between:amount") for u in report.untranslated_expectations)
    assert report.quarantined_by_expectation["expect_column_values_to_be_in_set:currency"] == 1
    assert report.quarantined_by_expectation["expect_column_values_to_be_unique:order_id"] == 2
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert q.where(F.col("kind") == "expectation").count() == 5
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 4

    client = MlflowClient(tracking_uri=tracker.tracking_uri)
    run = client.get_run(tracker.mlflow_run_id)
    assert run.data.tags["status"] == "succeeded"
    assert run.data.metrics["quarantined.expectation.expect_column_values_to_be_unique.order_id"] == 2.0
    assert run.data.metrics["tolerance_breaches"] == float(len(report.breaches))
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "breaches/batch-000000")}
    assert "breaches/batch-000000/expect_column_values_to_be_between.amount.json" in arts


def test_fail_breach_fails_the_run_after_the_quarantine_write(spark: Any, table_dir: Path) -> None:
    pipe = _pipe(spark, table_dir, {"default": "warn", "expect_column_values_to_be_between": "fail"})
    with pytest.raises(ExpectationBreachError, match="on_breach=fail") as info:
        pipe.run()
    # quantity is within [1, 1000] everywhere: only amount breaches
    assert [b.name for b in info.value.breaches] == ["expect_column_values_to_be_between:amount"]
    assert spark.read.format("delta").load(str(table_dir / "quarantine")).count() == 6
    assert not (table_dir / "target").exists()


def test_quarantine_batch_breach_sends_every_row_to_quarantine(spark: Any, table_dir: Path) -> None:
    policy = {"default": "warn", "expect_column_values_to_match_regex:order_id": "quarantine_batch"}
    pipe = _pipe(spark, table_dir, policy)
    report = pipe.run().batches[0]
    assert (report.records_quarantined, report.records_ok) == (10, 0)
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert q.count() == 10
    row0 = q.where("offset = 0").first()
    assert row0 is not None and row0["error_class"] == "expect_column_values_to_match_regex"
    assert row0["message"].startswith("whole batch quarantined (on_breach=quarantine_batch)")
    assert row0["value"] == VALUES[0]  # raw bytes kept for rows that passed every stage
    assert q.where("offset = 7").first()["stage"] == "parse"  # its own error wins


@pytest.mark.parametrize(
    ("options", "key", "fragment"),
    [
        ({"suite": SUITE, "on_breach": {"expect_nonsense": "warn"}}, "options.on_breach.expect_nonsense", "keys that"),
        ({"suite": SUITE, "on_breach": {"default": "explode"}}, "options.on_breach.default", "warn | fail"),
        ({"suite": SUITE, "validate_every": 0}, "options.validate_every", "≥ 1"),
        ({"suite": SUITE, "mostly": 1}, "options.mostly", "options"),
        ({"suite": "conf/expectations/missing.json"}, "options.suite", "existing GX suite"),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        from_spec(StageSpec(name="expect", type="expectation", input=None, options=options, index=2))
    assert info.value.key == f"stages[2].{key}"


def test_unknown_expectation_type_fails_at_build_time(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "expectations": [{"type": "expect_the_moon", "kwargs": {}}]}))
    with pytest.raises(ConfigError, match="expect_the_moon"):
        from_spec(StageSpec(name="e", type="expectation", input=None, options={"suite": str(bad)}, index=0))


def test_unique_counts_the_value_alone_and_never_shuffles_the_raw_bytes(spark: Any, table_dir: Path) -> None:
    """``unique`` aggregates the checked value alone and joins the repeated ones back
    (broadcast): no shuffle of the batch with its raw key/value/headers, no window."""
    pipe = _pipe(spark, table_dir)
    staged = pipe.transform(kafka_df(spark, VALUES))
    plan = staged._jdf.queryExecution().executedPlan().toString()
    assert "Window" not in plan
    assert "BroadcastHashJoin" in plan
    shuffles = [ln for ln in plan.splitlines() if "Exchange hashpartitioning" in ln]
    assert shuffles and all("value" not in ln.split("hashpartitioning", 1)[1] for ln in shuffles), shuffles
    err = {r["offset"]: r["expect"]["error"] for r in staged.select("offset", "expect").collect()}
    assert {o for o, e in err.items() if e is not None and e["error_class"].endswith("unique")} == {5, 6}
    assert "(2 times in the batch)" in err[5]["message"]


def test_a_kafka_stream_with_unique_is_staged_per_micro_batch(spark: Any, table_dir: Path) -> None:
    """A batch-wide count cannot be taken over a streaming DataFrame: a Kafka stream
    whose suite has ``unique`` is staged per micro-batch instead of once per query."""
    cfg = _config(table_dir)
    cfg["source"] = {"format": "kafka", "bootstrap.servers": "localhost:1", "topics": ["t"], "streaming": True}
    cfg["target"]["checkpoint"] = str(table_dir / "checkpoint")
    pipe = Pipeline.from_config(parse_config(cfg), spark, listeners=[])
    kafka_df(spark, VALUES).write.format("delta").save(str(table_dir / "src"))
    stream = spark.readStream.format("delta").load(str(table_dir / "src"))
    assert pipe.stage_stream(stream) is None
    cfg["stages"] = cfg["stages"][:2]
    plain = Pipeline.from_config(parse_config(cfg), spark, listeners=[])
    staged = plain.stage_stream(stream)
    assert staged is not None and staged.isStreaming
