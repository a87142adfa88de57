"""The package's modules import each other without a circle (issue 35).

Every ``import`` statement counts: at the top of a module, inside a function (an import
placed there to dodge a circle is still a circle) and under ``TYPE_CHECKING``. So does an
import in string form (issue 51): ``importlib.import_module("a.b")`` or ``__import__`` with a
literal name, a ``"a.b:attr"`` string (a factory named to be loaded later), and, in a module
that calls ``import_module``, any string that names one of the package's modules (a table of
names loaded lazily). A package's ``__init__`` that re-exports its modules is an edge to each
of them; importing ``a.b`` is an edge to ``a.b`` only (not to the package ``a``, which every
submodule's import runs first by Python's rules, not by design).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "quarantine"


def _module_name(path: Path, root: Path) -> str:
    parts = (root.name, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: ``"pkg.module:attr"``: a module named in a string, to be imported later.
_MODULE_ATTR = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):[A-Za-z_][\w.]*")
_IMPORT_CALLS = frozenset({"import_module", "__import__"})


def _string_imports(tree: ast.AST) -> list[str]:
    """The module names a file imports in string form (see the module doc)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)) in _IMPORT_CALLS]
    names = [c.args[0].value for c in calls if c.args and isinstance(c.args[0], ast.Constant)
             and isinstance(c.args[0].value, str)]
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    names += [m.group(1) for v in strings if (m := _MODULE_ATTR.fullmatch(v.strip()))]
    if calls:  # a module that imports by name: every module name it holds is one it may import
        names += [v.strip() for v in strings]
    return names


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``module -> the package modules it imports`` (every import statement, anywhere in the file,
    and every import in string form)."""
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] |= {n for n in _string_imports(tree) if n in files and n != module}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
            graph[module] |= {n for n in names if n in files and n != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, f"import circles (each a set of modules importing each other): {found}"


def test_the_check_finds_a_circle_through_an_import_inside_a_function() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_graph_counts_imports_inside_functions_and_under_type_checking() -> None:
    graph = import_graph()
    assert "quarantine.batch.run" in graph["quarantine.pipeline"]
    assert "quarantine.batch.plan" in graph["quarantine.batch.run"]
    # a command's handler imports what it runs inside itself, when it runs (a fast `--help`): still edges
    assert "quarantine.pipeline" in graph["quarantine.commands.run"]
    # the command table and the reads' engines are module names imported by name: edges too
    assert "quarantine.commands.inspect" in graph["quarantine.cli"]
    assert "quarantine.ops.spark_reads" in graph["quarantine.ops.reads"]


def test_the_graph_counts_imports_in_string_form(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "table.py").write_text('FACTORIES = {"a": "pkg.stage_a:build"}\n')
    (pkg / "stage_a.py").write_text("from pkg.table import FACTORIES\n")
    (pkg / "loader.py").write_text('import importlib\nimportlib.import_module("pkg.lazy")\n')
    (pkg / "lazy.py").write_text("import pkg.loader\n")
    (pkg / "names.py").write_text(
        'from importlib import import_module\n_LAZY = {"x": "pkg.later"}\nget = lambda n: import_module(_LAZY[n])\n'
    )
    (pkg / "later.py").write_text("from pkg import names\n")
    graph = import_graph(pkg)
    assert graph["pkg.table"] == {"pkg.stage_a"} and graph["pkg.loader"] == {"pkg.lazy"}
    assert graph["pkg.names"] == {"pkg.later"}
    expected = [["pkg.later", "pkg.names"], ["pkg.lazy", "pkg.loader"], ["pkg.stage_a", "pkg.table"]]
    assert sorted(circles(graph)) == expected


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its unit of the layout: a folder of the package
    (``quarantine.batch``) or a module at its top (``quarantine.pipeline``)."""
    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folders: dict[str, set[str]] = {unit(m): set() for m in graph}
    for module, imported in graph.items():
        folders[unit(module)] |= {unit(i) for i in imported} - {unit(module)}
    return folders


def test_the_packages_folders_import_each_other_one_way() -> None:
    """The folders are the layers docs/contributing.md's Layout reads top-down: a sink never
    reaches up into batch/, a runner never back into the facade or the operator's ops/."""
    found = circles(folder_graph(import_graph()))
    assert not found, f"folders importing each other (each a set of folders and top modules): {found}"


def test_the_folder_check_finds_a_sink_reaching_up_into_batch() -> None:
    graph = {"quarantine.batch.plan": {"quarantine.sinks.quarantine"},
             "quarantine.sinks.quarantine": {"quarantine.batch.coordinates"}, "quarantine.batch.coordinates": set()}
    assert circles(folder_graph(graph)) == [["quarantine.batch", "quarantine.sinks"]]
