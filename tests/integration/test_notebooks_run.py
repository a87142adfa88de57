"""Every notebook in notebooks/ runs, cell by cell, on local Spark + Delta with its default widgets.

The harness (``tests/support/notebooks.py``) gives the notebooks what a workspace gives
them (``spark``, a ``dbutils`` stub, ``display``, ``%sql`` cells) and fails naming the
notebook, cell and first line. The notebooks run from the ``notebooks/`` folder of a
copy of the repository layout, as a workspace runs them (its working directory is the
notebook's folder; the bundle root above it holds ``conf/``): the copy's ``conf/`` is the
repository's, and its ``data/demo`` holds what ``make demo`` writes (``quarantine
init-demo`` and one ``quarantine run`` of ``conf/orders_demo.yml``). No widget is
overridden: every default must work there, as on a developer's machine.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from tests.helpers import put_mlflow_store
from tests.support.notebooks import (
    PARAMETERS_WORKAROUND,
    NotebookCellError,
    NotebookRun,
    parse_notebook,
    run_notebook,
)

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))
RECORDS = 400


@pytest.fixture(scope="module")
def workspace(spark: Any, tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> Iterator[Path]:
    """The notebooks' working directory: ``<root>/notebooks``, with ``<root>/conf``, the demo's data
    and the module's own MLflow store (``<root>/notebooks/mlflow.db``, the demo's relative URI)."""
    root = tmp_path_factory.mktemp("bundle")
    shutil.copytree(REPO / "conf", root / "conf")
    (root / "notebooks").mkdir()
    put_mlflow_store(mlflow_template, root / "notebooks")
    with contextlib.chdir(root / "notebooks"):  # the demo's MLflow store (sqlite:///mlflow.db) lands here
        assert main(["init-demo", "--out", str(root / "data" / "demo"), "--records", str(RECORDS),
                     "--poison-rate", "0.1"]) == 0
        assert main(["run", "--conf", str(root / "conf" / "orders_demo.yml")]) == 0
    yield root / "notebooks"


@pytest.fixture(scope="module")
def default_run(spark: Any, workspace: Path) -> Callable[[str], NotebookRun]:
    """``default_run(name)``: the notebook's run with its default widgets (each notebook runs once)."""
    runs: dict[str, NotebookRun] = {}

    def run(name: str) -> NotebookRun:
        if name not in runs:
            runs[name] = run_notebook(REPO / "notebooks" / name, spark, cwd=workspace)
        return runs[name]

    return run


def test_the_harness_runs_every_notebook_in_the_folder() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"ingest.py", "triage.py", "replay.py", "getting_started.py"}


@pytest.mark.parametrize("notebook", [p.name for p in NOTEBOOKS])
def test_notebook_runs_every_cell_with_its_default_widgets(
    notebook: str, default_run: Callable[[str], NotebookRun], workspace: Path
) -> None:
    run = default_run(notebook)
    code = [c.number for c in parse_notebook((REPO / "notebooks" / notebook).read_text(encoding="utf-8"))
            if c.kind != "md"]
    assert run.exit_value is None and run.cells_run == code  # every code cell ran, in order
    # every default that is a path points into the bundle root, not the test's working directory
    paths = [v for v in run.widgets.values() if v.startswith("/")]
    assert all(Path(v).is_relative_to(workspace.parent) for v in paths), run.widgets


def test_ingest_reads_the_bundle_roots_config_from_the_notebooks_folder(
    default_run: Callable[[str], NotebookRun], workspace: Path
) -> None:
    """Issue 12: a relative default (conf/orders_demo.yml) failed from notebooks/ in a workspace."""
    run = default_run("ingest.py")
    assert run.widgets["conf"] == str(workspace.parent / "conf" / "orders_demo.yml")
    assert run.namespace["summary"].run.pipeline == "orders_demo"


def test_triage_reads_the_demo_quarantine_table(default_run: Callable[[str], NotebookRun], workspace: Path) -> None:
    run = default_run("triage.py")
    assert run.namespace["source_ref"] == f"delta.`{workspace.parent / 'data' / 'demo' / 'quarantine'}`"
    by_stage = run.displays[0]
    assert by_stage and sum(r["open_records"] for r in by_stage) > 0


def test_replay_notebook_previews_by_default_and_replays_when_apply_is_true(
    spark: Any, default_run: Callable[[str], NotebookRun], workspace: Path
) -> None:
    preview = default_run("replay.py")
    assert "result" not in preview.namespace
    assert {r["outcome"] for r in preview.displays[0]} == {"still failing"}  # nothing was fixed
    applied = run_notebook(REPO / "notebooks" / "replay.py", spark, cwd=workspace,
                           params={"apply": "true", "predicate": "stage = 'decode'"})
    result = applied.namespace["result"]
    assert result.selected > 0 and result.replayed == 0 and result.still_failing == result.selected


def test_getting_started_replays_the_fixed_records_and_loses_none(
    default_run: Callable[[str], NotebookRun], workspace: Path
) -> None:
    run = default_run("getting_started.py")
    ns = run.namespace
    assert ns["in_source"] == 2000 == ns["in_target"] + ns["still_open"]
    by_stage = {(r["status"], r["stage"]): r["records"] for r in run.displays[-1]}
    assert by_stage[("replayed", "expect_order")] > 0  # the refunded orders, now valid
    assert by_stage[("open", "expect_order")] > 0  # bad e-mail addresses still fail
    assert {r["records"] for r in run.displays[-1] if r["status"] == "replayed"} == {
        by_stage[("replayed", "expect_order")]}  # nothing else was replayed
    assert (workspace.parent / "data" / "getting_started" / "quarantine" / "_delta_log").is_dir()


def test_getting_started_runs_on_catalog_tables_given_by_its_widgets(
    spark: Any, workspace: Path, tmp_path: Path
) -> None:
    """The Unity Catalog form (``catalog``, ``schema`` widgets), on the local session's catalog."""
    spark.sql(f"CREATE SCHEMA nb_getting_started LOCATION '{tmp_path / 'schema'}'")
    try:
        run = run_notebook(REPO / "notebooks" / "getting_started.py", spark, cwd=workspace,
                           params={"catalog": "spark_catalog", "schema": "nb_getting_started"})
        ns = run.namespace
        assert ns["quarantine_table"] == "spark_catalog.nb_getting_started.getting_started_quarantine"
        assert ns["in_source"] == 2000 == ns["in_target"] + ns["still_open"]
        assert {r["status"] for r in run.displays[-1]} == {"open", "replayed"}
        assert spark.catalog.tableExists("spark_catalog.nb_getting_started.getting_started_orders")
    finally:
        spark.sql("DROP SCHEMA IF EXISTS nb_getting_started CASCADE")


BROKEN_SQL = """# Databricks notebook source
# MAGIC %md
# MAGIC # broken

# COMMAND ----------

spark.range(3).createOrReplaceTempView("three")

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT id, no_such_column FROM three
"""

LAZY_FAILURE = """# Databricks notebook source
df = spark.range(3).selectExpr("assert_true(id < 1, 'id too large') AS ok")

# COMMAND ----------

display(df)
"""

WIDGET_SQL = """# Databricks notebook source
dbutils.widgets.text("n", "2")
dbutils.widgets.text("table", "three")
spark.range(5).createOrReplaceTempView("three")

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT count(*) AS c FROM ${table} WHERE id < ${n};
# MAGIC SELECT 'a;b' AS s; -- a ; in a string and a comment
# MAGIC SELECT count(*) AS c FROM three WHERE id < :n
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bad_sql_cell_fails_the_run_naming_the_notebook_cell_and_first_line(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(NotebookCellError) as caught:
        run_notebook(_write(tmp_path, "broken.py", BROKEN_SQL), spark)
    assert caught.value.number == 3
    assert str(caught.value).startswith("broken.py: cell 3 ('%sql SELECT id, no_such_column FROM three') failed:")
    assert "no_such_column" in str(caught.value)


def test_display_runs_the_query_so_a_lazy_failure_fails_its_cell(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(NotebookCellError) as caught:
        run_notebook(_write(tmp_path, "lazy.py", LAZY_FAILURE), spark)
    assert caught.value.number == 2 and caught.value.first_line == "display(df)"
    assert "id too large" in str(caught.value)


def test_sql_cells_substitute_widget_values_and_run_every_statement(spark: Any, tmp_path: Path) -> None:
    run = run_notebook(_write(tmp_path, "widgets.py", WIDGET_SQL), spark)
    assert [list(map(tuple, d)) for d in run.displays] == [[(2,)], [("a;b",)], [(2,)]]
    run = run_notebook(_write(tmp_path, "widgets.py", WIDGET_SQL), spark, params={"n": "4"})
    assert [d[0]["c"] for d in (run.displays[0], run.displays[2])] == [4, 4]
    assert spark.conf.get(PARAMETERS_WORKAROUND, "false") == "false"  # set for the marked statement only
