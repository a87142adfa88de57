"""Loading the errors.* keys: every key parses; bad keys, values and retry settings fail at load.

Every failure is a ConfigError naming the key, the value found and what is allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quarantine.config import (
    ErrorsConfig,
    RateDuration,
    Tolerance,
    load_config,
    parse_config,
)
from quarantine.errors import ConfigError


def _raw(tmp: Path | None = None, **errors: Any) -> dict[str, Any]:
    base = Path("/data") if tmp is None else tmp
    return {
        "pipeline": "orders",
        "source": {"format": "delta", "path": str(base / "source")},
        "target": {"table": str(base / "target")},
        "errors": {"deadletterqueue.table.name": str(base / "quarantine"), **errors},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }


EVERY_KEY: dict[str, Any] = {
    "tolerance": "all",
    "tolerance.limit": 100,
    "tolerance.rate.limit": 10,
    "tolerance.rate.duration": "hour",
    "retry.timeout": 30000,
    "retry.delay.max.ms": 5000,
    "retry.initial.backoff.ms": 100,
    "retry.backoff.multiplier": 3,
    "retry.jitter.factor": 0.5,
    "retry.retriable.exceptions": ["TimeoutError", "delta.exceptions.ConcurrentAppendException"],
    "log.enable": True,
    "log.include.messages": "true",
    "log.include.configs": False,
    "deadletterqueue.context.stacktrace.enable": True,
    "handler.deserialize": "log_and_continue",
    "handler.transform": "fail",
    "handler.validate": "continue",
    "handler.expectation": "my_pkg.handlers.Strict",
    "handler.sink": "continue",
}


def test_every_errors_key_is_loaded_into_its_field() -> None:
    e = parse_config(_raw(**EVERY_KEY)).errors
    assert e.tolerance is Tolerance.ALL
    assert (e.tolerance_limit, e.tolerance_rate_limit) == (100, 10)
    assert e.tolerance_rate_duration is RateDuration.HOUR
    assert (e.retry_timeout_ms, e.retry_delay_max_ms, e.retry_initial_backoff_ms) == (30000, 5000, 100)
    assert (e.retry_backoff_multiplier, e.retry_jitter_factor) == (3.0, 0.5)
    assert e.retry_retriable == ("TimeoutError", "delta.exceptions.ConcurrentAppendException")
    assert (e.log_enable, e.log_include_messages, e.log_include_configs) == (True, True, False)
    assert e.dlq_context_stacktrace_enable is True
    assert e.dlq_table_name == "/data/quarantine"
    assert dict(e.handlers) == {
        "deserialize": "log_and_continue", "transform": "fail", "validate": "continue",
        "expectation": "my_pkg.handlers.Strict", "sink": "continue",
    }


def test_defaults_are_kafkas() -> None:
    e = parse_config(_raw()).errors
    assert e.tolerance is Tolerance.NONE
    assert (e.tolerance_limit, e.tolerance_rate_limit) == (-1, -1)
    assert e.retry_timeout_ms == 0 and e.retry_delay_max_ms == 60000
    assert (e.log_enable, e.log_include_messages, e.log_include_configs) == (False, False, False)
    assert e.dlq_context_stacktrace_enable is False
    assert dict(e.handlers) == {}


def test_flat_top_level_errors_keys_are_accepted() -> None:
    raw = _raw()
    raw["errors.tolerance"] = "all"
    raw["errors.retry.timeout"] = -1
    e = parse_config(raw).errors
    assert e.tolerance is Tolerance.ALL and e.retry_timeout_ms == -1


def test_yaml_file_and_overrides(tmp_path: Path) -> None:
    conf = tmp_path / "p.yml"
    conf.write_text(
        "pipeline: orders\n"
        "source: {format: delta, path: /d/source}\n"
        "target: {table: /d/target}\n"
        "errors:\n"
        "  tolerance: all\n"
        "  deadletterqueue.table.name: /d/quarantine\n"
        "  retry.timeout: 1000\n"
        "stages:\n  - {name: decode, type: decode_utf8}\n",
        encoding="utf-8",
    )
    cfg = load_config(conf, {"errors.tolerance.limit": 5, "errors.retry.jitter.factor": "0"})
    assert cfg.errors.tolerance_limit == 5 and cfg.errors.retry_jitter_factor == 0.0
    assert cfg.errors.retry_timeout_ms == 1000
    with pytest.raises(ConfigError) as info:
        load_config(conf, {"errors.retry.multiplier": 2})
    assert info.value.key == "errors.retry.multiplier"


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("tolerance", "some", "none | all"),
        ("tolerance.limit", -2, "-1 (unlimited)"),
        ("tolerance.limit", "many", "an integer"),
        ("tolerance.limit", 1.5, "an integer"),
        ("tolerance.limit", True, "an integer"),
        ("tolerance.rate.limit", -5, "-1 (unlimited)"),
        ("tolerance.rate.duration", "week", "minute | hour | day"),
        ("retry.timeout", -3, "-1 (unlimited)"),
        ("retry.timeout", "soon", "an integer"),
        ("retry.delay.max.ms", -1, "an integer ≥ 0"),
        ("retry.initial.backoff.ms", -10, "an integer ≥ 0"),
        ("retry.backoff.multiplier", 0.5, "[1.0, inf]"),
        ("retry.backoff.multiplier", "fast", "a number"),
        ("retry.jitter.factor", 1.5, "[0.0, 1.0]"),
        ("retry.jitter.factor", -0.1, "[0.0, 1.0]"),
        ("retry.retriable.exceptions", 42, "a list of exception class names"),
        ("retry.retriable.exceptions", ["not a class"], "an exception class name"),
        ("log.enable", "yes", "true | false"),
        ("log.include.messages", 1, "true | false"),
        ("log.include.configs", "on", "true | false"),
        ("deadletterqueue.context.stacktrace.enable", "maybe", "true | false"),
        ("deadletterqueue.table.name", "", "a non-empty string"),
        ("handler.deserialize", "skip", "continue | fail | log_and_continue"),
        ("handler.metrics", "continue", "known key"),
        ("retries.limit", 3, "known key"),
        ("tolerance.limt", 3, "did you mean 'errors.tolerance.limit'?"),
    ],
)
def test_bad_value_or_key_names_key_value_and_allowed(key: str, value: Any, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_raw(**{key: value}))
    err = info.value
    assert err.key == f"errors.{key}"
    assert err.value == value or (isinstance(value, list) and err.value in value)
    assert allowed in err.allowed
    assert f"'errors.{key}'" in str(err) and allowed in str(err)


def test_initial_backoff_above_max_delay_is_inconsistent() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_raw(**{"retry.initial.backoff.ms": 5000, "retry.delay.max.ms": 1000}))
    err = info.value
    assert err.key == "errors.retry.initial.backoff.ms" and err.value == 5000
    assert "errors.retry.delay.max.ms (1000)" in err.allowed


def test_initial_backoff_above_the_default_max_delay_is_inconsistent() -> None:
    with pytest.raises(ConfigError, match=r"≤ errors\.retry\.delay\.max\.ms \(60000\)"):
        parse_config(_raw(**{"retry.initial.backoff.ms": 60001}))


def test_equal_initial_and_max_and_edge_values_are_allowed() -> None:
    e = parse_config(
        _raw(**{
            "retry.initial.backoff.ms": 0, "retry.delay.max.ms": 0, "retry.backoff.multiplier": 1,
            "retry.jitter.factor": 1, "tolerance.limit": 0, "tolerance.rate.limit": 0,
        })
    ).errors
    assert (e.retry_initial_backoff_ms, e.retry_delay_max_ms) == (0, 0)
    assert (e.retry_backoff_multiplier, e.retry_jitter_factor) == (1.0, 1.0)
    assert (e.tolerance_limit, e.tolerance_rate_limit) == (0, 0)


def test_missing_quarantine_table_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        ErrorsConfig.from_mapping({"tolerance": "all"})
    assert info.value.key == "errors.deadletterqueue.table.name"


def test_quarantine_table_must_not_be_the_source_or_target() -> None:
    raw = _raw()
    raw["errors"]["deadletterqueue.table.name"] = "/data/source/"
    with pytest.raises(ConfigError, match="never be the source"):
        parse_config(raw)
    raw["errors"]["deadletterqueue.table.name"] = "/DATA/target"
    with pytest.raises(ConfigError, match=r"other than target\.table"):
        parse_config(raw)


def test_retriable_exceptions_accept_a_comma_separated_string() -> None:
    e = parse_config(_raw(**{"retry.retriable.exceptions": "TimeoutError, ConnectionError"})).errors
    assert e.retry_retriable == ("TimeoutError", "ConnectionError")


@pytest.mark.parametrize(
    ("section", "key", "value", "other_key"),
    [
        ("metrics", "table", "/data/target", "target.table"),
        ("metrics", "table", "/data/quarantine/", "errors.deadletterqueue.table.name"),
        ("metrics", "table", "/data/source", "source.path"),
        ("target", "table", "/DATA/source", "source.path"),
        ("metrics", "table", "/data/quarantine_tolerance", "errors.deadletterqueue.table.name (its _tolerance"),
        ("target", "table", "/data/quarantine_tolerance", "errors.deadletterqueue.table.name (its _tolerance"),
    ],
)
def test_every_pair_of_tables_that_must_differ_is_rejected_at_load_naming_both_keys(
    section: str, key: str, value: str, other_key: str
) -> None:
    raw = _raw(**{"tolerance.rate.limit": 5})
    raw.setdefault(section, {})[key] = value
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    text = str(info.value)
    assert f"{section}.{key}" in text and other_key in text


def test_a_catalog_target_equal_to_a_catalog_source_is_rejected() -> None:
    raw = _raw()
    raw["source"] = {"format": "delta", "table": "main.raw.orders"}
    raw["target"] = {"table": "Main.Raw.Orders"}
    with pytest.raises(ConfigError, match=r"target\.table.*source\.table"):
        parse_config(raw)
