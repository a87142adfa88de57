"""The JVM-free read path: ``inspect``, ``stats``, ``sql`` and ``views --print`` over path tables, on DuckDB.

For tables given as paths (the local default, CI, a mounted volume) the read-only commands
read the quarantine and metrics tables with delta-rs into Arrow (:mod:`quarantine.ops.delta_arrow`)
and query them with DuckDB in this process: no JVM, no Spark session, no pandas. The rows
are printed by :mod:`quarantine.ops.triage_output`, as the Spark path prints its own, so both
engines give the same output for the same tables (``tests/integration/test_two_engines.py``).

Which engine answers (:func:`answer`):

* Spark, silently, when a table the command reads is a catalog name or a URI
  (``s3://…``, ``dbfs:/…``), on Databricks, with Spark Connect (``spark.remote`` in the
  config's ``spark_conf`` or ``$QUARANTINE_SPARK_REMOTE``), for ``views`` without
  ``--print`` (it creates Spark views), or when ``$QUARANTINE_READ_ENGINE`` is ``spark``;
* Spark, after one line on stderr saying why, when delta-rs cannot read a table
  (:class:`~quarantine.errors.DeltaRsUnreadableError`) or DuckDB refuses its data;
* DuckDB otherwise.

One SQL library, two engines: the library's files are Spark SQL (they run in the
Databricks SQL editor as written). :func:`duckdb_sql` translates a bound query to DuckDB's
dialect by rules, not by a second copy of each query: backquoted names become
double-quoted, a string literal with a backslash escape becomes an ``E'…'`` literal, the
lower-case column names ``offset`` and ``partition`` are quoted, ``LATERAL VIEW explode``
becomes a lateral ``unnest``, and the Spark functions the library uses are DuckDB macros of
the same meaning (:data:`SPARK_MACROS`, named ``spark_<function>``). The session runs in UTC
and sorts NULLs as Spark does (first ascending, last descending).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import duckdb

from quarantine.columns import (
    ERROR_CLASS,
    FIRST_SEEN_AT,
    HEADER_KEY,
    HEADER_VALUE,
    HEADERS,
    LAST_SEEN_AT,
    OFFSET,
    PARTITION,
    PIPELINE,
    STAGE,
    STATUS,
    TOPIC,
    QuarantineStatus,
)
from quarantine.config import PipelineConfig, load_config
from quarantine.display import print_json
from quarantine.errors import ConfigError, DeltaRsUnreadableError
from quarantine.keyring import KeyRing
from quarantine.ops.delta_arrow import ArrowStream, read_delta
from quarantine.ops.triage_output import (
    ALL,
    RecordFilter,
    list_queries,
    parse_time,
    print_records,
    print_sql,
    print_stats,
    record_json,
    record_title,
)
from quarantine.ops.views import view_statements
from quarantine.spark.runtime import on_databricks
from quarantine.sql import Query, bind, get_query, parse_params
from quarantine.table_names import is_path

__all__ = [
    "ENGINE_ENV", "SPARK_MACROS", "Engine", "Session", "answer", "duckdb_predicate", "duckdb_sql", "spark_reason",
]

#: Which engine the read-only commands use: ``auto`` (the default: DuckDB where it applies) or ``spark``.
ENGINE_ENV = "QUARANTINE_READ_ENGINE"
#: Spark Connect's remote for a local session (``quarantine.spark.session.REMOTE_ENV``).
_REMOTE_ENV = "QUARANTINE_SPARK_REMOTE"


class Engine(StrEnum):
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
    r"\b(unix_seconds|unix_timestamp|timestamp_seconds|date_from_unix_date|unix_date|trunc|raise_error"
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
    if os.environ.get(ENGINE_ENV, Engine.AUTO) == Engine.SPARK:
        return f"${ENGINE_ENV} is spark"
    if on_databricks():
        return "on Databricks"
    if os.environ.get(_REMOTE_ENV) or "spark.remote" in config.spark_conf:
        return "Spark Connect"
    names = {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table}
    for role in tables:
        name = names.get(role)
        if name and (not is_path(name) or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+:", name)):
            return f"the {role} table {name} is not a local path"
    return None


def _engine() -> None:
    value = os.environ.get(ENGINE_ENV, Engine.AUTO)
    if value not in tuple(Engine):
        raise ConfigError(f"${ENGINE_ENV}", value, " | ".join(Engine))


def _utc(value: Any) -> Any:
    """A fetched value with every instant an aware UTC datetime (as Spark's rows give them)."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC) if value.tzinfo else value
    if isinstance(value, list):
        return [_utc(v) for v in value]
    if isinstance(value, dict):
        return {k: _utc(v) for k, v in value.items()}
    return value


class Session:
    """One DuckDB connection over the command's tables, each read once, when a query first needs it.

    A table is a view named by its role (``quarantine``, ``metrics``) over the Arrow rows of
    :func:`~quarantine.ops.delta_arrow.read_delta`; the report (:mod:`quarantine.ops.report_duck`)
    and replay's dry run (:mod:`quarantine.ops.replay_duck`) query it too.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self._config = config
        self._tables: dict[str, ArrowStream] = {}
        self._db = duckdb.connect()
        self._db.execute("SET TimeZone = 'UTC'")
        self._db.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
        for macro in SPARK_MACROS:
            self._db.execute(macro)

    def need(self, *roles: str) -> None:
        """Read the tables ``roles`` name (``quarantine``, ``metrics``) unless read already."""
        paths = {"quarantine": self._config.errors.dlq_table_name, "metrics": self._config.metrics.table}
        for role in roles:
            path = paths[role]
            if role not in self._tables and path:
                self._tables[role] = read_delta(path, role)
                self._db.register(f"_{role}_arrow", self._tables[role])
                self._db.execute(f"CREATE VIEW {role} AS SELECT {self._columns(role)} FROM _{role}_arrow")

    def _columns(self, role: str) -> str:
        """The select list of ``role``'s view: every column, a header's text key as its UTF-8 bytes (BINARY)."""
        types = {name: kind for name, kind, *_ in self._db.execute(f"DESCRIBE _{role}_arrow").fetchall()}
        if not str(types.get(HEADERS, "")).startswith('STRUCT("key" VARCHAR'):
            return "*"
        return (f"* REPLACE (list_transform({HEADERS}, lambda h: struct_pack({HEADER_KEY} := encode(h.{HEADER_KEY}), "
                f"{HEADER_VALUE} := h.{HEADER_VALUE})) AS {HEADERS})")

    def condition(self, role: str, sql: str) -> None:
        """Check that ``sql`` is a boolean condition DuckDB binds over ``role``'s table; run nothing.

        Raises:
            ValueError: it is not (DuckDB's reason, in one line).
        """
        try:
            kinds = self._db.execute(f"DESCRIBE SELECT ({sql}) AS _where FROM {role}").fetchall()
        except duckdb.Error as exc:
            raise ValueError(" ".join(str(exc).split())) from None
        if kinds[0][1] != "BOOLEAN":
            raise ValueError(f"it is {kinds[0][1]}, not a condition")

    def rows(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
        """``sql``'s column names and rows (every instant in UTC).

        Raises:
            DeltaRsUnreadableError: DuckDB refuses the tables' data (text that is not UTF-8).
        """
        try:
            result = self._db.execute(sql, params or [])
            names = [d[0] for d in result.description or []]
            fetched = result.fetchall()
        except duckdb.InvalidInputException as exc:
            raise DeltaRsUnreadableError(f"DuckDB cannot read the tables: {' '.join(str(exc).split())}") from exc
        return names, [[_utc(v) for v in row] for row in fetched]


def answer(args: argparse.Namespace, overrides: Mapping[str, Any]) -> int | None:
    """Run a read-only command (``inspect``, ``stats``, ``sql``, ``views``) without a JVM; its exit code.

    Returns:
        The exit code, or None when Spark answers instead (see the module doc); when that is
        because delta-rs or DuckDB cannot read a table, one line on stderr has said why.

    Raises:
        ConfigError: bad options, config, query name or parameters (exit code 2).
        QuarantineError: a table the command reads does not exist yet (exit code 1).
    """
    _engine()
    if args.command == "sql" and args.name is None:
        return list_queries(args.json)
    query = get_query(args.name) if args.command == "sql" else None
    if args.conf is None:
        raise ConfigError("--conf", None, f"the pipeline config whose tables `quarantine sql {args.name}` reads")
    config = load_config(args.conf, overrides)
    if args.command == "views":
        if not args.print_sql:
            return None  # it creates views in Spark's catalog
        for v in view_statements(config.errors.dlq_table_name, schema=args.schema):
            print(v.sql + ";\n")
        return 0
    tables = query.tables if query is not None else ("quarantine",)
    if spark_reason(config, tables) is not None:
        return None
    session = Session(config)
    try:
        if query is not None:
            return _sql(args, config, query, session)
        if args.command == "inspect":
            return _inspect(args, config, session)
        session.need("quarantine")
        return _stats(_pipeline(args, config), session, as_json=args.json)
    except DeltaRsUnreadableError as exc:
        print(f"quarantine: reading with Spark: {exc}", file=sys.stderr)
        return None


def _pipeline(args: argparse.Namespace, config: PipelineConfig) -> str | None:
    """``--pipeline``, else the config's ('' is every pipeline)."""
    if args.pipeline is None:
        return config.pipeline
    return args.pipeline or None


def _inspect(args: argparse.Namespace, config: PipelineConfig, session: Session) -> int:
    f = RecordFilter(
        pipeline=_pipeline(args, config), status=args.status, stage=args.stage, error_class=args.error_class,
        since=parse_time(args.since, "--since") if args.since else None,
        until=parse_time(args.until, "--until") if args.until else None,
        limit=args.limit,
    )  # bad options are said before any table is read, as on Spark
    session.need("quarantine")
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    for column, value in ((PIPELINE, f.pipeline), (STAGE, f.stage), (ERROR_CLASS, f.error_class)):
        if value is not None:
            where.append(f'"{column}" = ?')
            params.append(value)
    if f.status != ALL:
        where.append(f'"{STATUS}" = ?')
        params.append(f.status)
    for op, when in ((">=", f.since), ("<", f.until)):
        if when is not None:
            where.append(f'"{LAST_SEEN_AT}" {op} ?')
            params.append(when)
    names, rows = session.rows(
        f"SELECT * FROM quarantine WHERE {' AND '.join(where)} "
        f'ORDER BY "{LAST_SEEN_AT}" DESC, "{TOPIC}", "{PARTITION}", "{OFFSET}" LIMIT {int(f.limit)}',
        params,
    )
    keys = KeyRing.from_errors(config.errors)
    records = [record_json(dict(zip(names, row, strict=True)), keys) for row in rows]
    if args.json:
        print_json(records)
        return 0
    print_records(record_title(f, config.errors.dlq_table_name), records)
    return 0


def _stats(pipeline: str | None, session: Session, *, as_json: bool) -> int:
    rows = "quarantine" + (" WHERE pipeline = $pipeline" if pipeline is not None else "")
    open_ = f"({'SELECT * FROM ' + rows}) AS q WHERE {STATUS} = '{QuarantineStatus.OPEN.value}'"
    queries = {
        "records by status": f"SELECT {STATUS}, count(1) AS records FROM {rows} GROUP BY {STATUS} ORDER BY {STATUS}",
        "open records by stage and error class": (
            f"SELECT {STAGE}, {ERROR_CLASS}, count(1) AS records, min({FIRST_SEEN_AT}) AS {FIRST_SEEN_AT}, "
            f"max({LAST_SEEN_AT}) AS {LAST_SEEN_AT} FROM {open_} GROUP BY {STAGE}, {ERROR_CLASS} "
            f"ORDER BY records DESC, {STAGE}, {ERROR_CLASS}"
        ),
        "open records per topic partition": (
            f'SELECT {TOPIC}, "{PARTITION}", count(1) AS records, min("{OFFSET}") AS min_offset, '
            f'max("{OFFSET}") AS max_offset FROM {open_} GROUP BY {TOPIC}, "{PARTITION}" '
            f'ORDER BY {TOPIC}, "{PARTITION}"'
        ),
    }
    params = {"pipeline": pipeline} if pipeline is not None else None
    tables = {title: session.rows(sql, params) for title, sql in queries.items()}
    print_stats(tables, pipeline, as_json=as_json)
    return 0


def _sql(args: argparse.Namespace, config: PipelineConfig, query: Query, session: Session) -> int:
    values = parse_params(args.param)
    if query.param("pipeline") is not None:
        values.setdefault("pipeline", config.pipeline)
    # bound to the tables' names in this session: `quarantine`, `metrics`
    text = bind(query, values, {"quarantine": config.errors.dlq_table_name and "quarantine",
                                "metrics": config.metrics.table and "metrics"})
    if args.print_sql:  # the Spark SQL as the Spark path prints it: the configured tables in place
        print(bind(query, values, {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table}))
        return 0
    if args.limit < 1:
        raise ConfigError("--limit", args.limit, "a positive number of rows")
    session.need("quarantine", *query.tables)
    names, rows = session.rows(f"SELECT * FROM ({duckdb_sql(text)}) LIMIT {int(args.limit) + 1}")
    print_sql(query, names, rows, args.limit, as_json=args.json, keys=KeyRing.from_errors(config.errors))
    return 0
