"""The Databricks asset bundle: schema-valid, typed-model-valid, and runnable as written.

* every bundle file validates against the Databricks CLI's bundle JSON schema
  (``../shared/schemas/databricks-bundle.schema.json``; that one check is skipped
  when the checkout has no ``../shared`` beside it);
* every job loads into ``databricks.bundles.jobs.Job`` (strict typed models:
  unknown fields are errors);
* the wheel task's parameters, with the dev target's variables substituted, are
  accepted by the ``quarantine`` CLI parser and load into a valid config that
  points at the target's catalog tables;
* every notebook a job names exists, and every variable used is declared and set.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from databricks.bundles.jobs import Job
from jsonschema.exceptions import best_match

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO.parent / "shared" / "schemas" / "databricks-bundle.schema.json"
_VAR = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: expected a YAML mapping"
    return data


def _root() -> dict[str, Any]:
    return _load(REPO / "databricks.yml")


def _resource_files() -> list[Path]:
    files: list[Path] = []
    for pattern in _root()["include"]:
        files.extend(sorted(REPO.glob(pattern)))
    return files


def _jobs() -> dict[str, tuple[Path, dict[str, Any]]]:
    jobs: dict[str, tuple[Path, dict[str, Any]]] = {}
    for f in _resource_files():
        for name, job in _load(f).get("resources", {}).get("jobs", {}).items():
            assert name not in jobs, f"job {name} defined twice"
            jobs[name] = (f, job)
    return jobs


def _bundle_validator() -> jsonschema.Draft7Validator:
    """The CLI's schema, with its ``\\p{L}``/``\\p{N}`` classes spelled for Python's ``re``."""
    text = SCHEMA.read_text(encoding="utf-8")
    text = text.replace(r"[\\p{L}\\p{N}]", r"[^\\W_]").replace(r"\\p{L}", r"[^\\W\\d_]")
    assert r"\\p{" not in text, "the schema uses a Unicode class this test does not translate"
    return jsonschema.Draft7Validator(json.loads(text))


def test_root_includes_every_resource_file_and_declares_the_wheel_artifact() -> None:
    root = _root()
    assert root["bundle"]["name"] == "quarantine"
    files = _resource_files()
    assert {f.name for f in files} == {p.name for p in (REPO / "bundles").glob("*.yml")}
    assert len(files) >= 2
    (artifact,) = root["artifacts"].values()
    assert artifact["type"] == "whl"
    assert "wheel" in artifact["build"]
    assert set(root["targets"]) == {"dev", "prod"}
    assert root["targets"]["dev"].get("default") is True


def test_every_bundle_file_matches_the_databricks_bundle_schema() -> None:
    if not SCHEMA.is_file():
        pytest.skip(f"{SCHEMA} not present (a checkout without ../shared beside it)")
    validator = _bundle_validator()
    for path in [REPO / "databricks.yml", *_resource_files()]:
        error = best_match(validator.iter_errors(_load(path)))
        assert error is None, f"{path.name}: {error.json_path}: {error.message[:500]}"


def test_the_schema_check_catches_a_misspelt_task_field() -> None:
    if not SCHEMA.is_file():
        pytest.skip(f"{SCHEMA} not present (a checkout without ../shared beside it)")
    _, job = _jobs()["quarantine_orders"]
    broken = {"resources": {"jobs": {"quarantine_orders": json.loads(json.dumps(job))}}}
    broken["resources"]["jobs"]["quarantine_orders"]["tasks"][0]["python_wheel_task"]["pakage_name"] = "x"
    error = best_match(_bundle_validator().iter_errors(broken))
    assert error is not None and "pakage_name" in error.message


def test_every_job_loads_into_the_strict_typed_model() -> None:
    jobs = _jobs()
    assert {"quarantine_orders", "quarantine_triage_replay"} <= set(jobs)
    for name, (_, job) in jobs.items():
        model = Job.from_dict(job)  # type: ignore[arg-type]
        assert model.name == name
        assert model.tasks, f"job {name} has no tasks"
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict({**jobs["quarantine_orders"][1], "taskz": []})  # type: ignore[arg-type]


def test_the_orders_job_runs_the_wheel_entry_point() -> None:
    _, job = _jobs()["quarantine_orders"]
    (task,) = job["tasks"]
    wheel = task["python_wheel_task"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert wheel["package_name"] == project["name"] == "spark-quarantine"  # the distribution, not the import name
    assert wheel["entry_point"] == "quarantine"
    assert project["scripts"]["quarantine"] == "quarantine.cli:console"
    assert any(lib.get("whl", "").endswith(".whl") for lib in task["libraries"])


def _substitute(text: str, variables: dict[str, str]) -> str:
    text = text.replace("${workspace.file_path}", str(REPO))
    return _VAR.sub(lambda m: variables[m.group(1)], text)


def _target_variables(target: str) -> dict[str, str]:
    root = _root()
    values = {k: str(v["default"]) for k, v in root["variables"].items() if "default" in v}
    values.update({k: str(v) for k, v in root["targets"][target].get("variables", {}).items()})
    return values


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_wheel_parameters_parse_into_a_config_on_the_targets_tables(target: str) -> None:
    from quarantine.cli import _overrides, _parser
    from quarantine.config import load_config

    variables = _target_variables(target)
    _, job = _jobs()["quarantine_orders"]
    params = [_substitute(p, variables) for p in job["tasks"][0]["python_wheel_task"]["parameters"]]
    args = _parser().parse_args(params)
    assert args.command == "run"
    config = load_config(args.conf, _overrides(args.set))
    base = f"{variables['catalog']}.{variables['schema']}"
    assert config.target.table == f"{base}.orders"
    assert config.errors.dlq_table_name == f"{base}.{variables['quarantine_table']}"
    assert config.source.table == f"{base}.{variables['source_table']}"
    assert config.source.path is None
    assert config.target.checkpoint is not None
    assert config.target.checkpoint.startswith(variables["checkpoint_base"])


def test_every_variable_used_is_declared_and_set_in_every_target() -> None:
    root = _root()
    declared = set(root["variables"])
    used: set[str] = set()
    for path in [REPO / "databricks.yml", *_resource_files()]:
        used |= set(_VAR.findall(path.read_text(encoding="utf-8")))
    assert used <= declared, f"undeclared variables: {sorted(used - declared)}"
    required = {k for k, v in root["variables"].items() if "default" not in v}
    assert {"catalog", "schema", "checkpoint_base"} <= required
    for name, target in root["targets"].items():
        missing = required - set(target.get("variables", {}))
        assert not missing, f"target {name} does not set {sorted(missing)}"
    assert _target_variables("dev")["catalog"] != _target_variables("prod")["catalog"]


def test_notebook_tasks_point_at_existing_source_notebooks() -> None:
    path, job = _jobs()["quarantine_triage_replay"]
    notebooks = [t["notebook_task"]["notebook_path"] for t in job["tasks"] if "notebook_task" in t]
    assert {Path(n).name for n in notebooks} == {"triage.py", "replay.py"}
    for n in notebooks:
        nb = (path.parent / n).resolve()
        assert nb.is_file(), f"{n} (from {path.name}) does not exist"
        assert nb.read_text(encoding="utf-8").startswith("# Databricks notebook source\n")
    replay = next(t for t in job["tasks"] if t["task_key"] == "replay")
    assert replay["depends_on"] == [{"task_key": "triage"}]
    params = {p["name"] for p in job["parameters"]}
    assert {"catalog", "schema", "quarantine_table", "pipeline", "conf", "apply"} <= params


def test_every_job_cluster_lets_the_jit_compile_huge_generated_methods() -> None:
    from quarantine.session import JVM_OPTIONS

    for name, (_, job) in _jobs().items():
        for cluster in job.get("job_clusters", []):
            conf = cluster["new_cluster"].get("spark_conf", {})
            for side in ("driver", "executor"):
                options = str(conf.get(f"spark.{side}.extraJavaOptions", "")).split()
                assert set(JVM_OPTIONS) <= set(options), f"job {name}: {side} JVM options {options}"
