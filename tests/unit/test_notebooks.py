"""The Databricks notebooks: source format, valid Python, locally importable, current API.

Databricks' source format is a Python file whose first line is
``# Databricks notebook source`` and whose cells are separated by
``# COMMAND ----------`` lines. Each cell must be valid Python on its own (the
workspace runs cells one by one); ``dbutils`` and ``display`` exist only on
Databricks, so every use must sit in a ``try`` that handles ``NameError``; and
every ``from quarantine… import name`` must name something that exists, so a
renamed library function breaks this test rather than a job in production.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
EXPECTED = ("ingest.py", "triage.py", "replay.py", "getting_started.py")
DATABRICKS_ONLY = {"dbutils", "display"}


def _cells(text: str) -> list[str]:
    body = text.split("\n", 1)[1]
    return body.split(f"\n{SEPARATOR}\n")


def test_the_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS.glob("*.py")} >= set(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_has_the_databricks_header_and_cells(name: str) -> None:
    text = (NOTEBOOKS / name).read_text(encoding="utf-8")
    assert text.splitlines()[0] == HEADER
    cells = _cells(text)
    assert len(cells) >= 3, f"{name}: expected several cells separated by '{SEPARATOR}'"
    for line in text.splitlines():
        if line.startswith("# COMMAND"):
            assert line == SEPARATOR, f"{name}: malformed cell separator {line!r}"
    # the first cell documents the notebook in markdown
    assert cells[0].lstrip().startswith("# MAGIC %md"), f"{name}: first cell should be a markdown title"


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_and_each_cell_parse_as_python(name: str) -> None:
    text = (NOTEBOOKS / name).read_text(encoding="utf-8")
    ast.parse(text, filename=name)
    for i, cell in enumerate(_cells(text)):
        ast.parse(cell, filename=f"{name}[cell {i}]")


def _guarded(tree: ast.Module) -> set[int]:
    """Line numbers inside a ``try`` body whose handlers catch NameError."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = {
                n.id
                for h in node.handlers
                if h.type is not None
                for n in ast.walk(h.type)
                if isinstance(n, ast.Name)
            }
            if "NameError" in caught:
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        if hasattr(sub, "lineno"):
                            lines.add(sub.lineno)
    return lines


@pytest.mark.parametrize("name", EXPECTED)
def test_databricks_globals_are_only_used_behind_a_name_error_guard(name: str) -> None:
    tree = ast.parse((NOTEBOOKS / name).read_text(encoding="utf-8"))
    guarded = _guarded(tree)
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in DATABRICKS_ONLY]
    assert uses, f"{name}: expected widgets or display() (used behind a guard)"
    bad = [f"{n.id} at line {n.lineno}" for n in uses if n.lineno not in guarded]
    assert not bad, f"{name}: unguarded Databricks-only names: {bad}"


@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_imports_name_existing_library_objects(name: str) -> None:
    tree = ast.parse((NOTEBOOKS / name).read_text(encoding="utf-8"))
    imported = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "quarantine":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{name}: {node.module} has no {alias.name}"
                imported += 1
    assert imported >= 1, f"{name}: expected the notebook to use the quarantine library"


def test_replay_notebook_uses_the_library_replay_and_defaults_to_preview() -> None:
    text = (NOTEBOOKS / "replay.py").read_text(encoding="utf-8")
    assert "from quarantine.runners.replay import replay" in text
    assert 'widget("apply", "false"' in text


def test_triage_notebook_covers_stage_error_class_topic_day_raw_bytes_and_history() -> None:
    text = (NOTEBOOKS / "triage.py").read_text(encoding="utf-8")
    for needle in ("stage, error_class, topic", "to_date(first_seen_at)", "hex(", "is_valid_utf8(value)",
                   "posexplode(q.error_history)", "status = 'open'"):
        assert needle in text, f"triage.py: expected {needle!r}"


def _widget_cell(name: str) -> str:
    """The notebook's first code cell: its widgets, with nothing that starts Spark."""
    cell = _cells((NOTEBOOKS / name).read_text(encoding="utf-8"))[1]
    assert "get_spark" not in cell, f"{name}: the widget cell should not start Spark"
    return cell


@pytest.mark.parametrize("cwd", ["repo root (local)", "notebooks/ (a Databricks workspace)"])
def test_ingest_replay_and_triage_default_to_absolute_paths_wherever_they_run(
    cwd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: the replay notebook kept the local demo's relative paths and the triage
    notebook's default failed on a relative delta.`path`; a workspace runs a notebook from
    its own folder, not the repository root."""
    for var in ("QUARANTINE_CONF", "QUARANTINE_QUARANTINE_TABLE", "QUARANTINE_CATALOG", "QUARANTINE_OVERRIDES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(NOTEBOOKS.parent if cwd.startswith("repo") else NOTEBOOKS)
    replay: dict[str, object] = {}
    exec(compile(_widget_cell("replay.py"), "replay.py", "exec"), replay)  # the notebook's own cell
    conf = Path(str(replay["conf_path"]))
    assert conf.is_absolute() and conf == NOTEBOOKS.parent / "conf" / "orders_demo.yml" and conf.is_file()
    triage: dict[str, object] = {}
    exec(compile(_widget_cell("triage.py"), "triage.py", "exec"), triage)
    assert triage["source_ref"] == f"delta.`{NOTEBOOKS.parent / 'data' / 'demo' / 'quarantine'}`"
    ingest: dict[str, object] = {}  # it kept a relative conf/orders_demo.yml, missing from notebooks/
    exec(compile(_widget_cell("ingest.py"), "ingest.py", "exec"), ingest)
    assert ingest["conf_path"] == str(NOTEBOOKS.parent / "conf" / "orders_demo.yml")


def test_triage_makes_a_relative_path_absolute_and_quotes_catalog_names() -> None:
    ns: dict[str, object] = {}
    exec(compile(_widget_cell("triage.py"), "triage.py", "exec"), ns)
    table_ref = ns["table_ref"]
    assert table_ref("", "", "data/q") == f"delta.`{Path.cwd() / 'data' / 'q'}`"  # type: ignore[operator]
    assert table_ref("dev", "quarantine_dev", "quarantine") == "`dev`.`quarantine_dev`.`quarantine`"  # type: ignore[operator]
