"""A python stage's module is found beside the config, and a failed import says where it looked.

Issue 54, point 2: a user's ``sensors.py`` beside their ``pipeline.yml`` needed
``PYTHONPATH=.`` for every command, and the error was ``No module named 'sensors'``
with no hint. The stage's ``path`` option (default: the config file's folder) is tried
first; a module found there is pickled by value, so Spark's Python workers need not
import it (checked here by unpickling in a fresh interpreter that cannot import it).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark import cloudpickle

from quarantine.config import load_config
from quarantine.errors import ConfigError
from quarantine.stages import build_stages
from quarantine.stages.python import PythonStage


def _project(folder: Path, module: str, *, path: str | None = None, write_module: bool = True) -> Path:
    """``folder/pipeline.yml`` (decode → a python stage calling ``module.double_it``), and the module."""
    folder.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"function": f"{module}.double_it", "returns": "STRING"}
    if path is not None:
        options["path"] = path
    raw = {
        "pipeline": "p",
        "source": {"format": "delta", "path": "data/source"},
        "target": {"table": "data/target"},
        "errors": {"deadletterqueue.table.name": "data/quarantine"},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "doubled", "type": "python", "options": options},
        ],
    }
    conf = folder / "pipeline.yml"
    conf.write_text(yaml.safe_dump(raw), encoding="utf-8")
    if write_module:
        where = folder / path if path is not None else folder
        where.mkdir(parents=True, exist_ok=True)
        (where / f"{module}.py").write_text("def double_it(value):\n    return value * 2\n", encoding="utf-8")
    return conf


def _module_name() -> str:
    return f"sensors_{uuid.uuid4().hex[:8]}"  # each test its own: sys.modules keeps what it imported


def test_the_module_beside_the_config_is_found_from_another_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module_name()
    conf = _project(tmp_path / "project", module)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("PYTHONPATH", raising=False)

    stage = build_stages(load_config(conf).stages)[-1]

    assert isinstance(stage, PythonStage)
    assert stage.fn("ab") == "abab"
    assert stage.fn.__module__ == module
    assert str(tmp_path / "project") not in sys.path  # the folder is on sys.path only while importing


def test_a_module_found_beside_the_config_unpickles_where_it_cannot_be_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module_name()
    conf = _project(tmp_path / "project", module)
    monkeypatch.chdir(tmp_path)
    stage = build_stages(load_config(conf).stages)[-1]
    assert isinstance(stage, PythonStage)
    payload = cloudpickle.dumps(stage.fn)  # as pyspark ships a UDF to its Python workers

    # a worker: another interpreter, another folder, no PYTHONPATH; it cannot import the module
    worker = _unpickles_elsewhere(payload, tmp_path, "fn('xy')")
    assert worker.returncode == 0, worker.stderr.decode()
    assert worker.stdout.decode().strip() == "xyxy"


def test_the_path_option_names_another_folder_relative_to_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module_name()
    conf = _project(tmp_path / "project", module, path="lib")
    monkeypatch.chdir(tmp_path)

    config = load_config(conf)

    assert config.stages[-1].options["path"] == str(tmp_path / "project" / "lib")
    stage = build_stages(config.stages)[-1]
    assert isinstance(stage, PythonStage) and stage.fn(3) == 6


def test_a_module_that_is_nowhere_says_where_it_looked_and_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module_name()
    conf = _project(tmp_path / "project", module, write_module=False)
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigError) as raised:
        build_stages(load_config(conf).stages)

    message = str(raised.value)
    assert "stages[1].options.function" in message
    assert f"No module named '{module}'" in message
    assert f"looked in {tmp_path / 'project'}" in message  # the config's folder, by name
    assert "PYTHONPATH" in message
    assert f"Put {module}.py" in message and "stages[1].options.path" in message


def test_a_path_that_is_not_a_folder_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    conf = _project(tmp_path / "project", _module_name(), path="nope", write_module=False)

    with pytest.raises(ConfigError) as raised:
        load_config(conf)

    assert "stages[1].options.path" in str(raised.value)
    assert str(tmp_path / "project" / "nope") in str(raised.value)


def test_a_missing_import_inside_the_module_is_named_as_the_modules_own(tmp_path: Path) -> None:
    module = _module_name()
    conf = _project(tmp_path / "project", module)
    (tmp_path / "project" / f"{module}.py").write_text("import no_such_dependency_54\n", encoding="utf-8")

    with pytest.raises(ConfigError) as raised:
        build_stages(load_config(conf).stages)

    assert f"importing {module} raised ModuleNotFoundError: No module named 'no_such_dependency_54'" in str(
        raised.value
    )


def _unpickles_elsewhere(payload: bytes, cwd: Path, call: str) -> subprocess.CompletedProcess[bytes]:
    """``payload`` unpickled in a Python worker's shoes: another interpreter, another folder, no PYTHONPATH."""
    code = f"import pickle, sys; fn = pickle.loads(sys.stdin.buffer.read()); print({call})"
    return subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin"}, timeout=120)


def test_a_module_beside_the_config_is_shipped_even_when_its_folder_is_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spark-pipelines run`` (as ``spark-submit`` runs any Python file) puts the folder it runs in,
    a declarative project's root, on ``sys.path``: its Spark Connect server's workers do not have it."""
    module = _module_name()
    conf = _project(tmp_path / "project", module)
    monkeypatch.syspath_prepend(str(tmp_path / "project"))
    monkeypatch.chdir(tmp_path / "project")

    stage = build_stages(load_config(conf).stages)[-1]

    assert isinstance(stage, PythonStage)
    worker = _unpickles_elsewhere(cloudpickle.dumps(stage.fn), tmp_path, "fn('xy')")
    assert worker.returncode == 0, worker.stderr.decode()
    assert worker.stdout.decode().strip() == "xyxy"


def test_a_sibling_module_the_function_imports_from_its_folder_is_shipped_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module beside the config imports a helper module beside it: the workers get both."""
    module = _module_name()
    conf = _project(tmp_path / "project", module)
    helper = f"{module}_helpers"
    (tmp_path / "project" / f"{helper}.py").write_text("def twice(v):\n    return v * 2\n", encoding="utf-8")
    (tmp_path / "project" / f"{module}.py").write_text(
        f"from {helper} import twice\n\ndef double_it(value):\n    return twice(value)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    stage = build_stages(load_config(conf).stages)[-1]

    assert isinstance(stage, PythonStage)
    worker = _unpickles_elsewhere(cloudpickle.dumps(stage.fn), tmp_path, "fn('ab')")
    assert worker.returncode == 0, worker.stderr.decode()
    assert worker.stdout.decode().strip() == "abab"
