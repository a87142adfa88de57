"""Suite parsing, translation coverage decisions, breach policy and MLflow naming — no Spark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from quarantine.config import BreachAction, MlflowConfig, parse_config
from quarantine.errorhandling.breach import Breach
from quarantine.errors import ConfigError
from quarantine.expectations import BreachPolicy, load_suite, parse_suite, untranslated_reason
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.listeners.mlflow import NoopTracker, flatten_params, mlflow_metrics, resolve_tracking_uri, tracker_for

ORDERS = Path(__file__).resolve().parents[2] / "conf" / "expectations" / "orders.json"


def test_demo_suite_loads_with_unique_names_and_readable_labels() -> None:
    suite = load_suite(ORDERS)
    names = [e.name for e in suite.expectations]
    assert len(names) == len(set(names)) == 11
    assert "expect_column_values_to_match_regex:order_id" in names
    between = suite.by_name("expect_column_values_to_be_between:amount")
    assert between.mostly == 0.99
    assert between.describe() == (
        "expect_column_values_to_be_between(column=amount, min_value=0, max_value=10000, mostly=0.99)"
    )


def test_repeated_expectations_get_numbered_names_and_legacy_key_is_accepted() -> None:
    suite = parse_suite({
        "expectation_suite_name": "s",
        "expectations": [
            {"expectation_type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}},
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}},
        ],
    })
    assert [e.name for e in suite.expectations] == [
        "expect_column_values_to_not_be_null:a", "expect_column_values_to_not_be_null:a#2"
    ]


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"expectations": []}, "x.json: name"),
        ({"name": "s", "expectations": {}}, "x.json: expectations"),
        ({"name": "s", "expectations": [{"type": "be_good"}]}, "x.json: expectations[0].type"),
        ({"name": "s", "expectations": [{"type": "expect_x", "kwargs": []}]}, "x.json: expectations[0].kwargs"),
    ],
)
def test_bad_suites_name_the_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_suite(raw, source="x.json")
    assert info.value.key == key


@pytest.mark.parametrize(
    ("etype", "kwargs", "reason"),
    [
        ("expect_column_values_to_not_be_null", {"column": "a"}, None),
        ("expect_column_mean_to_be_between", {"column": "a", "min_value": 1}, "not a translated"),
        ("expect_column_values_to_be_between", {"column": "a"}, "neither min_value nor max_value"),
        ("expect_column_values_to_be_between", {"column": "a", "min_value": 5, "max_value": 1},
         "min_value > max_value"),
        ("expect_column_values_to_be_in_set", {"column": "a", "value_set": [1], "row_condition": "b>1"},
         "row_condition"),
        ("expect_column_values_to_be_in_set", {"column": "a", "value_set": {"$PARAMETER": "x"}}, "$PARAMETER"),
        ("expect_column_values_to_be_of_type", {"column": "a", "type_": "VarcharType"}, "type_ 'VarcharType'"),
        ("expect_column_values_to_match_regex", {"column": "a"}, "missing argument 'regex'"),
    ],
)
def test_untranslated_reasons(etype: str, kwargs: dict[str, object], reason: str | None) -> None:
    spec = parse_suite({"name": "s", "expectations": [{"type": etype, "kwargs": kwargs}]}).expectations[0]
    got = untranslated_reason(spec)
    assert (got is None) if reason is None else (got is not None and reason in got)


def test_breach_policy_name_beats_type_beats_default() -> None:
    suite = load_suite(ORDERS)
    policy = BreachPolicy(
        default=BreachAction.WARN,
        overrides={
            "expect_column_values_to_match_regex": BreachAction.FAIL,
            "expect_column_values_to_match_regex:order_id": BreachAction.QUARANTINE_BATCH,
        },
    )
    order_id = suite.by_name("expect_column_values_to_match_regex:order_id")
    assert policy.action_for(order_id) is BreachAction.QUARANTINE_BATCH
    assert policy.action_for(suite.by_name("expect_column_values_to_match_regex:customer_email")) is BreachAction.FAIL
    assert policy.action_for(suite.by_name("expect_column_values_to_be_unique:order_id")) is BreachAction.WARN


def test_params_are_flat_redacted_and_within_mlflow_limits() -> None:
    params = flatten_params({"source": {"options": {"kafka.sasl.jaas.config": "[redacted]"}}, "stages": [
        {"name": "a", "options": {"schema": "x" * 7000}}], "empty": {}})
    assert params["source.options.kafka.sasl.jaas.config"] == "[redacted]"
    assert len(params["stages.0.options.schema"]) == 6000
    assert params["stages.0.name"] == "a" and params["empty"] == "{}"


def test_mlflow_metrics_names() -> None:
    run = RunInfo("p", "r", "orders", {}, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    report = BatchReport(
        run=run, batch_id=3, records_in=10, records_ok=7, records_quarantined=3,
        quarantined_by_stage={"parse": 2, "expect": 1}, quarantined_by_topic={"orders": 3},
        quarantined_by_expectation={"expect_column_values_to_be_unique:order_id": 1},
        metrics={"total-record-failures": 3.0, "records-in/topic/orders": 10.0},
        breaches=(Breach("expect_column_mean_to_be_between:amount", BreachAction.WARN, "m"),),
    )
    m = mlflow_metrics(report)
    assert m["records_in"] == 10 and m["records_ok"] == 7 and m["records_quarantined"] == 3
    assert m["quarantined.stage.parse"] == 2 and m["quarantined.topic.orders"] == 3
    assert m["quarantined.expectation.expect_column_values_to_be_unique.order_id"] == 1
    assert m["tolerance_breaches"] == 1 and m["tolerance_breaches.warn"] == 1
    assert m["total-record-failures"] == 3 and m["records-in/topic/orders"] == 10


def test_disabled_mlflow_is_a_noop_listener_and_local_default_is_sqlite() -> None:
    cfg = parse_config({
        "pipeline": "p", "source": {"format": "delta", "path": "/tmp/src"}, "target": {"table": "/tmp/t"},
        "errors": {"deadletterqueue.table.name": "/tmp/q"}, "stages": [{"name": "d", "type": "decode_utf8"}],
    })
    assert isinstance(tracker_for(cfg), NoopTracker)
    # the working folder's mlflow.db, named absolutely (tests/e2e/test_mlflow_store.py: why)
    assert resolve_tracking_uri(MlflowConfig(enabled=True)) == f"sqlite:///{Path.cwd() / 'mlflow.db'}"
    assert resolve_tracking_uri(MlflowConfig(enabled=True, tracking_uri="sqlite:////abs/m.db")) == "sqlite:////abs/m.db"
    assert resolve_tracking_uri(MlflowConfig(enabled=True, tracking_uri="http://h:5000")) == "http://h:5000"


def test_tracker_with_unreachable_server_keeps_buffer_max_points_and_counts_drops() -> None:
    from quarantine.listeners.mlflow import MlflowTracker

    # port 9 on loopback: nothing listens, connections are refused at once
    tracker = MlflowTracker(
        MlflowConfig(enabled=True, tracking_uri="http://127.0.0.1:9", buffer_max=5, http_timeout_s=1),
        reconnect_interval_s=0.0,
    )
    run = RunInfo("p", "r" * 32, "orders", {"a": 1}, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    tracker.on_run_start(run)
    assert not tracker.available and tracker.mlflow_run_id is None
    report = BatchReport(run=run, batch_id=0, records_in=3, records_ok=2, records_quarantined=1)
    tracker.on_batch(report)
    n = len(mlflow_metrics(report))
    assert (tracker.buffered_points, tracker.dropped_points) == (5, n - 5)
    tracker.on_run_end(run, RunStatus.SUCCEEDED, None)
    assert (tracker.buffered_points, tracker.dropped_points) == (0, n)
