"""``quarantine validate`` checks a config without starting Spark (issue 13, item 6).

Each check runs ``validate`` in a process of its own (a test worker may hold a Spark
session from an earlier test, and with one active the stages would use Spark's parser):
a child forked from a process that has imported the CLI and run nothing
(:mod:`tests.support.zygote`), which then asserts that no JVM gateway was ever started.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import orders_config
from tests.support.readme import block
from tests.support.zygote import run_cli

REPO = Path(__file__).resolve().parents[2]

def _validate(conf: Path) -> subprocess.CompletedProcess[str]:
    """``quarantine validate --conf conf`` in a process of its own (forked from the zygote,
    :mod:`tests.support.zygote`), which then checks that no JVM gateway was ever started."""
    proc = run_cli(["validate", "--conf", str(conf)])
    assert "the command started a JVM" not in proc.stderr, proc.stderr
    return proc


def _write(tmp_path: Path, config: dict[str, object]) -> Path:
    path = tmp_path / "pipeline.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_demo_config_validates_without_spark_and_names_its_tables(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)  # orders_demo.yml + its expectation suite, paths relative to it
    proc = _validate(conf / "orders_demo.yml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "config ok: pipeline orders_demo, 5 stages: decode(DecodeUtf8) -> parse_order(JsonParse)" in out
    assert "expect_order(ExpectationStage)" in out
    data = (tmp_path / "data" / "demo").resolve()
    for what, name in (("target", "orders"), ("quarantine", "quarantine"), ("metrics", "metrics")):
        assert f"  {what:<11}{data / name}\n" in out
    assert "checked without starting Spark" in out


def test_complex_types_are_checked_without_spark(tmp_path: Path) -> None:
    cfg = orders_config(tmp_path)
    cfg["stages"][1]["options"]["schema"] = "order_id STRING, items ARRAY<STRUCT<sku: STRING, qty: INT>>"
    items = "ARRAY<STRUCT<sku: STRING, qty: BIGINT>>"
    cfg["stages"].append({"name": "convert", "type": "cast", "options": {"columns": {"items": items}}})
    proc = _validate(_write(tmp_path, cfg))
    assert proc.returncode == 0 and "3 stages" in proc.stdout, proc.stderr


def test_nested_target_columns_are_shown_with_their_names_as_written(tmp_path: Path) -> None:
    """Issue 60, C: field names inside a struct keep their case (the table holds os, not OS)."""
    cfg = orders_config(tmp_path)
    schema = "order_id STRING, device STRUCT<os: STRING, screenW: INT>, tags ARRAY<STRING>"
    cfg["stages"][1]["options"]["schema"] = schema
    proc = _validate(_write(tmp_path, cfg))
    assert proc.returncode == 0, proc.stderr
    assert ("target columns: order_id STRING, device STRUCT<os: STRING, screenW: INT>, tags ARRAY<STRING> "
            "(the last stage's result: parse)") in proc.stdout


@pytest.mark.parametrize(("stage", "key", "why"), [
    (1, "stages[1].options.schema", "expected '>' at position"),
    (2, "stages[2].options.columns.items", "unknown type 'STRUCTT'"),
])
def test_a_bad_type_is_a_config_error_naming_its_key_without_spark(
    tmp_path: Path, stage: int, key: str, why: str
) -> None:
    cfg = orders_config(tmp_path)
    cfg["stages"].append({"name": "convert", "type": "cast", "options": {"columns": {"items": "ARRAY<INT>"}}})
    if stage == 1:
        cfg["stages"][1]["options"]["schema"] = "order_id STRING, items ARRAY<INT"
    else:
        cfg["stages"][2]["options"]["columns"]["items"] = "ARRAY<STRUCTT<a: INT>>"
    proc = _validate(_write(tmp_path, cfg))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("quarantine: bad config:") and key in proc.stderr and why in proc.stderr


def test_the_readme_config_reference_validates(tmp_path: Path) -> None:
    """docs/configuration.md: the example config, as written, passes ``quarantine validate``."""
    conf = tmp_path / "conf" / "pipeline.yml"
    conf.parent.mkdir()
    conf.write_text(block("config-reference").body, encoding="utf-8")
    proc = _validate(conf)
    assert proc.returncode == 0, proc.stderr
    assert "config ok: pipeline orders_demo" in proc.stdout


def _not_kafka_shaped_delta_source(table: Path) -> None:
    """A Delta table whose log says its value is a STRING (written as Delta writes its log)."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "value", "type": "string", "nullable": True, "metadata": {}}]}
    meta = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {}}}
    (log / f"{0:020d}.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("change", "key"), [
    (lambda cfg, d: cfg["target"].update(table="my target"), "target.table"),
    (lambda cfg, d: cfg["errors"].update(tolerence="all"), "errors.tolerence"),
    (lambda cfg, d: cfg["stages"].append({"name": "check", "type": "checks", "options": {"rules": [
        {"column": "amount", "check": "range", "min": 0, "max": "ten thousand"}]}}), "stages[2].options.rules[0].max"),
    (lambda cfg, d: cfg["stages"].append({"name": "check", "type": "checks", "options": {"rules": [
        {"column": "amout", "check": "not_null"}]}}), "stages[2].options.rules[0].column"),
    (lambda cfg, d: cfg["stages"].pop(0), "stages[0].input"),
    (lambda cfg, d: _not_kafka_shaped_delta_source(d / "source"), "source.path"),
])
def test_validate_exits_2_naming_the_key_of_what_it_knows_without_spark(
    tmp_path: Path, change: Any, key: str
) -> None:
    cfg = orders_config(tmp_path)
    change(cfg, tmp_path)
    proc = _validate(_write(tmp_path, cfg))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("quarantine: bad config:") and f"'{key}'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_validate_says_it_did_not_check_a_catalog_source(tmp_path: Path) -> None:
    cfg = orders_config(tmp_path)
    cfg["source"] = {"format": "delta", "table": "main.raw.orders"}
    proc = _validate(_write(tmp_path, cfg))
    assert proc.returncode == 0, proc.stderr
    assert "not checked: source main.raw.orders is a catalog table" in proc.stdout


def test_validate_names_the_target_columns_the_last_stage_gives(tmp_path: Path) -> None:
    """Issue 54, point 1: the target holds the last stage's result only, and validate says so."""
    config: dict[str, Any] = orders_config(tmp_path)
    proc = _validate(_write(tmp_path, config))
    assert proc.returncode == 0, proc.stderr
    assert ("target columns: order_id STRING, amount DOUBLE (the last stage's result: parse) + _source_topic, "
            "_source_partition, _source_offset, _source_timestamp, _source_fingerprint\n") in proc.stdout

    # a last python stage returning one DOUBLE adds it to its input's fields, named after the stage (issue 60)
    config["stages"].append({"name": "fahrenheit", "type": "python",
                             "options": {"function": "math.fabs", "returns": "DOUBLE"}})
    proc = _validate(_write(tmp_path, config))
    assert proc.returncode == 0, proc.stderr
    assert ("target columns: order_id STRING, amount DOUBLE, fahrenheit DOUBLE (the last stage's result: "
            "fahrenheit) + _source_topic") in proc.stdout
    # output: replace: the target is that one column, named after the stage
    config["stages"][-1]["options"]["output"] = "replace"
    proc = _validate(_write(tmp_path, config))
    assert proc.returncode == 0, proc.stderr
    assert "target columns: fahrenheit DOUBLE (the last stage's result: fahrenheit) + _source_topic" in proc.stdout
