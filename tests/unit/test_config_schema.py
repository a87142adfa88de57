"""The config's JSON Schema: shipped with the package, never stale, and in agreement with the loader.

Every pipeline config in the repository (``conf/``, and any under ``bundles/``)
passes the schema (``jsonschema``, as an editor checks it) and :func:`load_config`.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from quarantine.cli import main
from quarantine.config import SCHEMA_FILE, json_schema, load_config, parse_config, schema_text
from quarantine.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SUITE = str(REPO / "conf" / "expectations" / "orders.json")
MODELINE = "# yaml-language-server: $schema="


def _pipeline_configs() -> list[Path]:
    """YAML files under conf/ and bundles/ that are pipeline configs (bundle resources are not)."""
    found = []
    for folder in ("conf", "bundles"):
        for path in sorted((REPO / folder).rglob("*.y*ml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and {"pipeline", "stages"} <= doc.keys():
                found.append(path)
    return found


CONFIGS = _pipeline_configs()


@pytest.fixture(autouse=True)
def _databricks_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Kafka job cluster sets (conf/dev.yml and conf/prod.yml read it as ${env:NAME})."""
    for name, value in {"KAFKA_BOOTSTRAP_SERVERS": "broker:9093", "KAFKA_SASL_USERNAME": "svc",
                        "KAFKA_SASL_PASSWORD": "unit-test-only"}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(schema)


def _schema_problems(validator: jsonschema.Draft7Validator, raw: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(raw)]


def test_the_shipped_schema_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "quarantine/config.schema.json is stale: run `quarantine schema --out quarantine/config.schema.json`"
    )


def test_the_schema_is_draft_7_and_ships_as_package_data() -> None:
    schema = json_schema()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "config.schema.json" in package_data["package-data"]["quarantine"]
    assert SCHEMA_FILE.parent == REPO / "quarantine"


def test_the_repository_s_pipeline_configs_are_found() -> None:
    expected = {"conf/orders_demo.yml", "conf/local.yml", "conf/dev.yml", "conf/prod.yml"}
    assert {p.relative_to(REPO).as_posix() for p in CONFIGS} >= expected


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_pipeline_config_passes_the_schema_and_loads(
    path: Path, validator: jsonschema.Draft7Validator
) -> None:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _schema_problems(validator, raw) == []
    assert load_config(path).pipeline == raw["pipeline"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_pipeline_config_points_editors_at_the_schema(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(MODELINE), f"{path.name} should start with {MODELINE}<path to config.schema.json>"
    assert (path.parent / first[len(MODELINE):].strip()).resolve() == SCHEMA_FILE.resolve()


# --------------------------------------------------------------------------- schema and loader agree


def _raw(**sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pipeline": "orders",
        "source": {"format": "delta", "path": "/data/source"},
        "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": "/data/quarantine"},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }
    raw.update(copy.deepcopy(sections))
    return raw


def _flat() -> dict[str, Any]:
    raw = _raw()
    del raw["errors"]
    raw["errors.deadletterqueue.table.name"] = "/data/q"
    raw["errors.tolerance"] = "all"
    return raw


GOOD = [
    pytest.param(_raw(), id="minimal"),
    pytest.param(_flat(), id="flat-errors-keys"),
    pytest.param(_raw(errors={"deadletterqueue.table.name": "/q", "tolerance": "all", "tolerance.limit": -1,
                              "retry.timeout": 30000, "retry.retriable.exceptions": ["TimeoutError", "a.b.C"],
                              "handler.transform": "log_and_continue", "handler.sink": "my.pkg.Handler"}),
                 id="errors-keys"),
    pytest.param(_raw(source={"format": "kafka", "bootstrap.servers": "h:9092", "topics": ["a"],
                              "max.offsets.per.trigger": 10, "options": {"kafka.security.protocol": "SSL"}},
                      target={"table": "main.sales.orders", "checkpoint": "/chk"},
                      trigger={"processing_time": "10 seconds"}), id="kafka"),
    pytest.param(_raw(metrics=None, mlflow=None, spark=None, trigger=None), id="empty-sections"),
    pytest.param(_raw(stages=[
        {"name": "decode", "type": "decode_utf8", "options": {"nullable": True}},
        {"name": "parse", "type": "json", "options": {"schema": "a INT, at STRING", "required": ["a"]}},
        {"name": "convert", "type": "cast", "options": {"columns": {"at": "DATE"}, "formats": {"at": "yyyy"}}},
        {"name": "check", "type": "checks", "options": {"rules": [
            {"column": "a", "check": "not_null"},
            {"column": "a", "check": "range", "min": 0, "max_inclusive": False, "max": 9.5},
            {"column": "at", "check": "range", "min": "2026-01-01"},
            {"column": "a", "check": "in_set", "values": [1, 2]},
            {"column": "a", "check": "not_in_set", "values": ["x", True]},
            {"column": "at", "check": "regex", "pattern": "^2026", "match": "search"},
            {"column": "at", "check": "length", "max": 10},
            {"check": "expr", "expr": "parse.result.a > 0"},
        ]}},
        {"name": "py", "type": "python", "input": "parse",
         "options": {"function": "pkg.mod.fn", "returns": "DOUBLE", "mode": "vectorized", "retriable": "TimeoutError"}},
        {"name": "expect", "type": "expectation", "input": "convert",
         "options": {"suite": SUITE, "on_breach": {"default": "warn", "expect_x": "fail"}, "validate_every": 3}},
    ]), id="every-stage-type"),
]


@pytest.mark.parametrize("raw", GOOD)
def test_what_the_schema_accepts_the_loader_accepts(raw: dict[str, Any], validator: jsonschema.Draft7Validator) -> None:
    assert _schema_problems(validator, raw) == []
    parse_config(raw)


BAD = [
    pytest.param(_raw(sourse={}), "sourse", id="unknown-top-key"),
    pytest.param(_raw(errors={"deadletterqueue.table.name": "/q", "tolerance.limt": 3}), "errors.tolerance.limt",
                 id="unknown-errors-key"),
    pytest.param(_raw(errors={"deadletterqueue.table.name": "/q", "tolerance": "some"}), "errors.tolerance",
                 id="bad-enum"),
    pytest.param(_raw(errors={"deadletterqueue.table.name": "/q", "tolerance.limit": -2}), "errors.tolerance.limit",
                 id="below-minimum"),
    pytest.param(_raw(errors={"deadletterqueue.table.name": "/q", "log.enable": "yes"}), "errors.log.enable",
                 id="not-a-boolean"),
    pytest.param(_raw(errors={"tolerance": "all"}), "errors.deadletterqueue.table.name", id="no-quarantine-table"),
    pytest.param(_raw(pipeline="9 lives"), "pipeline", id="bad-pipeline-name"),
    pytest.param(_raw(trigger={"processing_time": "often"}), "trigger.processing_time", id="bad-interval"),
    pytest.param(_raw(stages=[]), "stages", id="no-stages"),
    pytest.param(_raw(stages=[{"name": "a-b", "type": "decode_utf8"}]), "stages[0].name", id="bad-stage-name"),
    pytest.param(_raw(stages=[{"name": "a", "type": "xml"}]), "stages[0].type", id="unknown-stage-type"),
    pytest.param(_raw(stages=[{"name": "a", "type": "json", "options": {"schema": "a INT", "strict": True}}]),
                 "stages[0].options.strict", id="unknown-stage-option"),
    pytest.param(_raw(stages=[{"name": "a", "type": "cast"}]), "stages[0].options", id="missing-options"),
    pytest.param(_raw(stages=[{"name": "a", "type": "checks", "options": {"rules": [{"check": "between"}]}}]),
                 "stages[0].options.rules[0].check", id="unknown-check"),
    pytest.param(_raw(stages=[{"name": "a", "type": "checks",
                               "options": {"rules": [{"check": "length", "min": -1}]}}]),
                 "stages[0].options.rules[0].min", id="negative-length"),
    pytest.param(_raw(stages=[{"name": "a", "type": "checks", "options": {"rules": [{"check": "range"}]}}]),
                 "stages[0].options.rules[0].min", id="range-without-bounds"),
    pytest.param(_raw(stages=[{"name": "a", "type": "checks",
                               "options": {"rules": [{"check": "length", "column": "x"}]}}]),
                 "stages[0].options.rules[0].min", id="length-without-bounds"),
    pytest.param(_raw(mlflow={"enabled": True, "token": "t0ken-value"}), "mlflow.token", id="unknown-mlflow-key"),
]


@pytest.mark.parametrize(("raw", "key"), BAD)
def test_what_the_schema_rejects_the_loader_rejects_naming_the_key(
    raw: dict[str, Any], key: str, validator: jsonschema.Draft7Validator
) -> None:
    assert _schema_problems(validator, raw) != []
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert info.value.key == key


# --------------------------------------------------------------------------- the command


def test_quarantine_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()


def test_quarantine_schema_out_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / ".vscode" / "quarantine.schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == json_schema()
