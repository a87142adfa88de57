"""Relative paths in a config file resolve against the file's folder, not the working directory.

Issue 12: a job runs from whatever directory its runtime chooses, so a config that
names ``expectations/orders.json`` or ``../data/source`` must mean the same files
wherever it is loaded from. Unity Catalog names (``catalog.schema.table``) and
URIs are not paths and stay as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.config import load_config, parse_config
from quarantine.errors import ConfigError

SUITE = {"name": "s", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}}]}


def _write(folder: Path, raw: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pipeline.yml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _raw(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pipeline": "orders",
        "source": {"format": "delta", "path": "../data/source"},
        "target": {"table": "data/orders", "checkpoint": "checkpoints/orders"},
        "errors": {"deadletterqueue.table.name": "data/quarantine"},
        "metrics": {"table": "data/metrics"},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "expect", "type": "expectation", "input": "decode",
             "options": {"suite": "expectations/orders.json"}},
        ],
    }
    raw.update(sections)
    return raw


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder with a suite in it; the working directory is somewhere else."""
    folder = tmp_path / "project" / "conf"
    (folder / "expectations").mkdir(parents=True)
    (folder / "expectations" / "orders.json").write_text(json.dumps(SUITE), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return folder


def test_every_relative_path_in_a_config_file_resolves_against_its_folder(conf_dir: Path) -> None:
    cfg = load_config(_write(conf_dir, _raw()))
    assert cfg.source.path == str(conf_dir.parent / "data" / "source")
    assert cfg.target.table == str(conf_dir / "data" / "orders")
    assert cfg.target.checkpoint == str(conf_dir / "checkpoints" / "orders")
    assert cfg.errors.dlq_table_name == str(conf_dir / "data" / "quarantine")
    assert cfg.metrics.table == str(conf_dir / "data" / "metrics")
    assert cfg.stages[1].options["suite"] == str(conf_dir / "expectations" / "orders.json")
    assert cfg.base_dir == str(conf_dir)


def test_a_path_without_a_slash_is_a_path_where_the_key_only_takes_paths(conf_dir: Path) -> None:
    """``source.path``, ``target.checkpoint`` and a suite are always files; a bare
    ``orders`` under ``target.table`` is a metastore table name and stays."""
    raw = _raw(source={"format": "delta", "path": "source"})
    raw["target"] = {"table": "orders", "checkpoint": "_checkpoint"}
    raw["stages"][1]["options"]["suite"] = "orders.json"
    (conf_dir / "orders.json").write_text(json.dumps(SUITE), encoding="utf-8")
    cfg = load_config(_write(conf_dir, raw))
    assert cfg.source.path == str(conf_dir / "source")
    assert cfg.target.checkpoint == str(conf_dir / "_checkpoint")
    assert cfg.target.table == "orders"
    assert cfg.stages[1].options["suite"] == str(conf_dir / "orders.json")


@pytest.mark.parametrize(
    "name",
    ["main.sales.orders", "/abs/orders", "s3://bucket/orders", "abfss://c@acct.dfs.core.windows.net/o",
     "dbfs:/mnt/orders", "/Volumes/main/sales/v/orders"],
)
def test_catalog_names_absolute_paths_and_uris_stay_as_written(conf_dir: Path, name: str) -> None:
    raw = _raw(source={"format": "delta", "table": "main.raw.orders_raw"})
    raw["target"] = {"table": name}
    cfg = load_config(_write(conf_dir, raw))
    assert cfg.target.table == name
    assert cfg.source.table == "main.raw.orders_raw"


def test_a_missing_suite_fails_at_load_naming_the_key_and_the_resolved_path(conf_dir: Path) -> None:
    raw = _raw()
    raw["stages"][1]["options"]["suite"] = "expectations/nope.json"
    with pytest.raises(ConfigError) as info:
        load_config(_write(conf_dir, raw))
    assert info.value.key == "stages[1].options.suite"
    assert info.value.value == str(conf_dir / "expectations" / "nope.json")
    assert "existing" in info.value.allowed


def test_overrides_resolve_against_the_working_directory(conf_dir: Path) -> None:
    """``--set target.table=out/orders`` is typed at a prompt: it means the prompt's folder."""
    cfg = load_config(_write(conf_dir, _raw()), {"target.table": "out/orders", "source.path": "in"})
    assert cfg.target.table == str(Path.cwd() / "out" / "orders")
    assert cfg.source.path == str(Path.cwd() / "in")
    assert cfg.errors.dlq_table_name == str(conf_dir / "data" / "quarantine")


def test_parse_config_resolves_against_the_base_dir_it_is_given(conf_dir: Path) -> None:
    cfg = parse_config(_raw(), base_dir=conf_dir)
    assert cfg.target.table == str(conf_dir / "data" / "orders")
    assert cfg.stages[1].options["suite"] == str(conf_dir / "expectations" / "orders.json")
