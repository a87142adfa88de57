"""The SQL library: named, parameterized queries over the quarantine and metrics tables.

Each query is one file, ``quarantine/sql/<name>.sql``, shipped in the wheel. A file
starts with a comment header that documents it::

    -- Open records by pipeline, stage and error class, with when they were first and last seen.
    --
    -- @table quarantine
    -- @param pipeline string = '' — the pipeline ('' = every pipeline)
    -- @param hours int = 24 — open longer than this many hours
    -- @param bucket string(hour|day) = 'hour' — the period (one of the choices in brackets)

then one ``SELECT``. In the body, ``{{quarantine}}`` and ``{{metrics}}`` stand for
the tables, and ``:name`` for a parameter's value (Databricks SQL's named
parameter marker syntax, so a file also runs in the Databricks SQL editor).

Binding (:func:`bind`) is the one place SQL text is built:

* a table becomes :func:`quarantine.tables.table_ref` of the configured table:
  ``delta.`/abs/path``` for a path (relative paths made absolute), each part
  back-quoted for a catalog name;
* a value is checked against its declared type (``string``, ``int``, ``double``,
  ``timestamp``; ``string(a|b)``: one of those)
  and written as a SQL literal: a number as the number Python parsed, a string
  single-quoted with ``\\`` and ``'`` escaped, so no value can end the literal, an
  instant as ``timestamp_micros(N)`` (the same instant in any session time zone).
  Spark's own parameter markers (``spark.sql(text, args=…)``) are not used: with
  Delta's SQL extension on Spark 4.1 they are dropped (``UNBOUND_SQL_PARAMETER``,
  delta-io/delta#7640), and a NULL cannot be bound at all. An optional string
  filter therefore defaults to ``''``, which the query reads as "every".

The operator's own reads (``inspect``, ``stats``, the report's figures, the replay
selection) are files of the same form in ``quarantine/sql/reads/`` (:func:`read_sources`),
bound with Python values (:func:`bind_values`: None is ``NULL``) over views named by role:
each engine registers ``quarantine`` and ``metrics`` and runs the same text
(:mod:`quarantine.ops.reads`).

Every bad input — an unknown query, an unknown or missing parameter, a value of
the wrong type, a query that needs a table the config has not got — raises
:class:`~quarantine.errors.ConfigError` naming it (exit code 2 in the CLI).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING

from quarantine.errors import ConfigError
from quarantine.table_names import sql_literal, table_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "TABLES",
    "Param",
    "ParamType",
    "Query",
    "bind",
    "bind_values",
    "catalogue",
    "get_query",
    "parse_params",
    "read_sources",
    "run_query",
    "sql_value",
    "view_sources",
]

#: The tables a query may name: ``{{quarantine}}`` and ``{{metrics}}``.
TABLES = ("quarantine", "metrics")


class ParamType(StrEnum):
    """The type of a query parameter (the ``@param`` line's second word)."""

    STRING = "string"
    INT = "int"
    DOUBLE = "double"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True)
class Param:
    """One ``@param`` of a query.

    Attributes:
        name: the marker's name (``:name`` in the body, ``--param name=…`` in the CLI).
        type: what a value must be.
        default: the default as written in the header (a SQL literal), or None: required.
        doc: what it means.
        choices: the values a ``string`` parameter may take (``string(hour|day)``;
            empty: any text). ``''`` is a choice when written (``string(|open)``).
    """

    name: str
    type: ParamType
    default: str | None
    doc: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    """One file of the library.

    Attributes:
        name: the file's name without ``.sql``.
        summary: the header's first line.
        doc: the header's prose (summary included), without the ``@`` lines.
        tables: the tables it reads (from its ``@table`` lines).
        params: its parameters, in header order.
        body: the SQL after the header, with ``{{table}}`` and ``:param`` markers.
    """

    name: str
    summary: str
    doc: str
    tables: tuple[str, ...]
    params: tuple[Param, ...]
    body: str

    def param(self, name: str) -> Param | None:
        """The parameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)


_PARAM = re.compile(
    r"^@param (?P<name>[A-Za-z_]\w*) (?P<type>\w+)(?:\((?P<choices>[\w|]*)\))?"
    r"(?: = (?P<default>'[^'\\]*'|-?\d+(?:\.\d+)?))? — (?P<doc>.+)$"
)
_TABLE = re.compile(r"\{\{(\w+)\}\}")
#: SQL text with the parts where a ``:name`` is not a marker taken out: string literals,
#: quoted identifiers, comments; and ``::`` casts.
_NOT_CODE = re.compile(r"'(?:[^'\\]|\\.)*'|`[^`]*`|--[^\n]*|/\*.*?\*/", re.S)
_MARKER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _parse(name: str, text: str) -> Query:
    """A query from its file's text (see the module doc for the header)."""
    header: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) and lines[i].startswith("--"):
        header.append(lines[i][2:].strip())
        i += 1
    body = "\n".join(lines[i:]).strip().rstrip(";").strip()
    prose = [h for h in header if not h.startswith("@")]
    tables: list[str] = []
    params: list[Param] = []
    for h in header:
        if h.startswith("@table "):
            tables.append(h.removeprefix("@table ").strip())
        elif h.startswith("@param "):
            m = _PARAM.match(h)
            if m is None or m["type"] not in ParamType.__members__.values():
                raise ValueError(f"{name}.sql: bad @param line {h!r}: expected '@param NAME TYPE [= DEFAULT] — DOC'")
            choices = tuple(m["choices"].split("|")) if m["choices"] is not None else ()
            if choices and m["type"] != ParamType.STRING:
                raise ValueError(f"{name}.sql: @param {m['name']}: only a string parameter has choices")
            params.append(Param(m["name"], ParamType(m["type"]), m["default"], m["doc"].strip(), choices))
        elif h.startswith("@"):
            raise ValueError(f"{name}.sql: unknown header line {h!r} (expected @table or @param)")
    if not prose or not prose[0] or not body:
        raise ValueError(f"{name}.sql: needs a header comment (its first line a summary) and a query")
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"{name}.sql: unknown @table {unknown}; tables are {list(TABLES)}")
    used_tables = set(_TABLE.findall(body))
    used_params = set(_MARKER.findall(_NOT_CODE.sub(" ", body)))
    declared = {p.name for p in params}
    if used_tables != set(tables) or used_params != declared:
        raise ValueError(
            f"{name}.sql: its header and body disagree: @table {sorted(tables)} vs {{{{…}}}} {sorted(used_tables)}, "
            f"@param {sorted(declared)} vs :markers {sorted(used_params)}"
        )
    doc = "\n".join(prose).strip()
    return Query(name, prose[0], doc, tuple(tables), tuple(params), body)


def _files(folder: str | None = None) -> dict[str, str]:
    root = resources.files(__name__)
    if folder is not None:
        root = root.joinpath(folder)
    return {
        f.name.removesuffix(".sql"): f.read_text(encoding="utf-8")
        for f in sorted(root.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".sql")
    }


def catalogue() -> dict[str, Query]:
    """Every query of the library by name (the ``.sql`` files next to this module)."""
    return {name: _parse(name, text) for name, text in _files().items()}


def view_sources() -> dict[str, Query]:
    """The views ``quarantine views`` creates, by suffix (``open`` → ``<table>_open``): ``sql/views/*.sql``.

    A view has no parameters (Spark views cannot hold markers); it reads every pipeline
    of its table and has a ``pipeline`` column to filter on.
    """
    views = {name: _parse(name, text) for name, text in _files("views").items()}
    for q in views.values():
        if q.params:
            raise ValueError(f"views/{q.name}.sql: a view cannot have parameters")
    return views


def read_sources() -> dict[str, Query]:
    """The operator's reads by name (``sql/reads/*.sql``): each written once for both engines."""
    return {name: _parse(name, text) for name, text in _files("reads").items()}


def get_query(name: str) -> Query:
    """The query called ``name``.

    Raises:
        ConfigError: no such query (the message lists the library).
    """
    queries = catalogue()
    if name not in queries:
        raise ConfigError("sql NAME", name, "one of the SQL library's queries: " + ", ".join(queries))
    return queries[name]


def parse_params(pairs: Sequence[str]) -> dict[str, str]:
    """``--param k=v`` arguments as ``{k: v}`` (the value as text; :func:`bind` checks its type).

    Raises:
        ConfigError: an argument without ``=``, an empty name, or a name given twice.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError("--param", pair, "NAME=VALUE, e.g. --param stage=parse_order")
        if name in out:
            raise ConfigError(f"--param {name}", pair, "each parameter once")
        out[name] = value
    return out


def _value(query: Query, param: Param, text: str) -> str:
    """A given value as a SQL literal of ``param``'s type."""
    key = f"--param {param.name}"
    if param.type is ParamType.STRING:
        if param.choices and text not in param.choices:
            shown = " | ".join(c if c else "'' (every)" for c in param.choices)
            raise ConfigError(key, text, f"one of {shown} ({query.name}: {param.doc})")
        return sql_literal(text)
    if param.type is ParamType.TIMESTAMP:
        try:
            when = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise ConfigError(key, text, f"an ISO date or date-time, UTC unless it has an offset "
                                         f"({query.name}: {param.doc})") from None
        return sql_value(when)
    try:
        number: int | float = int(text) if param.type is ParamType.INT else float(text)
    except ValueError:
        raise ConfigError(key, text, f"{'an integer' if param.type is ParamType.INT else 'a number'} "
                                     f"({query.name}: {param.doc})") from None
    if not math.isfinite(number):
        raise ConfigError(key, text, "a finite number")
    return sql_literal(number)


def bind(query: Query, values: Mapping[str, str], tables: Mapping[str, str | None]) -> str:
    """The query's SQL text with its tables and parameter values in place.

    Args:
        query: from :func:`catalogue`.
        values: parameter values as text (``--param`` values); a parameter not given
            takes its default.
        tables: the table of each name in :data:`TABLES` (path or catalog name), None
            when the config has none.

    Raises:
        ConfigError: an unknown parameter, a required one missing, a value not of its
            type, or a table the query reads that is not configured.
    """
    unknown = sorted(set(values) - {p.name for p in query.params})
    if unknown:
        known = ", ".join(f"{p.name} ({p.type})" for p in query.params) or "none"
        raise ConfigError(f"--param {unknown[0]}", values[unknown[0]], f"a parameter of {query.name}: {known}")
    literals: dict[str, str] = {}
    for p in query.params:
        if p.name in values:
            literals[p.name] = _value(query, p, values[p.name])
        elif p.default is not None:
            literals[p.name] = p.default
        else:
            raise ConfigError(f"--param {p.name}", None, f"a value: {query.name} needs it ({p.doc})")
    names: dict[str, str] = {}
    for t in query.tables:
        table = tables.get(t)
        if not table:
            key = "metrics.table" if t == "metrics" else "errors.deadletterqueue.table.name"
            raise ConfigError(key, table, f"a table: {query.name} reads the {t} table")
        names[t] = table_ref(table)
    return _substitute(query, names, literals)


def sql_value(value: str | int | float | dt.datetime | None) -> str:
    """A Python value as a SQL literal both engines read alike: None is ``NULL``; an aware instant is
    ``timestamp_micros(N)`` (a naive one is UTC's wall clock); text and numbers as :func:`sql_literal`."""
    if value is None:
        return "NULL"
    if isinstance(value, dt.datetime):
        at = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        micros = (at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        return f"timestamp_micros({micros})"
    return sql_literal(value)


def bind_values(
    query: Query, values: Mapping[str, str | int | float | dt.datetime | None], tables: Mapping[str, str]
) -> str:
    """A read's SQL text (:func:`read_sources`) with each ``{{table}}`` the SQL text ``tables`` gives it
    (a view's name) and each ``:param`` its Python value (:func:`sql_value`).

    Raises:
        ValueError: a parameter is missing or not the query's (a programming error, not a user's).
    """
    if set(values) != {p.name for p in query.params}:
        raise ValueError(f"{query.name}: parameters {sorted(values)}, expected {sorted(p.name for p in query.params)}")
    return _substitute(query, tables, {k: sql_value(v) for k, v in values.items()})


def _substitute(query: Query, names: Mapping[str, str], literals: Mapping[str, str]) -> str:
    """``query``'s body with its tables and parameters in place, in code only: a ``:x`` inside a
    string literal or a comment stays as written."""

    def code(part: str) -> str:
        part = _TABLE.sub(lambda m: names[m.group(1)], part)
        return _MARKER.sub(lambda m: literals[m.group(1)], part)

    out, last = [], 0
    for m in _NOT_CODE.finditer(query.body):
        out.append(code(query.body[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(code(query.body[last:]))
    return "".join(out)


def run_query(
    spark: SparkSession, name: str, values: Mapping[str, str], tables: Mapping[str, str | None]
) -> DataFrame:
    """The DataFrame of library query ``name`` (see :func:`bind`); nothing runs until it is read."""
    return spark.sql(bind(get_query(name), values, tables))
