"""The notebook harness (tests/support/notebooks.py) fails where a workspace would, naming the cell.

No Spark here: these notebooks are Python and markdown only (``spark`` is None); the
SQL and ``display`` cases run in tests/integration/test_notebooks_run.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.notebooks import (
    NotebookCellError,
    NotebookError,
    parse_notebook,
    run_notebook,
    split_sql,
    sql_parameters,
    substitute_widgets,
)

SEP = "\n# COMMAND ----------\n"


def _notebook(tmp_path: Path, *cells: str, name: str = "nb.py") -> Path:
    path = tmp_path / name
    path.write_text("# Databricks notebook source\n" + SEP.join(cells) + "\n", encoding="utf-8")
    return path


def test_a_raising_cell_fails_the_run_naming_the_notebook_cell_number_and_first_line(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, "# MAGIC %md\n# MAGIC # title", "x = 1", "# why\ny = x / 0\nz = 2", "ran = True")
    with pytest.raises(NotebookCellError) as caught:
        run_notebook(nb, None)
    assert str(caught.value) == "nb.py: cell 3 ('y = x / 0') failed: ZeroDivisionError: division by zero"
    assert caught.value.number == 3 and isinstance(caught.value.__cause__, ZeroDivisionError)


def test_cells_share_one_namespace_and_markdown_is_skipped(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, "# MAGIC %md\n# MAGIC not python", "a = [1]", "a.append(2)", "# MAGIC %md\n# MAGIC end")
    run = run_notebook(nb, None)
    assert run.namespace["a"] == [1, 2] and run.cells_run == [2, 3]


def test_widgets_take_their_defaults_or_the_given_parameters(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, "\n".join([
        'dbutils.widgets.text("conf", "conf/x.yml", "config")',
        'dbutils.widgets.dropdown("apply", "false", ["true", "false"])',
        'dbutils.widgets.multiselect("stages", "a,b", ["a", "b", "c"])',
        'values = dbutils.widgets.getAll()',
        'apply = dbutils.widgets.get("apply")',
    ]))
    assert run_notebook(nb, None).namespace["values"] == {"conf": "conf/x.yml", "apply": "false", "stages": "a,b"}
    assert run_notebook(nb, None, params={"apply": "true"}).namespace["apply"] == "true"
    with pytest.raises(NotebookCellError, match=r"widget 'apply': value 'yes' is not one of its choices"):
        run_notebook(nb, None, params={"apply": "yes"})


def test_a_parameter_that_names_no_widget_is_an_error(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, 'dbutils.widgets.text("conf", "c.yml")')
    with pytest.raises(NotebookError, match=r"nb.py: parameter\(s\) \['cnof'\] name no widget"):
        run_notebook(nb, None, params={"cnof": "other.yml"})


def test_reading_an_undefined_widget_names_it(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, 'dbutils.widgets.text("conf", "c.yml")', 'dbutils.widgets.get("catalog")')
    expected = r"cell 2 .*no widget or parameter named 'catalog' \(defined: \['conf'\]\)"
    with pytest.raises(NotebookCellError, match=expected):
        run_notebook(nb, None)


def test_notebook_exit_ends_the_run_normally_with_its_value(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, "a = 1", 'dbutils.notebook.exit("done: 1")', "raise AssertionError('not run')")
    run = run_notebook(nb, None)
    assert run.exit_value == "done: 1" and run.cells_run == [1, 2]


def test_secrets_come_from_the_test_and_an_unknown_one_fails_clearly(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, 'password = dbutils.secrets.get("quarantine", "kafka-password")')
    run = run_notebook(nb, None, secrets={("quarantine", "kafka-password"): "s3cret"})
    assert run.namespace["password"] == "s3cret"
    with pytest.raises(NotebookCellError, match=r"no secret 'kafka-password' in scope 'quarantine' "
                                                r"\(the test gave: \['quarantine/kafka-username'\]\)"):
        run_notebook(nb, None, secrets={("quarantine", "kafka-username"): "u"})


@pytest.mark.parametrize(("magic", "message"), [
    ("%pip install requests", "%pip is not run by the harness: declare the dependency in pyproject.toml"),
    ("%run ./other", "%run is not run by the harness: import the code from the package instead"),
    ("%scala println(1)", "%scala cells are not run by the harness"),
])
def test_unsupported_magics_are_refused_naming_the_cell(tmp_path: Path, magic: str, message: str) -> None:
    nb = _notebook(tmp_path, "a = 1", f"# MAGIC {magic}")
    with pytest.raises(NotebookCellError, match=rf"nb.py: cell 2 \('{magic.split()[0]}.*{message.split(':')[0]}"):
        run_notebook(nb, None)


def test_dbutils_parts_the_harness_does_not_provide_fail_by_name(tmp_path: Path) -> None:
    nb = _notebook(tmp_path, 'dbutils.fs.ls("/")')
    with pytest.raises(NotebookCellError, match=r"dbutils.fs is not provided by the notebook harness"):
        run_notebook(nb, None)


def test_the_working_directory_is_the_given_one_while_it_runs_and_restored_after(tmp_path: Path) -> None:
    before = Path.cwd()
    (tmp_path / "nbs").mkdir()
    nb = _notebook(tmp_path, "import os\ncwd = os.getcwd()")
    assert run_notebook(nb, None, cwd=tmp_path / "nbs").namespace["cwd"] == str(tmp_path / "nbs")
    assert Path.cwd() == before


def test_parsing_rejects_a_missing_header_and_a_magic_without_a_command() -> None:
    with pytest.raises(NotebookError, match="the first line must be '# Databricks notebook source'"):
        parse_notebook("import os\n", "x.py")
    with pytest.raises(NotebookError, match="cell 1 is a # MAGIC cell without a %magic"):
        parse_notebook("# Databricks notebook source\n# MAGIC SELECT 1\n", "x.py")


def test_a_sql_cells_first_line_is_its_first_statement() -> None:
    (cell,) = parse_notebook("# Databricks notebook source\n# MAGIC %sql\n# MAGIC\n# MAGIC SELECT 1\n# MAGIC FROM t\n")
    assert (cell.kind, cell.source, cell.first_line) == ("sql", "SELECT 1\nFROM t", "%sql SELECT 1")


def test_sql_splits_at_semicolons_outside_quotes_and_comments() -> None:
    text = "SELECT ';' AS a; -- b; c\nSELECT `x;y` FROM t /* ; */;\n-- only a comment;\n"
    assert split_sql(text) == ["SELECT ';' AS a", "-- b; c\nSELECT `x;y` FROM t /* ; */"]


def test_named_parameters_and_widget_substitution() -> None:
    assert sql_parameters("SELECT ':no', a::int FROM t WHERE p = :pipeline AND d > :days -- :x") == [
        "pipeline", "days"]
    assert substitute_widgets("SELECT * FROM ${table}", {"table": "delta.`/q`"}) == "SELECT * FROM delta.`/q`"
    with pytest.raises(NotebookError, match=r"\$\{tabel\} names no widget \(widgets: \['table'\]\)"):
        substitute_widgets("SELECT * FROM ${tabel}", {"table": "t"})
