"""Column names are named through :mod:`quarantine.columns`, their one home, never spelled in another module.

Every column and table name used in more than one module comes from ``quarantine/columns.py``,
and only from there: :mod:`quarantine.schema` builds the tables' Spark types from those names
and exports none of them again. The Kafka source's columns (``topic``, ``partition``, ``offset``,
``key``, ``value``, ``headers``, ``timestamp``, ``timestampType``) are the ones spelled most
often; this reads every module's syntax tree (no Spark) and fails on a literal one of them
where it names a column:

- an argument of a column-taking call (``F.col``, ``select``, ``groupBy``, ``alias``, ``getField``,
  ``F.max``, ``Window.partitionBy``...);
- a subscript or ``.get`` of a row, frame or record (``r["offset"]``, ``rec.get("timestamp")``);
- a tuple, list, set or dict-key literal holding two or more of the names (a column list:
  ``("topic", "partition", "offset")``, ``{"key": ..., "topic": ...}``);
- a stage's input column (``input = "value"``, ``input=spec.input or "value"``) and a
  ``*_col`` parameter's default.

``key`` and ``value`` are common words: a subscript, a ``.get`` or a list holding only those
two is not taken for a column (a protobuf map entry's fields, a Spark SQL ``SHOW TBLPROPERTIES``
row, a Great Expectations kwarg). SQL text (the ``.sql`` files, which are for users) is not read.

The tables' own columns (the quarantine table's, the error struct's, the metrics table's:
``pipeline``, ``status``, ``error_class``, ``stage``...) are common words too: for them only
an argument of a column-taking call counts (``F.col("status")``, ``.alias("stage")``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from quarantine import columns, schema
from quarantine.schema import ERROR_HISTORY_ENTRY, ERROR_STRUCT, KAFKA_SOURCE_SCHEMA, METRICS_SCHEMA, QUARANTINE_SCHEMA

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "quarantine"
DEFINED_IN = PACKAGE / "columns.py"

NAMES = frozenset(KAFKA_SOURCE_SCHEMA.fieldNames())
#: The tables' own column names (all but Kafka's; the metrics table's ``value`` is Kafka's word).
TABLE_NAMES = frozenset(
    n for s in (QUARANTINE_SCHEMA, ERROR_STRUCT, ERROR_HISTORY_ENTRY, METRICS_SCHEMA) for n in s.fieldNames()
) - NAMES
#: The names that are no common word: a subscript or ``.get`` with one of them reads a column.
UNAMBIGUOUS = NAMES - {"key", "value"}

#: Calls whose positional arguments are column names (pyspark's DataFrame, Column, Window,
#: GroupedData and functions).
COLUMN_CALLS = frozenset({
    "col", "column", "select", "drop", "withColumn", "withColumnRenamed", "withColumns", "groupBy", "groupby",
    "orderBy", "sort", "sortWithinPartitions", "partitionBy", "repartition", "dropDuplicates", "getField",
    "getItem", "alias", "min", "max", "sum", "count", "first", "last", "xxhash64", "hash", "struct",
    "array", "transform", "isNull", "isNotNull", "coalesce", "collect_list", "collect_set", "agg",
    "asc", "desc", "asc_nulls_first", "asc_nulls_last", "desc_nulls_first", "desc_nulls_last",
    "withField", "dropFields",
})


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _is_column_list(elts: list[ast.expr | None]) -> bool:
    names = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in NAMES}
    return len(names) >= 2 and bool(names & UNAMBIGUOUS)


def _input_slot(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node`` is (part of) the value given a stage's ``input`` or a ``*_col`` parameter."""
    while isinstance(parents.get(node), ast.BoolOp | ast.IfExp):
        node = parents[node]
    parent = parents.get(node)
    if isinstance(parent, ast.keyword):
        return parent.arg == "input"
    if isinstance(parent, ast.AnnAssign | ast.Assign):
        targets = [parent.target] if isinstance(parent, ast.AnnAssign) else parent.targets
        return any(isinstance(t, ast.Name) and t.id == "input" for t in targets)
    if isinstance(parent, ast.arguments):
        positional = [*parent.posonlyargs, *parent.args]
        pairs = list(zip(positional[len(positional) - len(parent.defaults):], parent.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(parent.kwonlyargs, parent.kw_defaults, strict=True) if d is not None]
        return any(d is node and (a.arg == "input" or a.arg.endswith("_col")) for a, d in pairs)
    return False


def column_literals(source: str) -> list[tuple[int, str, str]]:
    """(line, name, how) for each literal column name that ``source`` uses as a column."""
    tree = ast.parse(source)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        parent = parents.get(node)
        if node.value in TABLE_NAMES:
            if isinstance(parent, ast.Call) and node in parent.args and _callee(parent) in COLUMN_CALLS:
                found.append((node.lineno, node.value, f"{_callee(parent)}(...)"))
            continue
        if node.value not in NAMES:
            continue
        how = None
        if isinstance(parent, ast.Call) and node in parent.args:
            name = _callee(parent)
            if name in COLUMN_CALLS:
                how = f"{name}(...)"
            elif name == "get" and node is parent.args[0] and node.value in UNAMBIGUOUS:
                how = ".get(...)"
        elif isinstance(parent, ast.Subscript) and parent.slice is node and node.value in UNAMBIGUOUS:
            how = "[...]"
        elif isinstance(parent, ast.Tuple | ast.List | ast.Set) and _is_column_list(list(parent.elts)):
            how = "a column list"
        elif isinstance(parent, ast.Dict) and node in parent.keys and _is_column_list(parent.keys):
            how = "a dict of columns"
        elif _input_slot(node, parents):
            how = "an input column"
        if how is not None:
            found.append((node.lineno, node.value, how))
    return sorted(found)


def test_only_columns_spells_the_column_names() -> None:
    spelled = [
        f"{path.relative_to(REPO).as_posix()}:{line}: {name!r} in {how}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != DEFINED_IN
        for line, name, how in column_literals(path.read_text(encoding="utf-8"))
    ]
    assert not spelled, (
        "column names spelled as literals (use the constants of quarantine/columns.py: TOPIC, PARTITION, "
        "OFFSET, KEY, VALUE, HEADERS, SOURCE_KEY..., PIPELINE, STATUS, STAGE, ERROR_CLASS, RUN_ID...):\n"
        + "\n".join(spelled)
    )


def test_the_check_finds_each_kind_of_use() -> None:
    source = '''
F.col("topic"); df.select("key", F.col("x")); r["offset"]; rec.get("timestamp")
keys = ("topic", "partition", "offset")
coords = {"key": 1, "headers": 2}
class S:
    input: str | None = "value"
def f(topic_col="topic"): return g(input=spec.input or "value")
'''
    assert [(line, name) for line, name, _ in column_literals(source)] == [
        (2, "key"), (2, "offset"), (2, "timestamp"), (2, "topic"),
        (3, "offset"), (3, "partition"), (3, "topic"),
        (4, "headers"), (4, "key"),
        (6, "value"),
        (7, "topic"), (7, "value"),
    ]


def test_the_check_leaves_the_common_words_alone() -> None:
    source = '''
x.cast("timestamp"); writer.option("topic", t); fields_by_name["key"]; kwargs["value"]; ctx.get("value")
for k in ("key", "value"): pass
types = {"timestamp": T, "string": S}
print("topic")
'''
    assert column_literals(source) == []


def test_the_check_finds_a_table_column_in_a_column_call_only() -> None:
    source = '''
F.col("status"); df.select("pipeline", "x"); F.col("error").getField("error_class"); c.alias("stage")
r["status"]; print("stage"); opts = {"pipeline": 1}; logging.getLogger("message")
'''
    assert [(line, name) for line, name, _ in column_literals(source)] == [
        (2, "error_class"), (2, "pipeline"), (2, "stage"), (2, "status"),
    ]


def test_columns_is_the_one_home_of_the_names() -> None:
    """schema.py exports no name of columns.py, and no module imports one from it."""
    assert not set(schema.__all__) & set(columns.__all__)
    through_schema = [
        f"{path.relative_to(REPO).as_posix()}:{node.lineno}: {alias.name}"
        for root in (PACKAGE, REPO / "tests", REPO / "benchmarks", REPO / "notebooks")
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "quarantine.schema"
        for alias in node.names if alias.name in columns.__all__
    ]
    assert not through_schema, "import these from quarantine.columns:\n" + "\n".join(through_schema)
