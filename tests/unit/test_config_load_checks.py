"""What a config load refuses, naming the key, without Spark (issue 34, "What validate must know").

Each of these used to load and then fail a run (or quarantine every record) with a
message that named no config key: a table name Spark cannot parse, a ``range`` bound
that is neither a number nor a date/time, a misspelt key (answered with every known
key), a YAML error (named ``<unicode string>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quarantine.config import load_config, parse_config
from quarantine.errors import ConfigError


def _raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pipeline": "orders",
        "source": {"format": "delta", "path": "/data/source"},
        "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": "/data/quarantine"},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": "id STRING, qty INT"}},
        ],
    }
    raw.update(changes)
    return raw


def _error(raw: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    return info.value


# --------------------------------------------------------------------------- table names


def _error_naming(section: str, key: str, name: str) -> ConfigError:
    """The error of a config whose ``section.key`` table is ``name``; it must name that key and value."""
    raw = _raw()
    if section == "source":
        raw["source"] = {"format": "delta", "table": name}
    else:
        raw[section] = {**raw.get(section, {}), key: name}
    e = _error(raw)
    assert e.key == f"{section}.{key}" and e.value == name
    return e


@pytest.mark.parametrize(("section", "key", "name"), [
    ("target", "table", "my target"),
    ("errors", "deadletterqueue.table.name", "quarantine table"),
    ("metrics", "table", "main.ops.my-metrics"),
    ("source", "table", "main.raw.orders raw"),
])
def test_a_table_name_that_is_neither_an_identifier_nor_a_path_is_refused_naming_the_key(
    section: str, key: str, name: str
) -> None:
    e = _error_naming(section, key, name)
    assert "catalog.schema.table" in e.allowed and "backquote" in e.allowed and "path" in e.allowed


@pytest.mark.parametrize(("section", "key", "name"), [
    ("target", "table", "default.`orders-t`"),
    ("errors", "deadletterqueue.table.name", "spark_catalog.default.`q t`"),
    ("metrics", "table", "`ops-metrics`"),
    ("source", "table", "hive_metastore.raw.`orders-raw`"),
])
def test_a_back_quoted_name_spark_s_session_catalog_cannot_hold_is_refused_naming_the_key(
    section: str, key: str, name: str
) -> None:
    # one or two parts, spark_catalog.… or hive_metastore.…: Spark's session catalog, which
    # refuses other characters than letters, digits and _ once Delta has written the files
    e = _error_naming(section, key, name)
    assert "Unity Catalog name only" in e.allowed and "letters, digits and _ only" in e.allowed


@pytest.mark.parametrize("name", [
    "orders", "main.raw.orders", "`main`.`raw`.`my orders`", "main.raw.`orders-2026`", "spark_catalog.db.t1",
    "default.`orders_t`", "`spark_catalog`.`default`.`q_t`", "main.raw.`my.orders`",
    "/data/target", "data/target", "s3://bucket/target", "dbfs:/mnt/target",
])
def test_identifiers_with_optional_backquotes_and_paths_are_table_names(name: str) -> None:
    assert parse_config(_raw(target={"table": name})).target.table.endswith(name.split("/")[-1])


# --------------------------------------------------------------------------- range bounds


def _range(**bounds: Any) -> dict[str, Any]:
    rule = {"column": "qty", "check": "range", **bounds}
    return _raw(stages=[*_raw()["stages"], {"name": "check", "type": "checks", "options": {"rules": [rule]}}])


def test_a_range_bound_that_is_neither_a_number_nor_a_date_is_refused_at_load_naming_the_key() -> None:
    e = _error(_range(min=0, max="ten thousand"))
    assert e.key == "stages[2].options.rules[0].max" and e.value == "ten thousand"
    assert "number" in e.allowed and "date" in e.allowed


def test_a_range_without_bounds_is_refused_at_load_naming_min() -> None:
    e = _error(_range())
    assert (e.key, e.value) == ("stages[2].options.rules[0].min", None)
    assert e.allowed == "a min and/or a max for a range check"


def test_a_range_whose_min_is_above_its_max_is_refused_at_load() -> None:
    e = _error(_range(min=5, max=1))
    assert (e.key, e.value, e.allowed) == ("stages[2].options.rules[0].min", 5, "a value <= max (1)")


@pytest.mark.parametrize("bound", [10, 2.5, "10", "-1e3", "2026-01-31", "2026-01-31 12:00:00", "2026-01-31T12:00:00Z",
                                   "2026-01-31 12:00:00.123+01:00"])
def test_numbers_and_dates_and_times_are_range_bounds(bound: Any) -> None:
    rule = parse_config(_range(max=bound)).stages[2].options["rules"][0]
    assert rule["max"] == bound


# --------------------------------------------------------------------------- unknown keys, YAML


def test_an_unknown_key_names_the_nearest_known_key_instead_of_all_of_them() -> None:
    e = _error(_raw(errors={"deadletterqueue.table.name": "/data/q", "tolerence": "all"}))
    assert e.key == "errors.tolerence"
    assert "did you mean 'errors.tolerance'?" in e.allowed and "retry.timeout" not in e.allowed


def test_an_unknown_top_level_flat_errors_key_names_the_nearest_one() -> None:
    raw = _raw(**{"errors.tolerence": "all"})
    e = _error(raw)
    assert e.key == "errors.tolerence" and "did you mean 'errors.tolerance'?" in e.allowed


def test_an_unknown_stage_option_names_the_nearest_option() -> None:
    raw = _raw()
    raw["stages"][1]["options"] = {"schema": "id STRING", "requird": ["id"]}
    e = _error(raw)
    assert e.key == "stages[1].options.requird" and "did you mean 'stages[1].options.required'?" in e.allowed


def test_an_attribute_name_in_yaml_names_its_yaml_key() -> None:
    e = _error(_raw(errors={"deadletterqueue.table.name": "/data/q", "retry_timeout_ms": 5}))
    assert e.key == "errors.retry_timeout_ms" and "did you mean 'errors.retry.timeout'?" in e.allowed


def test_a_key_like_no_known_one_still_lists_the_known_keys() -> None:
    e = _error(_raw(target={"table": "/data/t", "zzzzzz": 1}))
    assert e.key == "target.zzzzzz" and "checkpoint" in e.allowed and "source_columns" in e.allowed


def test_a_yaml_error_names_the_file_and_line_not_a_unicode_string(tmp_path: Path) -> None:
    conf = tmp_path / "pipeline.yml"
    conf.write_text("pipeline: orders\nsource:\n  format: delta\n   path: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    message = str(info.value)
    assert "<unicode string>" not in message
    assert str(conf) in message and "line 4" in message


def test_a_misspelt_stage_type_names_the_nearest_type() -> None:
    e = _error(_raw(stages=[{"name": "decode", "type": "decode_utf9"}]))
    assert e.key == "stages[0].type" and "did you mean 'decode_utf8'?" in e.allowed, str(e)


def test_a_stage_type_like_no_known_one_lists_the_types_without_a_guess() -> None:
    e = _error(_raw(stages=[{"name": "decode", "type": "zzzz"}]))
    assert "decode_utf8" in e.allowed and "json" in e.allowed and "did you mean" not in e.allowed, str(e)


def test_a_yaml_error_is_said_of_the_config_file_not_of_a_config_key(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yml"
    conf.write_text("pipeline: x\nsource: {format: delta\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    message = str(info.value)
    assert "config key" not in message and "--conf" not in message, message
    assert message.startswith(f"config file {str(conf)!r} is not valid YAML: line 3, column 1: "), message
    assert "expected ',' or '}'" in message and "line 2, column 9" in message, message


@pytest.mark.parametrize(
    ("text", "problem"),
    [(None, "no such file"), ("- a\n- b\n", "a YAML mapping at its top level")],
)
def test_a_missing_or_listy_config_file_is_said_of_the_file(tmp_path: Path, text: str | None, problem: str) -> None:
    conf = tmp_path / "pipeline.yml"
    if text is not None:
        conf.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(conf)
    assert str(info.value).startswith(f"config file {str(conf)!r}") and problem in str(info.value), str(info.value)
