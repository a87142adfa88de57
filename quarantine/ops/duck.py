"""The JVM-free engine of the operator's reads: DuckDB over the Arrow rows of path tables.

For tables given as paths (the local default, CI, a mounted volume) the reads
(:mod:`quarantine.ops.reads`) run here: delta-rs reads the quarantine and metrics tables
into Arrow (:mod:`quarantine.ops.delta_arrow`) and DuckDB queries them in this process, as
views named by role; the report's target is counted from its files' Parquet footers, no row
read: no JVM, no Spark session, no pandas. :func:`spark_reason` says when
Spark answers instead: a table the read needs is a catalog name or a URI (``s3://…``,
``dbfs:/…``), on Databricks, with Spark Connect (``spark.remote`` in the config's
``spark_conf`` or ``$QUARANTINE_SPARK_REMOTE``), or ``$QUARANTINE_READ_ENGINE`` is ``spark``.

One SQL text, two engines: the reads and the SQL library are Spark SQL (the library runs in
the Databricks SQL editor as written). :func:`duckdb_sql` translates a bound query to DuckDB's
dialect by rules, not by a second copy of each query: backquoted names become
double-quoted, a string literal with a backslash escape becomes an ``E'…'`` literal, the
lower-case column names ``offset`` and ``partition`` are quoted, ``LATERAL VIEW explode``
becomes a lateral ``unnest``, and the Spark functions the queries use are DuckDB macros of
the same meaning (:data:`SPARK_MACROS`, named ``spark_<function>``). The session runs in UTC
and sorts NULLs as Spark does (first ascending, last descending).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import duckdb

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS
from quarantine.config import PipelineConfig
from quarantine.errors import ConfigError, DeltaRsUnreadableError
from quarantine.ops.delta_arrow import read_delta, row_count
from quarantine.ops.report_model import counted_target
from quarantine.spark.runtime import on_databricks
from quarantine.table_names import is_local_path

__all__ = ["ENGINE_ENV", "SPARK_MACROS", "DuckEngine", "ReadEngine", "duckdb_predicate", "duckdb_sql", "engine",
           "spark_reason"]

#: Which engine the read-only commands use: ``auto`` (the default: DuckDB where it applies) or ``spark``.
ENGINE_ENV = "QUARANTINE_READ_ENGINE"
#: Spark Connect's remote for a local session (``quarantine.spark.session.REMOTE_ENV``).
_REMOTE_ENV = "QUARANTINE_SPARK_REMOTE"


class ReadEngine(StrEnum):
    """The values of :data:`ENGINE_ENV`."""

    AUTO = "auto"
    SPARK = "spark"


#: The Spark SQL functions the SQL library uses, as DuckDB macros of the same meaning (UTC session).
SPARK_MACROS: tuple[str, ...] = (
    # whole seconds since the epoch, rounded down (Spark: Math.floorDiv of the microseconds), in
    # integers: a DOUBLE quotient of 9999-12-31 23:59:59.999999's microseconds rounds up to year 10000
    "CREATE MACRO spark_floor_seconds(us) AS (us - ((us % 1000000) + 1000000) % 1000000) // 1000000",
    "CREATE MACRO spark_unix_seconds(t) AS spark_floor_seconds(epoch_us(t))",
    "CREATE MACRO spark_unix_timestamp(t) AS spark_floor_seconds(epoch_us(t))",
    "CREATE MACRO spark_timestamp_seconds(s) AS make_timestamptz(CAST(s AS BIGINT) * 1000000)",
    "CREATE MACRO spark_timestamp_micros(us) AS make_timestamptz(CAST(us AS BIGINT))",
    "CREATE MACRO spark_date_from_unix_date(d) AS CAST(DATE '1970-01-01' + CAST(d AS INTEGER) AS DATE)",
    "CREATE MACRO spark_unix_date(d) AS CAST(CAST(d AS DATE) - DATE '1970-01-01' AS INTEGER)",
    # trunc(date, 'week' | 'month' ...): a week starts on Monday in both engines
    "CREATE MACRO spark_trunc(d, unit) AS CAST(date_trunc(lower(unit), CAST(d AS DATE)) AS DATE)",
    "CREATE MACRO spark_raise_error(msg) AS error(msg)",
    "CREATE MACRO spark_make_interval(y, mo, w, d, h, mi, s) AS to_years(CAST(y AS INTEGER)) "
    "+ to_months(CAST(mo AS INTEGER)) + to_days(CAST(w * 7 + d AS INTEGER)) + to_hours(CAST(h AS BIGINT)) "
    "+ to_minutes(CAST(mi AS BIGINT)) + to_microseconds(CAST(s * 1000000 AS BIGINT))",
)
_SPARK_FUNCTIONS = re.compile(
    r"\b(unix_seconds|unix_timestamp|timestamp_seconds|timestamp_micros|date_from_unix_date|unix_date|trunc|raise_error"
    r"|make_interval)\s*\("
)
#: Code, string literals, back-quoted names and comments of Spark SQL text, in order.
_TOKENS = re.compile(r"(?P<literal>'(?:[^'\\]|\\.)*')|(?P<name>`(?:[^`]|``)*`)|(?P<comment>--[^\n]*)", re.S)
_LATERAL_VIEW = re.compile(r"LATERAL VIEW explode\(([^()]*)\) AS (\w+)")
#: Column names that are DuckDB keywords, written in lower case in the library (keywords are upper case).
_KEYWORD_NAMES = re.compile(r"(?<![\w.\"])(offset|partition)\b")


def _code(part: str) -> str:
    part = _LATERAL_VIEW.sub(lambda m: f"CROSS JOIN unnest({m[1]}) AS _lateral({m[2]})", part)
    part = _SPARK_FUNCTIONS.sub(lambda m: f"spark_{m[1]}(", part)
    part = part.replace("current_timestamp()", "now()")
    return _KEYWORD_NAMES.sub(lambda m: f'"{m[1]}"', part)


def duckdb_sql(spark_sql: str) -> str:
    """A bound query of the SQL library (Spark SQL) in DuckDB's dialect (see the module doc).

    Literals and comments keep their text; a literal with a backslash escape
    (:func:`quarantine.table_names.sql_literal` escapes ``\\`` and ``'`` so) becomes an ``E'…'``
    literal, which DuckDB reads with the same escapes.
    """
    out, last = [], 0
    for m in _TOKENS.finditer(spark_sql):
        out.append(_code(spark_sql[last:m.start()]))
        if m["literal"] is not None:
            out.append(("E" if "\\" in m["literal"] else "") + m["literal"])
        elif m["name"] is not None:
            out.append('"' + m["name"][1:-1].replace("``", "`").replace('"', '""') + '"')
        else:
            out.append(m["comment"])
        last = m.end()
    out.append(_code(spark_sql[last:]))
    return "".join(out)


#: What a ``--where`` predicate must not hold to run on DuckDB: a double-quoted string (Spark reads it
#: as text, DuckDB as a column name) or a statement separator.
_NOT_ON_DUCKDB = re.compile(r'[";]')


def duckdb_predicate(where: str) -> str:
    """A ``--where`` predicate (Spark SQL over the quarantine table's columns) in DuckDB's dialect.

    Translated as the SQL library is (:func:`duckdb_sql`), unless it holds what the two
    dialects read differently; whether DuckDB binds it over the table (a column it lacks, a
    Spark function DuckDB has not, text that is not SQL) is :meth:`Session.condition`'s to say.

    Raises:
        ValueError: it holds a double-quoted string (text in Spark SQL, a name in DuckDB), a
            ``;``, two string literals side by side (Spark joins ``'a''b'`` into ``ab``, DuckDB
            reads ``a'b``), a backslash escape other than ``\\\\`` and ``\\'`` (Spark's ``\\u0041``
            is ``A``, DuckDB's ``u0041``), or LIKE with a backslash (Spark's LIKE escapes with
            it, DuckDB's with none).
    """
    found = _NOT_ON_DUCKDB.search(where)
    if found:
        what = "a double-quoted string (text in Spark SQL, a name in DuckDB)" if found[0] == '"' else "a ';'"
        raise ValueError(f"it holds {what}")
    last = -1
    for m in _TOKENS.finditer(where):
        if m["literal"] is None:
            continue
        if m.start() == last:
            raise ValueError("it holds two string literals side by side (Spark joins them, DuckDB reads one quote)")
        if re.search(r"\\[^\\']", m["literal"].replace("\\\\", "")):
            raise ValueError("it holds a backslash escape the two dialects read differently")
        last = m.end()
    if "\\" in where and re.search(r"\blike\b", where, re.I):
        raise ValueError("it holds LIKE with a backslash (Spark escapes with it, DuckDB does not)")
    return duckdb_sql(where)


def spark_reason(config: PipelineConfig, tables: tuple[str, ...]) -> str | None:
    """Why Spark answers a read of ``tables`` (roles) of ``config``, or None: the JVM-free path applies.

    Raises:
        ConfigError: :data:`ENGINE_ENV` is neither ``auto`` nor ``spark``.
    """
    _engine()
    if os.environ.get(ENGINE_ENV, ReadEngine.AUTO) == ReadEngine.SPARK:
        return f"${ENGINE_ENV} is spark"
    if on_databricks():
        return "on Databricks"
    if os.environ.get(_REMOTE_ENV) or "spark.remote" in config.spark_conf:
        return "Spark Connect"
    names = {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table,
             "target": counted_target(config)}
    for role in tables:
        name = names.get(role)
        if name and not is_local_path(name):
            return f"the {role} table {name} is not a local path"
    return None


def _engine() -> None:
    value = os.environ.get(ENGINE_ENV, ReadEngine.AUTO)
    if value not in tuple(ReadEngine):
        raise ConfigError(f"${ENGINE_ENV}", value, " | ".join(ReadEngine))


def _utc(value: Any) -> Any:
    """A fetched value with every instant an aware UTC datetime (as Spark's rows give them)."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC) if value.tzinfo else value
    if isinstance(value, list):
        return [_utc(v) for v in value]
    if isinstance(value, dict):
        return {k: _utc(v) for k, v in value.items()}
    return value


class DuckEngine:
    """One DuckDB connection: each table a view named by its role over its Arrow rows, read once.

    The engine of :class:`quarantine.ops.reads.Reads` for path tables: Spark SQL text is run
    translated (:func:`duckdb_sql`).
    """

    def __init__(self) -> None:
        self._db = duckdb.connect()
        self._db.execute("SET TimeZone = 'UTC'")
        self._db.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        for macro in SPARK_MACROS:
            self._db.execute(macro)

    def view(self, role: str, table: str) -> Sequence[str] | None:
        """Read ``table`` (a path) and register it as the view ``role``; its columns, or None: no Delta table there.

        Raises:
            DeltaRsUnreadableError: delta-rs cannot read it (Spark reads it instead).
        """
        rows = read_delta(table, role)
        if rows is None:
            return None
        self._db.register(f"_{role}_arrow", rows)
        self._db.execute(f"CREATE VIEW {role} AS SELECT {self._columns(role)} FROM _{role}_arrow")
        return [name for name, *_ in self._db.execute(f"DESCRIBE {role}").fetchall()]

    def _columns(self, role: str) -> str:
        """The select list of ``role``'s view: every column, a header's text key as its UTF-8 bytes (BINARY)."""
        types = {name: kind for name, kind, *_ in self._db.execute(f"DESCRIBE _{role}_arrow").fetchall()}
        if not str(types.get(HEADERS, "")).startswith('STRUCT("key" VARCHAR'):
            return "*"
        return (f"* REPLACE (list_transform({HEADERS}, lambda h: struct_pack({HEADER_KEY} := encode(h.{HEADER_KEY}), "
                f"{HEADER_VALUE} := h.{HEADER_VALUE})) AS {HEADERS})")

    def row_count(self, role: str, table: str) -> int | None:
        """How many rows ``table`` (a path) holds now, from its files' Parquet footers; None: no Delta table there.

        Raises:
            DeltaRsUnreadableError: delta-rs cannot open it, or deletion vectors hide rows of its
                files (Spark counts it).
        """
        return row_count(table, role)

    def check_condition(self, where: str) -> None:
        """Check that ``where`` (Spark SQL) is a boolean condition DuckDB binds over the quarantine view.

        Raises:
            ValueError: it is not, or DuckDB would read it otherwise than Spark (:func:`duckdb_predicate`).
        """
        sql = duckdb_predicate(where)
        try:
            kinds = self._db.execute(f"DESCRIBE SELECT ({sql}) AS _where FROM quarantine").fetchall()
        except duckdb.Error as exc:
            raise ValueError(" ".join(str(exc).split())) from None
        if kinds[0][1] != "BOOLEAN":
            raise ValueError(f"it is {kinds[0][1]}, not a condition")

    def rows(self, sql: str) -> tuple[list[str], list[list[Any]]]:
        """Spark SQL text's column names and rows, run translated (every instant in UTC).

        Raises:
            DeltaRsUnreadableError: DuckDB refuses the tables' data (text that is not UTF-8).
        """
        try:
            result = self._db.execute(duckdb_sql(sql))
            names = [d[0] for d in result.description or []]
            fetched = result.fetchall()
        except duckdb.InvalidInputException as exc:
            raise DeltaRsUnreadableError(f"DuckDB cannot read the tables: {' '.join(str(exc).split())}") from exc
        return names, [[_utc(v) for v in row] for row in fetched]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def engine(config: PipelineConfig, roles: Sequence[str], *, app: str, read_only: bool) -> DuckEngine | None:
    """DuckDB for a read of ``roles``' tables of ``config``, or None: Spark answers (:func:`spark_reason`).

    ``app`` and ``read_only`` are a Spark session's; DuckDB needs neither.
    """
    del app, read_only
    return None if spark_reason(config, tuple(roles)) is not None else DuckEngine()
