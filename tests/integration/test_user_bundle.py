"""docs/databricks.md's bundle of a user's own: their python stage's module shipped to a job
cluster, a serverless job and a Lakeflow pipeline, checked as tests/integration/test_bundle.py
checks this repository's bundle.

The page's blocks are written as a repository of the user's (``clicks/``: ``pyproject.toml``,
the package ``clicks_lib``, ``conf/clicks.yml``, ``databricks.yml``, ``resources/clicks.yml``,
``pipeline/clicks.py``). Its bundle must be schema- and model-valid with its variables, paths
and wheel tasks' configs (:mod:`tests.support.bundle_checks`); every python stage's module must
reach where it runs (:func:`~tests.support.bundle_checks.user_code_problems`), which broken
copies prove the check finds. The wheel is built with the artifact's own command and installed
into a folder of its own, as a cluster installs a task's library; ``quarantine validate`` with
each job's parameters, run from another folder with only that folder on ``PYTHONPATH``,
imports the stage's function from it. The page's variant with the module beside the config
is checked the same way without a wheel. No Spark is started and no workspace reached.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.bundle_checks import (
    Bundle,
    inline_secret_problems,
    model_problems,
    path_problems,
    schema_problems,
    substitute,
    target_variables,
    user_code_problems,
    variable_problems,
    wheel_parameter_problems,
)
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO.parent / "shared" / "schemas" / "databricks-bundle.schema.json"
BIN = Path(sys.executable).parent
TARGET = "dev"
#: Each file of the user's repository, and the block of docs/databricks.md it holds.
FILES = {
    "pyproject.toml": "user-bundle-pyproject",
    "src/clicks_lib/enrich.py": "user-bundle-module",
    "conf/clicks.yml": "user-bundle-config",
    "databricks.yml": "user-bundle-root",
    "resources/clicks.yml": "user-bundle-resources",
    "pipeline/clicks.py": "user-bundle-pipeline",
}
JOBS = {"clicks_ingest", "clicks_ingest_serverless"}


def _write(root: Path) -> Path:
    """The user's repository, from the page's blocks, in ``root``."""
    for rel, key in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(block(key).body, encoding="utf-8")
    (root / "src" / "clicks_lib" / "__init__.py").write_text("", encoding="utf-8")
    return root


def _build(root: Path) -> Path:
    """The wheel, built in ``root`` by the bundle's artifact command (as ``bundle deploy`` runs it)."""
    (artifact,) = Bundle.load(root).config["artifacts"].values()
    argv = shlex.split(artifact["build"])
    assert argv[0] == "python", argv
    done = subprocess.run([sys.executable, *argv[1:]], cwd=root / artifact["path"], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (root / "dist").glob("clicks_lib-*.whl")
    return wheel


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The user's repository with its wheel built into ``dist/``; the wheel installed into ``site/``
    as a cluster installs a library: (the repository, the installed folder)."""
    root = _write(tmp_path_factory.mktemp("user") / "clicks")
    wheel = _build(root)
    site = root.parent / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                           str(wheel)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return root, site


@pytest.fixture
def copy(built: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the built repository, to break."""
    return Path(shutil.copytree(built[0], tmp_path / "clicks"))


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name}: {old!r} not found (the test's break no longer applies)"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _job_argv(root: Path, job: str) -> list[str]:
    """The job's ``quarantine`` arguments as the target runs them (variables and the synced files' root)."""
    _, spec = Bundle.load(root).jobs()[job]
    (task,) = spec["tasks"]
    variables = target_variables(root, TARGET)
    return [substitute(str(p), root, TARGET, variables, {}) for p in task["python_wheel_task"]["parameters"]]


def _validate(argv: list[str], cwd: Path, pythonpath: Path | None) -> subprocess.CompletedProcess[str]:
    """``quarantine validate`` with a job's arguments, in ``cwd``, with only ``pythonpath`` added to ``sys.path``."""
    assert argv[0] == "run"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([str(BIN / "quarantine"), "validate", *argv[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


# --------------------------------------------------------------------------- the page's bundle


def test_the_bundle_is_valid_as_the_repositorys_is_checked(built: tuple[Path, Path]) -> None:
    root, _ = built
    assert set(Bundle.load(root).jobs()) == JOBS and set(Bundle.load(root).pipelines()) == {"clicks_declarative"}
    assert model_problems(root) == []
    assert variable_problems(root) == []
    assert path_problems(root) == []
    assert inline_secret_problems(root) == []
    assert wheel_parameter_problems(root, TARGET) == []
    if SCHEMA.is_file():  # the Databricks CLI's schema is beside the checkout (test_bundle.py: _needs_schema)
        assert schema_problems(root, SCHEMA) == []
    else:
        assert not os.environ.get("CI"), f"{SCHEMA} is not beside this checkout"


def test_every_python_stage_module_reaches_where_its_task_or_pipeline_runs(built: tuple[Path, Path]) -> None:
    root, _ = built
    assert user_code_problems(root, TARGET) == []
    _, spec = Bundle.load(root).jobs()["clicks_ingest"]
    (task,) = spec["tasks"]
    assert {"whl": "../dist/*.whl"} in task["libraries"]  # a job cluster: a task library
    _, serverless = Bundle.load(root).jobs()["clicks_ingest_serverless"]
    assert "libraries" not in serverless["tasks"][0]  # serverless: the environment's dependencies
    assert "../dist/*.whl" in serverless["environments"][0]["spec"]["dependencies"]


def test_the_installed_wheel_gives_each_job_its_stage_and_nothing_else_does(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    root, site = built
    assert not (root / "conf" / "clicks_lib").exists() and not (root / "conf" / "clicks_lib.py").exists()
    for job in JOBS:
        argv = _job_argv(root, job)
        done = _validate(argv, tmp_path, site)
        assert done.returncode == 0, (job, done.stdout + done.stderr)
        assert "enrich(PythonStage)" in done.stdout and "long_visit BOOLEAN" in done.stdout, done.stdout
        # without the wheel the cluster would fail the task before it reads a record: validate says so
        bare = _validate(argv, tmp_path, None)
        assert bare.returncode == 2 and "No module named 'clicks_lib'" in bare.stderr, bare.stderr


def test_the_pipelines_config_is_declarable_with_its_settings_and_its_wheel(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from quarantine.batch.plan import Plan
    from quarantine.config import load_config
    from quarantine.declarative import check_declarable, pipeline_overrides
    from quarantine.stages import build_stages

    root, site = built
    monkeypatch.syspath_prepend(str(site))  # the pipeline's environment.dependencies, installed
    path, pipe = Bundle.load(root).pipelines()["clicks_declarative"]
    variables = target_variables(root, TARGET)
    settings = {k: substitute(str(v), root, TARGET, variables, {}) for k, v in pipe["configuration"].items()}
    source = (path.parent / pipe["libraries"][0]["file"]["path"]).read_text(encoding="utf-8")
    (declared,) = re.findall(r'declare\("([^"]+)"\)', source)
    config = load_config((path.parent / pipe["root_path"] / declared).resolve(), pipeline_overrides(settings))
    names = check_declarable(Plan(config=config, spark=None, stages=build_stages(config.stages)))  # type: ignore[arg-type]
    assert names.target == "dev.clicks.clicks_declarative" and names.quarantine.endswith("_quarantine")
    assert "../dist/*.whl" in pipe["environment"]["dependencies"]


# --------------------------------------------------------------------------- broken copies


def test_a_job_cluster_task_without_the_wheel_is_found(copy: Path) -> None:
    _edit(copy / "resources" / "clicks.yml", "            - whl: ../dist/*.whl            # clicks_lib: on the driver "
          "and every executor\n", "")
    (problem,) = user_code_problems(copy, TARGET)
    assert "job clicks_ingest task run" in problem and "stage enrich's module clicks_lib" in problem, problem


def test_a_serverless_job_and_a_pipeline_without_the_wheel_are_found(copy: Path) -> None:
    _edit(copy / "resources" / "clicks.yml", "              - ../dist/*.whl\n", "")
    _edit(copy / "resources" / "clicks.yml", "          - ../dist/*.whl\n", "")
    problems = user_code_problems(copy, TARGET)
    assert len(problems) == 2, problems
    assert any("job clicks_ingest_serverless" in p and "clicks_lib" in p for p in problems), problems
    assert any("pipeline clicks_declarative" in p and "clicks_lib" in p for p in problems), problems


def test_a_wheel_not_built_is_found(copy: Path) -> None:
    shutil.rmtree(copy / "dist")
    problems = user_code_problems(copy, TARGET)
    assert problems and all("matches no built wheel" in p or "clicks_lib" in p for p in problems), problems


# --------------------------------------------------------------------------- the module beside the config


def _beside_the_config(root: Path) -> None:
    """The page's variant: ``clicks_enrich.py`` beside ``conf/clicks.yml``, no wheel, no artifact."""
    (root / "conf" / "clicks_enrich.py").write_text(block("user-bundle-module").body, encoding="utf-8")
    shutil.rmtree(root / "src")
    shutil.rmtree(root / "dist")
    _edit(root / "conf" / "clicks.yml", "function: clicks_lib.enrich.add_fields", "function: clicks_enrich.add_fields")
    bundle = root / "resources" / "clicks.yml"
    _edit(bundle, "            - whl: ../dist/*.whl            # clicks_lib: on the driver and every executor\n", "")
    _edit(bundle, "              - ../dist/*.whl\n", "")
    _edit(bundle, "          - ../dist/*.whl\n", "")
    root_file = yaml.safe_load((root / "databricks.yml").read_text(encoding="utf-8"))
    del root_file["artifacts"]
    (root / "databricks.yml").write_text(yaml.safe_dump(root_file, sort_keys=False), encoding="utf-8")


def test_a_module_beside_the_config_needs_no_wheel(copy: Path, tmp_path: Path) -> None:
    _beside_the_config(copy)
    assert user_code_problems(copy, TARGET) == []
    assert model_problems(copy) == [] and path_problems(copy) == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for job in JOBS:  # the synced config's folder holds the module: nothing on PYTHONPATH
        done = _validate(_job_argv(copy, job), elsewhere, None)
        assert done.returncode == 0 and "enrich(PythonStage)" in done.stdout, (job, done.stdout + done.stderr)
    (copy / "conf" / "clicks_enrich.py").unlink()
    problems = user_code_problems(copy, TARGET)
    assert len(problems) == 3 and all("module clicks_enrich is neither beside clicks.yml" in p for p in problems)

