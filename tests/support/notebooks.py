"""Run a Databricks source-format notebook cell by cell, locally, the way a workspace would.

A notebook in ``notebooks/`` is a ``.py`` file whose first line is ``# Databricks
notebook source`` and whose cells are separated by ``# COMMAND ----------`` lines;
a cell whose lines all start with ``# MAGIC`` is a magic cell (``%md``, ``%sql``, …).
:func:`run_notebook` executes the cells in order in one namespace holding what a
workspace provides: ``spark`` (the caller's session), ``sc``, ``dbutils`` (a stub:
widgets, ``notebook.exit``, ``secrets.get``), ``display`` and ``displayHTML``.

* Python cells run with ``exec``; a trailing expression that is a DataFrame is
  displayed, as in a workspace.
* ``display(df)`` materialises the frame (``df.limit(20).collect()``), so a query
  that only fails when it runs fails its cell.
* ``%sql`` cells run statement by statement with ``spark.sql``, each result
  materialised; ``${name}`` is replaced by the widget's value and ``:name`` markers
  are bound to widget values, as Databricks does (see :data:`PARAMETERS_WORKAROUND`).
* ``%md`` cells are skipped; ``%pip``, ``%run``, ``%sh`` and other magics are refused
  with a :class:`NotebookError` (declare a dependency in pyproject.toml, import code
  from the package).
* Widgets take their default value unless the caller passes ``params`` (a job's
  parameters); a parameter that names no widget the notebook defines is an error.
* ``dbutils.notebook.exit(value)`` ends the run normally: the remaining cells are not
  run and :attr:`NotebookRun.exit_value` is ``value``.

Any other error stops the run with a :class:`NotebookCellError` naming the notebook,
the cell's number (1-based, counting every cell as the workspace does) and its first line.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quarantine.spark.session import session_setting

__all__ = [
    "HEADER",
    "PARAMETERS_WORKAROUND",
    "SEPARATOR",
    "Cell",
    "DbutilsStub",
    "NotebookCellError",
    "NotebookError",
    "NotebookExit",
    "NotebookRun",
    "parse_notebook",
    "run_notebook",
    "split_sql",
    "sql_parameters",
    "substitute_widgets",
]

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC = "# MAGIC"
#: Rows a ``display`` call materialises (and keeps) per frame.
DISPLAY_ROWS = 20


class NotebookError(Exception):
    """A notebook the harness cannot run as written (bad format, refused magic, bad widget use)."""


class NotebookCellError(NotebookError):
    """A cell failed; the message names the notebook, the cell number and the cell's first line."""

    def __init__(self, notebook: str, number: int, first_line: str, cause: BaseException) -> None:
        self.notebook = notebook
        self.number = number
        self.first_line = first_line
        super().__init__(
            f"{notebook}: cell {number} ({first_line!r}) failed: {type(cause).__name__}: {_first_lines(cause)}"
        )


class NotebookExit(Exception):  # noqa: N818 - it is not an error: dbutils.notebook.exit's normal end
    """Raised by ``dbutils.notebook.exit(value)``; the harness ends the run with ``value``."""

    def __init__(self, value: str) -> None:
        self.value = value
        super().__init__(value)


def _first_lines(exc: BaseException, lines: int = 6) -> str:
    """The start of an exception's message (a JVM error's message carries its whole stack)."""
    return "\n".join(str(exc).splitlines()[:lines])


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Cell:
    """One cell of a notebook.

    Attributes:
        number: 1-based position in the notebook.
        kind: ``python`` or the magic's name without ``%`` (``md``, ``sql``, ``pip``, …).
        source: the code: Python as written, or a magic cell's body without the
            ``# MAGIC`` prefixes and the ``%magic`` word.
        first_line: the first non-blank line, as the workspace shows it (``%sql SELECT …``).
    """

    number: int
    kind: str
    source: str
    first_line: str


def parse_notebook(text: str, name: str = "notebook") -> list[Cell]:
    """The cells of a source-format notebook.

    Raises:
        NotebookError: the header is missing, or a cell mixes ``# MAGIC`` lines with code.
    """
    head, _, body = text.partition("\n")
    if head.rstrip() != HEADER:
        raise NotebookError(f"{name}: the first line must be {HEADER!r}, found {head!r}")
    cells: list[Cell] = []
    for number, raw in enumerate(re.split(rf"^{re.escape(SEPARATOR)}[ \t]*$", body, flags=re.M), start=1):
        lines = [ln for ln in raw.strip("\n").splitlines() if not ln.startswith("# DBTITLE")]
        code = [ln for ln in lines if ln.strip()]
        if code and all(ln.startswith(MAGIC) for ln in code):
            unmagic = [ln[len(MAGIC) + 1:] if ln.startswith(MAGIC + " ") else ln[len(MAGIC):] for ln in lines]
            text_ = "\n".join(unmagic).strip("\n")
            first = text_.lstrip().splitlines()[0]
            word, _, rest = first.partition(" ")
            if not word.startswith("%"):
                raise NotebookError(f"{name}: cell {number} is a # MAGIC cell without a %magic: {first!r}")
            source = (rest + "\n" + text_.lstrip().partition("\n")[2]).strip("\n")
            shown = first if rest.strip() else f"{word} {next((s for s in source.splitlines() if s.strip()), '')}"
            cells.append(Cell(number, word[1:], source, shown.strip()))
        elif code and code[0].startswith(MAGIC):
            raise NotebookError(f"{name}: cell {number} mixes '# MAGIC' lines with code: {code[0]!r}")
        else:
            first = next((ln for ln in code if not ln.lstrip().startswith("#")), code[0] if code else "")
            cells.append(Cell(number, "python", "\n".join(lines), first.strip()))
    return cells


# --------------------------------------------------------------------------- SQL


_SQL_TOKENS = re.compile(
    r"""(?P<skip>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.)*"|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/)"""
    r"""|(?P<semi>;)|(?P<cast>::)|(?P<param>(?<![\w:]):(?P<name>[A-Za-z_]\w*))""",
    re.S,
)


def split_sql(text: str) -> list[str]:
    """The statements of a ``%sql`` cell: split at ``;`` outside quotes and comments, blanks dropped."""
    statements, start = [], 0
    for m in _SQL_TOKENS.finditer(text):
        if m.group("semi"):
            statements.append(text[start:m.start()])
            start = m.end()
    statements.append(text[start:])
    return [s.strip() for s in statements if _strip_comments(s).strip()]


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", "", sql, flags=re.S)


def sql_parameters(statement: str) -> list[str]:
    """The named parameter markers (``:name``) of a statement, outside quotes and comments, in order."""
    return [m.group("name") for m in _SQL_TOKENS.finditer(statement) if m.group("param")]


def substitute_widgets(statement: str, values: Mapping[str, str]) -> str:
    """Replace ``${name}`` with the widget's value (Databricks' legacy SQL substitution).

    Raises:
        NotebookError: ``${name}`` names no widget.
    """

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise NotebookError(f"${{{name}}} names no widget (widgets: {sorted(values) or 'none'})")
        return values[name]

    return re.sub(r"\$\{(\w+)\}", value, statement)


# --------------------------------------------------------------------------- dbutils


class _Widgets:
    """``dbutils.widgets``: definitions take their default unless a parameter was given."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self._params = {k: str(v) for k, v in params.items()}
        self._values: dict[str, str] = {}

    def _define(self, name: str, default: str, choices: Sequence[str] | None = None, multi: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise NotebookError(f"a widget needs a non-empty name, got {name!r}")
        value = self._params.get(name, default)
        if value is None:
            raise NotebookError(f"widget {name!r}: a default value is required, got None")
        if choices is not None:
            picked = value.split(",") if multi else [value]
            bad = [p for p in picked if p not in choices]
            if bad:
                raise NotebookError(f"widget {name!r}: value {value!r} is not one of its choices {list(choices)}")
        self._values[name] = str(value)

    def text(self, name: str, defaultValue: str, label: str | None = None) -> None:  # noqa: N803 - dbutils' names
        self._define(name, defaultValue)

    def dropdown(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue, choices)

    def combobox(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue)  # a combobox also takes values outside its choices

    def multiselect(self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None) -> None:  # noqa: N803
        self._define(name, defaultValue, choices, multi=True)

    def get(self, name: str) -> str:
        if name in self._values:
            return self._values[name]
        if name in self._params:  # a job parameter is readable without a widget, as on Databricks
            return self._params[name]
        raise NotebookError(f"dbutils.widgets.get({name!r}): no widget or parameter named {name!r} "
                            f"(defined: {sorted(self._values) or 'none'})")

    def getArgument(self, name: str, defaultValue: str | None = None) -> str | None:  # noqa: N802,N803
        try:
            return self.get(name)
        except NotebookError:
            return defaultValue

    def getAll(self) -> dict[str, str]:  # noqa: N802 - dbutils' name
        return {**self._params, **self._values}

    def remove(self, name: str) -> None:
        if name not in self._values:
            raise NotebookError(f"dbutils.widgets.remove({name!r}): no such widget")
        del self._values[name]

    def removeAll(self) -> None:  # noqa: N802 - dbutils' name
        self._values.clear()

    def unused_params(self) -> list[str]:
        """Parameters given that no widget used: a typo in the caller, not a value."""
        return sorted(set(self._params) - set(self._values))


class _Notebook:
    def exit(self, value: Any = "") -> None:
        raise NotebookExit(str(value))

    def run(self, path: str, *args: Any, **kwargs: Any) -> str:
        raise NotebookError(f"dbutils.notebook.run({path!r}) is not run by the harness: "
                            "import the code from the package instead")


class _Secrets:
    def __init__(self, secrets: Mapping[tuple[str, str], str]) -> None:
        self._secrets = dict(secrets)

    def get(self, scope: str, key: str) -> str:
        if (scope, key) not in self._secrets:
            known = sorted(f"{s}/{k}" for s, k in self._secrets)
            raise NotebookError(f"dbutils.secrets.get: no secret {key!r} in scope {scope!r} "
                                f"(the test gave: {known or 'none'})")
        return self._secrets[(scope, key)]

    def listScopes(self) -> list[str]:  # noqa: N802 - dbutils' name
        return sorted({s for s, _ in self._secrets})


class DbutilsStub:
    """What a notebook's ``dbutils`` offers under the harness: ``widgets``, ``notebook``, ``secrets``.

    Anything else (``fs``, ``jobs``, ``library``…) raises a :class:`NotebookError`
    naming it, so a notebook that starts using it fails clearly rather than silently.
    """

    def __init__(self, params: Mapping[str, str] | None = None,
                 secrets: Mapping[tuple[str, str], str] | None = None) -> None:
        self.widgets = _Widgets(params or {})
        self.notebook = _Notebook()
        self.secrets = _Secrets(secrets or {})

    def __getattr__(self, name: str) -> Any:
        raise NotebookError(f"dbutils.{name} is not provided by the notebook harness "
                            "(tests/support/notebooks.py: widgets, notebook, secrets)")


# --------------------------------------------------------------------------- running


@dataclass
class NotebookRun:
    """What a run did.

    Attributes:
        name: the notebook's file name.
        cells_run: numbers of the code cells that ran (markdown cells are not counted).
        displays: one entry per ``display``: the materialised rows (or the object shown).
        exit_value: the value given to ``dbutils.notebook.exit``, or None.
        namespace: the notebook's globals after the run.
        widgets: every widget's value.
    """

    name: str
    cells_run: list[int] = field(default_factory=list)
    displays: list[Any] = field(default_factory=list)
    exit_value: str | None = None
    namespace: dict[str, Any] = field(default_factory=dict)
    widgets: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def _working_directory(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _display(run: NotebookRun) -> Any:
    def display(obj: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(obj, "isStreaming", False):
            raise NotebookError("display() of a streaming DataFrame is not run by the harness")
        if hasattr(obj, "limit") and hasattr(obj, "collect"):  # a DataFrame: run it
            run.displays.append(obj.limit(DISPLAY_ROWS).collect())
        else:
            run.displays.append(obj)

    return display


def _run_python(cell: Cell, name: str, ns: dict[str, Any]) -> None:
    tree = ast.parse(cell.source, filename=f"{name} [cell {cell.number}]")
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    exec(compile(tree, f"{name} [cell {cell.number}]", "exec"), ns)
    if last is not None:  # a workspace shows the cell's last expression; a DataFrame is displayed
        value = eval(compile(ast.Expression(last.value), f"{name} [cell {cell.number}]", "eval"), ns)
        if hasattr(value, "limit") and hasattr(value, "collect"):
            ns["display"](value)


def _run_sql(cell: Cell, ns: dict[str, Any], widgets: _Widgets) -> None:
    spark = ns["spark"]
    values = widgets.getAll()
    for statement in split_sql(cell.source):
        statement = substitute_widgets(statement, values)
        names = sql_parameters(statement)
        missing = [n for n in names if n not in values]
        if missing:
            raise NotebookError(f"SQL parameter marker(s) {[':' + n for n in missing]} name no widget "
                                f"(widgets: {sorted(values) or 'none'})")
        args = {n: values[n] for n in names}
        if not args:
            ns["display"](spark.sql(statement))
            continue
        with session_setting(spark, PARAMETERS_WORKAROUND, "true"):
            ns["display"](spark.sql(statement, args=args))


#: Delta's SQL parser (delta-spark 4.1) drops named parameter markers on Spark 4.1
#: (UNBOUND_SQL_PARAMETER; delta-io/delta#7640, apache/spark#55392); Spark's legacy
#: constants-only substitution binds them. Databricks binds them natively, so the harness
#: sets it around a ``%sql`` statement that has markers, and nowhere else.
PARAMETERS_WORKAROUND = "spark.sql.legacy.parameterSubstitution.constantsOnly"


_REFUSED = {
    "pip": "%pip is not run by the harness: declare the dependency in pyproject.toml",
    "run": "%run is not run by the harness: import the code from the package instead",
    "sh": "%sh is not run by the harness: do it in Python",
    "fs": "%fs is not run by the harness",
}


def run_notebook(
    path: Path,
    spark: Any,
    *,
    params: Mapping[str, str] | None = None,
    secrets: Mapping[tuple[str, str], str] | None = None,
    cwd: Path | None = None,
) -> NotebookRun:
    """Run every cell of the notebook at ``path`` in order, in one namespace.

    Args:
        path: a source-format notebook.
        spark: the session the notebook sees as ``spark``.
        params: widget values, as a job's parameters (default: every widget's default).
        secrets: ``{(scope, key): value}`` for ``dbutils.secrets.get``.
        cwd: the working directory while it runs (a workspace runs a notebook from its
            own folder); restored afterwards.

    Returns:
        The run: cells run, materialised displays, the exit value, the namespace.

    Raises:
        NotebookCellError: a cell raised; it names the notebook, cell number and first line.
        NotebookError: the notebook is malformed, or a parameter names no widget.
    """
    name = path.name
    cells = parse_notebook(path.read_text(encoding="utf-8"), name)
    dbutils = DbutilsStub(params, secrets)
    run = NotebookRun(name)
    ns: dict[str, Any] = {
        "__name__": "__main__",
        "__file__": str(path),
        "spark": spark,
        "sc": getattr(spark, "sparkContext", None),
        "dbutils": dbutils,
        "display": _display(run),
        "displayHTML": run.displays.append,
    }
    run.namespace = ns
    with _working_directory(cwd):
        for cell in cells:
            if cell.kind == "md":
                continue
            try:
                if cell.kind in _REFUSED:
                    raise NotebookError(_REFUSED[cell.kind])
                if cell.kind == "python":
                    _run_python(cell, name, ns)
                elif cell.kind == "sql":
                    _run_sql(cell, ns, dbutils.widgets)
                else:
                    raise NotebookError(f"%{cell.kind} cells are not run by the harness (python, sql, md are)")
            except NotebookExit as end:
                run.cells_run.append(cell.number)
                run.exit_value = end.value
                break
            except Exception as exc:
                raise NotebookCellError(name, cell.number, cell.first_line, exc) from exc
            run.cells_run.append(cell.number)
    run.widgets = dbutils.widgets.getAll()
    unused = dbutils.widgets.unused_params()
    if unused:
        raise NotebookError(f"{name}: parameter(s) {unused} name no widget the notebook defines")
    return run
