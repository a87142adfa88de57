"""Each operator read written once, as SQL over views named by role, and run by either engine.

``inspect``, ``stats``, ``sql``, the report's figures and ``replay --dry-run``'s selection
(which is all of ``discard --dry-run``) are SQL files (the library, ``quarantine/sql/*.sql``,
and the reads, ``quarantine/sql/reads/``): Spark SQL over two views, ``quarantine`` and
``metrics``. An engine (:class:`Engine`) only registers those views over each table's current
snapshot and runs the text (and counts the target's rows without reading them, the report's
records: :meth:`Reads.row_count`):

* DuckDB over the Arrow rows delta-rs reads (:mod:`quarantine.ops.duck`: path tables, no JVM;
  it translates the text by rules, :func:`~quarantine.ops.duck.duckdb_sql`);
* Spark over the tables' pinned DataFrames (:mod:`quarantine.ops.spark_reads`).

Which engine answers (:func:`answer`): DuckDB where it applies
(:func:`~quarantine.ops.duck.spark_reason`: path tables, not Databricks or Spark Connect, not
``$QUARANTINE_READ_ENGINE=spark``, the ``local`` extra installed), else Spark; Spark too, after one
line on stderr saying why, when DuckDB cannot read a table or take a ``--where``. Parity holds
by construction; ``tests/integration/test_two_engines.py`` proves the adapters. This module
imports neither engine: :data:`ENGINES` names them, imported when a read runs.
"""

from __future__ import annotations

import datetime as dt
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any, Protocol, TypeVar

from quarantine.config import PipelineConfig
from quarantine.dry_run import ErrorGroup, ReplaySelection, largest_first
from quarantine.errors import DeltaRsUnreadableError, MissingTableError
from quarantine.keyring import KeyRing
from quarantine.ops.report_model import LATEST, TOP_ERROR_CLASSES, ReportData, Rows, counted_target, time_unit
from quarantine.ops.triage_output import ALL, RecordFilter, record_json
from quarantine.schema import check_quarantine_columns
from quarantine.sql import Query, bind, bind_values, read_sources

__all__ = [
    "ENGINES",
    "STATS",
    "Engine",
    "Reads",
    "Table",
    "answer",
    "inspect_records",
    "library_rows",
    "replay_selection",
    "report_data",
    "stats_tables",
]

#: The engine modules, in the order :func:`answer` tries them; each has ``engine(config, roles,
#: app=, read_only=)`` returning an :class:`Engine`, or None where it does not apply.
ENGINES = ("quarantine.ops.duck", "quarantine.ops.spark_reads")
#: Packages an engine module needs that an install may lack: it is then passed over.
_OPTIONAL = frozenset({"deltalake", "duckdb", "pyarrow"})

#: ``stats``' tables: each title and the read that fills it.
STATS: dict[str, str] = {
    "records by status": "statuses",
    "open records by stage and error class": "open_failures",
    "open records per topic partition": "open_partitions",
}

#: A table's column names and rows, every instant an aware UTC datetime.
Table = tuple[list[str], list[list[Any]]]

T = TypeVar("T")


class Engine(Protocol):
    """What an engine does for the reads: views by role over tables, Spark SQL text run over them."""

    def view(self, role: str, table: str) -> Sequence[str] | None:
        """Register the view ``role`` over ``table``'s current snapshot; its column names, or None: no such table.

        The quarantine view's header keys are BINARY (their bytes as stored), whatever the table holds.
        """

    def rows(self, sql: str) -> Table:
        """Run ``sql`` (Spark SQL over the views); its column names and rows."""

    def row_count(self, role: str, table: str) -> int | None:
        """How many rows ``table`` holds now, counted without reading them (Delta's log, or the data
        files' Parquet footers); None: no such table.
        """

    def check_condition(self, where: str) -> None:
        """Check that ``where`` (Spark SQL) is a boolean condition over the quarantine view; run nothing.

        Raises:
            ValueError: this engine cannot take it (DuckDB: Spark may; the message says why).
            ConfigError: it is not a condition over the quarantine table's columns (Spark's word).
        """

    def close(self) -> None:
        """Drop the views."""


class _SparkAnswersError(Exception):
    """DuckDB cannot answer a read: Spark does, after this line on stderr."""


class Reads:
    """One command's reads on one engine: each table's view registered when a read first needs it.

    Args:
        engine: the engine that runs them.
        tables: each role's table (path or catalog name; None: the config has none).
    """

    def __init__(self, engine: Engine, tables: Mapping[str, str | None]) -> None:
        self._engine = engine
        self._tables = dict(tables)
        self._exists: dict[str, bool] = {}

    @classmethod
    def of(cls, engine: Engine, config: PipelineConfig) -> Reads:
        """The reads of ``config``'s quarantine and metrics tables, and the target the report counts
        (:func:`~quarantine.ops.report_model.counted_target`)."""
        return cls(engine, {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table,
                            "target": counted_target(config)})

    def table(self, role: str) -> str | None:
        """The table ``role`` names (None: the config has none)."""
        return self._tables.get(role)

    def has(self, role: str) -> bool:
        """Whether ``role``'s table is configured and exists (its view registered).

        Raises:
            ConfigError: the quarantine table is not one (it lacks the key or ``status``).
        """
        if role not in self._exists:
            name = self._tables.get(role)
            columns = self._engine.view(role, name) if name else None
            if role == "quarantine" and name and columns is not None:
                check_quarantine_columns(name, columns)
            self._exists[role] = columns is not None
        return self._exists[role]

    def need(self, *roles: str) -> None:
        """Register each of ``roles``' views.

        Raises:
            MissingTableError: a table does not exist yet, or the config names none.
        """
        for role in roles:
            if not self.has(role):
                raise MissingTableError(role, self._tables.get(role))

    def row_count(self, role: str) -> int | None:
        """How many rows ``role``'s table holds now, counted without reading them; None: the config
        names none, or it does not exist yet.

        Raises:
            DeltaRsUnreadableError: DuckDB's engine cannot count it exactly (Spark counts it instead).
        """
        name = self._tables.get(role)
        return self._engine.row_count(role, name) if name else None

    def run(self, sql: str, *roles: str) -> Table:
        """Spark SQL text over the views of ``roles`` (registered first)."""
        self.need(*roles)
        return self._engine.rows(sql)

    def read(self, name: str, *, where: str | None = None, **values: Any) -> Table:
        """The read ``name`` (``sql/reads/<name>.sql``) with ``values`` bound.

        Args:
            name: the read.
            where: a condition (Spark SQL) the quarantine view is filtered by first (``--where``).
            values: every parameter of the read (None: NULL).

        Raises:
            MissingTableError: a table it reads does not exist yet.
            ConfigError: ``where`` is not a condition over the quarantine table's columns.
        """
        query = _reads()[name]
        names = {t: t for t in query.tables}
        if where is not None:
            self.need("quarantine")
            try:
                self._engine.check_condition(where)
            except ValueError as exc:
                raise _SparkAnswersError(f"selecting with Spark: DuckDB cannot take --where {where}: {exc}") from None
            names["quarantine"] = f"(SELECT * FROM quarantine WHERE ({where})) AS quarantine"
        return self.run(bind_values(query, values, names), *query.tables)


@cache
def _reads() -> dict[str, Query]:
    return read_sources()


def answer(config: PipelineConfig, roles: Sequence[str], read: Callable[[Reads], T], *, app: str,
           read_only: bool = True) -> T:
    """``read`` over ``config``'s tables on the first engine of :data:`ENGINES` that answers.

    Args:
        config: the command's config (loaded once, by the command).
        roles: the tables the read needs (``quarantine``, ``metrics``): DuckDB answers when each is a local path.
        read: the read, engine-free (its result is plain Python).
        app: the command, the name of a Spark session it starts (``quarantine:<app>``).
        read_only: a Spark session it starts is a lean one for a few small reads; False for a
            command that runs the stages after (``replay --dry-run``).

    Raises:
        ConfigError: bad options, config or ``$QUARANTINE_READ_ENGINE``.
        MissingTableError: a table the read needs does not exist yet.
    """
    for name in ENGINES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name not in _OPTIONAL:
                raise
            continue
        engine = module.engine(config, roles, app=app, read_only=read_only)
        if engine is None:
            continue
        try:
            return read(Reads.of(engine, config))
        except DeltaRsUnreadableError as exc:
            print(f"quarantine: reading with Spark: {exc}", file=sys.stderr)
        except _SparkAnswersError as exc:
            print(f"quarantine: {exc}", file=sys.stderr)
        finally:
            engine.close()
    raise RuntimeError(f"no engine answered quarantine {app}")  # Spark's engine always does


# --------------------------------------------------------------------------- the reads


def stats_tables(reads: Reads, pipeline: str | None) -> dict[str, Table]:
    """``stats``' tables of ``pipeline``'s rows (None: every pipeline), by title (:data:`STATS`)."""
    out = {}
    for title, name in STATS.items():
        values: dict[str, Any] = {"pipeline": pipeline} | ({"since": None} if name == "statuses" else {})
        out[title] = reads.read(name, **values)
    return out


def inspect_records(reads: Reads, f: RecordFilter, keys: KeyRing | None = None) -> list[dict[str, Any]]:
    """The rows ``f`` selects, the most recently seen first, as ``inspect --json`` prints them.

    A row kept encrypted is opened with ``keys`` where its key is readable here, else its
    payloads and message are shown as ``encrypted (N bytes)`` (:func:`~quarantine.ops.triage_output.record_json`).
    """
    names, rows = reads.read(
        "inspect", pipeline=f.pipeline, status=None if f.status == ALL else f.status, stage=f.stage,
        error_class=f.error_class, since=f.since, until=f.until, limit=f.limit,
    )
    return [record_json(dict(zip(names, row, strict=True)), keys) for row in rows]


def library_rows(reads: Reads, query: Query, values: Mapping[str, str], limit: int) -> Table:
    """A query of the SQL library over the views, at most ``limit + 1`` rows (one more: the output is cut).

    Raises:
        ConfigError: bad parameters, or a table the query reads that the config has not got.
    """
    text = bind(query, values, {t: reads.table(t) and t for t in query.tables})
    return reads.run(f"SELECT * FROM ({text}) AS library LIMIT {int(limit) + 1}", *query.tables)


def replay_selection(reads: Reads, pipeline: str, where: str | None,
                     keys: KeyRing | None = None) -> ReplaySelection:
    """The open rows of ``pipeline`` that ``where`` selects (None: all), by their quarantined failure.

    Each group's example message is opened with ``keys`` where its key is readable here, else
    shown as ``encrypted (N bytes)``.

    Raises:
        MissingTableError: no quarantine table yet.
        ConfigError: ``where`` is not a condition over the quarantine table's columns.
    """
    _, rows = reads.read("replay_selection", where=where, pipeline=pipeline)
    ring = keys or KeyRing.none()
    groups = [ErrorGroup(stage, error_class, int(n), ring.open_text(example))
              for stage, error_class, n, example in rows]
    return ReplaySelection(selected=sum(g.records for g in groups), groups=largest_first(groups))


def _naive(rows: list[list[Any]]) -> Rows:
    """Rows as tuples, each instant its UTC wall clock (naive: the page labels its times UTC)."""
    return [tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for v in r) for r in rows]


def report_data(reads: Reads, pipeline: str, *, since: dt.datetime | None = None,
                now: dt.datetime | None = None) -> ReportData:
    """``pipeline``'s report: each figure's rows (:class:`~quarantine.ops.report_model.ReportData`).

    Each table is read at one snapshot, so the figures agree with each other while a pipeline writes.
    The records (:attr:`~quarantine.ops.report_model.ReportData.records`) and the reads (``records_in``)
    are apart: the records are the target's rows, counted without reading them, and the quarantine
    rows not replayed, each record once; the reads are the runs' records in, where a re-run reads
    the open records again. The target is not counted with ``since`` (its rows have no first-seen
    time) nor when it is ``shared``.

    Args:
        reads: the reads (the quarantine table may not exist yet; the metrics table and the counted
            target may not be configured).
        pipeline: the pipeline whose rows are reported.
        since: keep only records first seen, breaches recorded and rows resolved at or after it.
        now: the report's time stamp (injected for tests).

    Raises:
        ConfigError: the quarantine table is not one.
    """
    data: dict[str, Any] = {"missing": {}}
    mine: dict[str, Any] = {"pipeline": pipeline, "since": since}
    quarantine = reads.table("quarantine") or ""
    if reads.has("quarantine"):
        ((first, last),) = reads.read("first_seen_span", **mine)[1]
        unit = time_unit(first, last)
        data |= {
            "unit": unit,
            "over_time": _naive(reads.read("quarantined_over_time", **mine,
                                           seconds={"hour": 3600, "day": 86400}[unit])[1]),
            "error_classes": _naive(reads.read("error_classes", **mine, top=TOP_ERROR_CLASSES)[1]),
            "partitions": _naive(reads.read("partition_offsets", **mine)[1]),
            "statuses": _naive(reads.read("statuses", **mine)[1]),
            "replays": _naive(reads.read("resolutions", **mine, latest=LATEST)[1]),
        }
    else:
        for fig in ("over_time", "error_classes", "partitions", "statuses", "replays"):
            data["missing"][fig] = str(MissingTableError("quarantine", quarantine))
    metrics = reads.table("metrics")
    if not reads.has("metrics"):
        data["missing"]["breaches"] = str(MissingTableError("metrics", metrics))
    else:
        ((total,),) = reads.read("records_in", **mine)[1]
        data |= {
            "breaches": _naive(reads.read("breaches", **mine, latest=LATEST)[1]),
            "resolution_runs": _naive(reads.read("resolution_runs", **mine)[1]),
            "records_in": int(total) if total is not None else 0,
        }
    if since is None and reads.table("target") is not None:
        data["in_target"] = reads.row_count("target") or 0  # no target yet: every record is in quarantine
    return ReportData(
        pipeline=pipeline, generated_at=now or dt.datetime.now(dt.UTC), quarantine_table=quarantine,
        metrics_table=metrics, since=since, **data,
    )
