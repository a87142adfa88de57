"""The config objects as the rest of the package uses them: frozen, built from YAML or in Python,
every failure a ConfigError naming the full key; stages checked at load by type and options.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import (
    ErrorsConfig,
    MlflowConfig,
    PipelineConfig,
    SourceConfig,
    StageSpec,
    Tolerance,
    TriggerConfig,
    TriggerKind,
    parse_config,
)
from quarantine.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SUITE = str(REPO / "conf" / "expectations" / "orders.json")
SECRET = "hunter2-canary-0xC0FFEE"


def _raw(*stages: dict[str, Any], **sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pipeline": "orders",
        "source": {"format": "delta", "path": "/data/source"},
        "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": "/data/quarantine"},
        "stages": list(stages) or [{"name": "decode", "type": "decode_utf8"}],
    }
    raw.update(sections)
    return raw


def _error(raw: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return info.value


# --------------------------------------------------------------------------- the objects


def test_loaded_objects_are_frozen_and_their_mappings_read_only() -> None:
    raw = _raw(source={"format": "delta", "path": "/data/source", "options": {"maxFilesPerTrigger": 5}})
    cfg = parse_config(raw)
    with pytest.raises(Exception, match="frozen"):
        cfg.pipeline = "other"  # type: ignore[misc]
    with pytest.raises(Exception, match="frozen"):
        cfg.errors.tolerance = Tolerance.ALL  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.source.options["maxFilesPerTrigger"] = "6"  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.stages[0].options["nullable"] = True  # type: ignore[index]
    assert cfg.source.options == {"maxFilesPerTrigger": "5"}
    assert cfg.pipeline == "orders"


def test_python_construction_takes_attribute_names_and_stage_specs_positionally() -> None:
    errors = ErrorsConfig(dlq_table_name="q", retry_timeout_ms=-1, retry_delay_max_ms=50)
    assert (errors.retry_timeout_ms, errors.retry_initial_backoff_ms) == (-1, 50)  # 300 ms first delay, capped
    assert MlflowConfig(enabled=True, buffer_max=5).buffer_max == 5
    spec = StageSpec("parse", "json", None, {"schema": "a INT"}, 3)
    assert (spec.name, spec.type, spec.input, dict(spec.options), spec.index) == ("parse", "json", None,
                                                                                 {"schema": "a INT"}, 3)
    assert spec.key("options.schema") == "stages[3].options.schema"
    assert StageSpec(name="d", type="decode_utf8", input="key", options={}, index=0).input == "key"


def test_yaml_takes_only_the_kafka_names() -> None:
    err = _error(_raw(errors={"deadletterqueue.table.name": "/q", "retry_timeout_ms": 5}))
    assert err.key == "errors.retry_timeout_ms"
    assert "did you mean 'errors.retry.timeout'?" in err.allowed


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: ErrorsConfig(dlq_table_name="q", retry_timeout_ms="soon"), "errors.retry_timeout_ms"),
        (lambda: MlflowConfig(enabled="maybe"), "mlflow.enabled"),
        (lambda: SourceConfig.from_mapping({"format": "kafka", "topics": ["t"]}), "source.bootstrap.servers"),
        (lambda: TriggerConfig.from_value({"processing_time": "often"}), "trigger.processing_time"),
        (lambda: StageSpec("a b", "json"), "stages.name"),
    ],
)
def test_every_way_of_building_fails_with_a_config_error_naming_the_key(build: Any, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.key == key


def test_the_handlers_mapping_holds_the_configured_kinds_only() -> None:
    e = ErrorsConfig.from_mapping({"deadletterqueue.table.name": "q", "handler.sink": "fail"})
    assert dict(e.handlers) == {"sink": "fail"}


def test_trigger_forms() -> None:
    assert TriggerConfig.from_value(None).kind is TriggerKind.AVAILABLE_NOW
    assert TriggerConfig.from_value({"available_now": True}).kind is TriggerKind.AVAILABLE_NOW
    every = TriggerConfig.from_value({"processing_time": " 5 seconds "})
    assert (every.kind, every.interval) == (TriggerKind.PROCESSING_TIME, "5 seconds")
    assert parse_config(_raw(trigger={"processing_time": "1 minute"})).trigger.interval == "1 minute"


def test_empty_sections_read_as_empty_and_flat_errors_keys_fold_into_errors() -> None:
    raw = _raw(metrics=None, mlflow=None, spark=None)
    del raw["errors"]
    raw["errors.deadletterqueue.table.name"] = "/data/q"
    raw["errors.tolerance"] = "all"
    cfg = parse_config(raw)
    assert (cfg.metrics.table, cfg.mlflow.enabled, dict(cfg.spark_conf)) == (None, False, {})
    assert (cfg.errors.dlq_table_name, cfg.errors.tolerance) == ("/data/q", Tolerance.ALL)
    assert cfg.raw["errors"] == {"deadletterqueue.table.name": "/data/q", "tolerance": "all"}


def test_spark_conf_values_are_strings() -> None:
    cfg = parse_config(_raw(spark={"conf": {"spark.sql.shuffle.partitions": 8, "spark.x": True}}))
    assert dict(cfg.spark_conf) == {"spark.sql.shuffle.partitions": "8", "spark.x": "True"}


@pytest.mark.parametrize("internal", ["raw", "base_dir", "spark_conf"])
def test_attributes_set_by_the_loader_are_not_config_keys(internal: str) -> None:
    assert isinstance(parse_config(_raw()), PipelineConfig)
    with pytest.raises(ConfigError) as info:
        parse_config(_raw(**{internal: {"a": 1}}))
    assert info.value.key == internal


# --------------------------------------------------------------------------- stages at load


@pytest.mark.parametrize(
    ("stage", "key", "allowed"),
    [
        (
            {"name": "a", "type": "jsonn"}, "stages[0].type",
            "decode_utf8, avro, protobuf, json, cast, checks, python, expectation",
        ),
        ({"name": "a"}, "stages[0].type", "one of decode_utf8"),
        ("decode", "stages[0]", "a mapping"),
        ({"name": "a", "type": "json", "options": {"schema": "a INT", "requird": ["a"]}},
         "stages[0].options.requird", "did you mean 'stages[0].options.required'?"),
        ({"name": "a", "type": "json"}, "stages[0].options", "required key"),
        ({"name": "a", "type": "decode_utf8", "options": {"nullable": "maybe"}},
         "stages[0].options.nullable", "true | false"),
        ({"name": "a", "type": "cast", "options": {"columns": {}}}, "stages[0].options.columns", "non-empty"),
        ({"name": "a", "type": "checks", "options": {"rules": []}}, "stages[0].options.rules", "non-empty"),
        ({"name": "a", "type": "checks", "options": {"rules": [{"column": "x", "check": "between"}]}},
         "stages[0].options.rules[0].check", "one of not_null, range"),
        ({"name": "a", "type": "checks", "options": {"rules": [{"column": "x", "check": "range", "minimum": 1}]}},
         "stages[0].options.rules[0].minimum", "known key"),
        ({"name": "a", "type": "checks", "options": {"rules": [{"check": "in_set", "values": []}]}},
         "stages[0].options.rules[0].values", "a non-empty list"),
        ({"name": "a", "type": "python", "options": {"function": "m.f", "returns": "INT", "mode": "batch"}},
         "stages[0].options.mode", "row | vectorized"),
        ({"name": "a", "type": "expectation", "options": {"suite": SUITE, "on_breach": "explode"}},
         "stages[0].options.on_breach", "warn | fail | quarantine_batch"),
        ({"name": "a", "type": "expectation", "options": {"suite": SUITE, "validate_every": 0}},
         "stages[0].options.validate_every", "≥ 1"),
    ],
)
def test_stage_types_option_names_and_shapes_fail_at_load_naming_the_key(stage: Any, key: str, allowed: str) -> None:
    err = _error(_raw(stage))
    assert err.key == key
    assert allowed in err.allowed, err


def test_the_second_stage_is_named_by_its_index() -> None:
    err = _error(_raw({"name": "a", "type": "decode_utf8"}, {"name": "b", "type": "cast", "options": {"cols": {}}}))
    assert err.key == "stages[1].options.cols"


def test_loaded_stage_specs_keep_the_options_as_written() -> None:
    rules = [{"column": "amount", "check": "range", "min": "0", "max": 10, "min_inclusive": False}]
    cfg = parse_config(_raw({"name": "check", "type": " checks ", "input": "", "options": {"rules": rules}}))
    (spec,) = cfg.stages
    assert (spec.name, spec.type, spec.input, spec.index) == ("check", "checks", None, 0)
    assert spec.options == {"rules": rules}


# --------------------------------------------------------------------------- secrets


BAD_WITH_SECRETS = [
    pytest.param({"source": {"format": "delta", "path": "/s", "options": {"kafka.sasl.password": SECRET},
                             "streaming": "perhaps"}}, id="bad-value-next-to-a-secret"),
    pytest.param({"source": {"format": "delta", "path": "/s", "password": SECRET}}, id="unknown-secret-key"),
    pytest.param({"mlflow": {"tracking_uri": f"https://user:{SECRET}@host", "enabled": 3}}, id="secret-uri"),
    pytest.param({"stages": [{"name": "p", "type": "python",
                              "options": {"function": "m.f", "returns": "INT", "api_key": SECRET}}]},
                 id="secret-stage-option"),
    pytest.param({"stages": [{"name": "p", "type": "python", "token": SECRET}]}, id="secret-stage-key"),
    pytest.param({"spark": {"conf": {"fs.azure.account.key.a": SECRET}, "hadoop": {"secret": SECRET}}},
                 id="secret-under-unknown-section"),
    pytest.param({"errors": {"deadletterqueue.table.name": "/q", "sasl.jaas.config": f'password="{SECRET}"'}},
                 id="secret-unknown-errors-key"),
]


@pytest.mark.parametrize("sections", BAD_WITH_SECRETS)
def test_no_error_message_shows_a_configured_secret(sections: dict[str, Any]) -> None:
    raw = _raw(**copy.deepcopy(sections))
    err = _error(raw)
    assert SECRET not in str(err), str(err)
    assert err.key  # names the key


# --------------------------------------------------------------------------- stage options vs stage modules


def test_every_declared_option_builds_without_spark_where_the_stage_needs_none() -> None:
    """The options the loader accepts are accepted by the stage modules (json needs Spark: left out)."""
    from quarantine.stages import build_stages

    cfg = parse_config(_raw(
        {"name": "decode", "type": "decode_utf8", "options": {"nullable": True}},
        # the fields the next stages read (a cast of a string's field would fail at load: quarantine.lineage)
        {"name": "fields", "type": "python", "options": {
            "function": "tests.fixtures_py_stage.split_name", "returns": "STRUCT<at: STRING, a: STRING>"}},
        {"name": "convert", "type": "cast", "options": {"columns": {"at": "TIMESTAMP"}, "formats": {"at": "yyyy"}}},
        {"name": "check", "type": "checks", "options": {"rules": [
            {"column": "a", "check": "not_null"},
            {"column": "a", "check": "range", "min": 0, "max": 9, "min_inclusive": False, "max_inclusive": True},
            {"column": "a", "check": "in_set", "values": ["x", 1, True]},
            {"column": "a", "check": "not_in_set", "values": [2.5]},
            {"column": "a", "check": "regex", "pattern": "[a-z]+", "match": "search"},
            {"column": "a", "check": "length", "min": 1, "max": 3},
            {"check": "expr", "expr": "a IS NOT NULL"},
        ]}},
        {"name": "py", "type": "python", "options": {
            "function": "tests.fixtures_py_stage.parse_amount", "returns": "DOUBLE", "mode": "vectorized",
            "nullable": True, "retriable": ["TimeoutError"]}},
        {"name": "expect", "type": "expectation", "options": {
            "suite": SUITE, "on_breach": {"default": "warn", "expect_column_mean_to_be_between": "fail"},
            "validate_every": 2}},
    ))
    assert [s.name for s in build_stages(cfg.stages)] == ["decode", "fields", "convert", "check", "py", "expect"]
