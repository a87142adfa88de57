"""Looking at quarantine from the shell: ``inspect``, ``stats``, ``sql`` and ``views``.

The DataFrame side is pure (:func:`select_records`, :func:`stats_frames`); the
commands (:func:`run_command`) read the configured tables, collect a bounded
number of rows and print them with :mod:`quarantine.display` — a table for a
terminal, or JSON with ``--json``. Payloads (``key``, ``value``, header values)
are shown as UTF-8 text where they decode and as hex where they do not, with
their encoding named in JSON; tables cut long values, JSON never does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from quarantine.display import decode_bytes, gist, plain, print_json, print_table, shorten
from quarantine.errors import ConfigError, QuarantineError
from quarantine.instants import collect_utc
from quarantine.schema import (
    ERROR_CLASS,
    FIRST_SEEN_AT,
    HEADER_KEY,
    HEADER_VALUE,
    HEADERS,
    KEY,
    LAST_SEEN_AT,
    OFFSET,
    PARTITION,
    PIPELINE,
    STAGE,
    STATUS,
    TIMESTAMP,
    TOPIC,
    VALUE,
    QuarantineStatus,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from quarantine.config import PipelineConfig

__all__ = [
    "ALL",
    "COMMANDS",
    "RecordFilter",
    "parse_time",
    "record_json",
    "run_command",
    "select_records",
    "stats_frames",
]

#: The commands this module runs.
COMMANDS = ("inspect", "stats", "sql", "views")

#: ``--status all``: every status.
ALL = "all"

#: How many characters of a message / payload / all headers an ``inspect`` table shows.
_MESSAGE_WIDTH = 50
_PAYLOAD_WIDTH = 30
_HEADERS_WIDTH = 80

_RELATIVE = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def parse_time(text: str, option: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """A ``--since``/``--until`` value as an aware UTC datetime.

    ``2026-11-25``, ``2026-11-25T10:00``, ``2026-11-25 10:00:00`` (UTC unless an
    offset is given), or an age: ``30m``, ``24h``, ``7d`` (that long before ``now``).

    Raises:
        ConfigError: anything else, naming ``option``.
    """
    m = _RELATIVE.match(text.strip())
    if m:
        return (now or dt.datetime.now(dt.UTC)) - dt.timedelta(**{_UNITS[m[2]]: int(m[1])})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(option, text, "an ISO date/time (2026-11-25, 2026-11-25T10:00) or an age (30m, 24h, 7d)") \
            from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class RecordFilter:
    """Which quarantine rows ``inspect`` shows.

    Attributes:
        pipeline: the pipeline (None: every pipeline of the table).
        status: ``open``, ``replayed``, ``discarded`` or :data:`ALL`.
        stage: only this stage (None: any).
        error_class: only this error class (None: any).
        since: only rows last seen at or after this time.
        until: only rows last seen before this time.
        limit: at most this many rows, the most recently seen first.
    """

    pipeline: str | None = None
    status: str = QuarantineStatus.OPEN.value
    stage: str | None = None
    error_class: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 20

    def __post_init__(self) -> None:
        allowed = [s.value for s in QuarantineStatus] + [ALL]
        if self.status not in allowed:
            raise ConfigError("--status", self.status, " | ".join(allowed))
        if self.limit < 1:
            raise ConfigError("--limit", self.limit, "a positive number of rows")
        if self.since and self.until and self.since >= self.until:
            raise ConfigError("--since", self.since.isoformat(), f"a time before --until ({self.until.isoformat()})")


def select_records(quarantine: DataFrame, f: RecordFilter) -> DataFrame:
    """The rows of ``quarantine`` that ``f`` selects, the most recently seen first (pure).

    Each header's ``key`` is BINARY (its bytes as stored); every other column as in the table.
    """
    from pyspark.sql import functions as F

    df = quarantine
    for column, value in (("pipeline", f.pipeline), ("stage", f.stage), ("error_class", f.error_class)):
        if value is not None:
            df = df.where(F.col(column) == F.lit(value))
    if f.status != ALL:
        df = df.where(F.col(STATUS) == F.lit(f.status))
    if f.since is not None:
        df = df.where(F.col(LAST_SEEN_AT) >= F.lit(f.since))
    if f.until is not None:
        df = df.where(F.col(LAST_SEEN_AT) < F.lit(f.until))
    # A header key is a STRING whose bytes need not be UTF-8 (a Delta or file source's): collected as
    # a string, its bad bytes would become U+FFFD; as bytes, record_json shows them as hex.
    headers = F.transform(
        HEADERS, lambda h: F.struct(h[HEADER_KEY].cast("binary").alias(HEADER_KEY), h[HEADER_VALUE].alias(HEADER_VALUE))
    )
    return (
        df.orderBy(F.col(LAST_SEEN_AT).desc(), TOPIC, PARTITION, OFFSET)
        .limit(f.limit)
        .withColumn(HEADERS, headers)
    )


def stats_frames(quarantine: DataFrame, pipeline: str | None) -> dict[str, DataFrame]:
    """The ``stats`` tables of ``pipeline``'s rows (None: every pipeline), by title (pure).

    * ``records by status``: status, records;
    * ``open records by stage and error class``: stage, error_class, records, first/last seen;
    * ``open records per topic partition``: topic, partition, records, lowest/highest offset.
    """
    from pyspark.sql import functions as F

    df = quarantine if pipeline is None else quarantine.where(F.col(PIPELINE) == F.lit(pipeline))
    open_ = df.where(F.col(STATUS) == F.lit(QuarantineStatus.OPEN.value))
    return {
        "records by status": df.groupBy(STATUS).agg(F.count(F.lit(1)).alias("records")).orderBy(STATUS),
        "open records by stage and error class": open_.groupBy(STAGE, ERROR_CLASS).agg(
            F.count(F.lit(1)).alias("records"),
            F.min(FIRST_SEEN_AT).alias(FIRST_SEEN_AT),
            F.max(LAST_SEEN_AT).alias(LAST_SEEN_AT),
        ).orderBy(F.col("records").desc(), STAGE, ERROR_CLASS),
        "open records per topic partition": open_.groupBy(TOPIC, PARTITION).agg(
            F.count(F.lit(1)).alias("records"),
            F.min(OFFSET).alias("min_offset"),
            F.max(OFFSET).alias("max_offset"),
        ).orderBy(TOPIC, PARTITION),
    }


def _payload(raw: bytes | bytearray | None) -> dict[str, str | None]:
    text, encoding = decode_bytes(raw)
    return {"text": text, "encoding": encoding}


def record_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """One quarantine row as ``inspect --json`` prints it: payloads as ``{"text", "encoding"}``, nothing cut.

    A header's key is its text, or ``hex:<hex>`` when its bytes (as :func:`select_records`
    gives them) are not UTF-8.
    """
    out: dict[str, Any] = {}
    for name in ("pipeline", TOPIC, PARTITION, OFFSET, TIMESTAMP, "status", "stage", "kind",
                 "error_class", "message", "error_count", "attempts", "first_seen_at", "last_seen_at",
                 "run_id", "batch_id", "resolved_at", "resolution"):
        value = row.get(name)
        out[name] = value.isoformat() if isinstance(value, dt.datetime) else value
    out[KEY] = _payload(row.get(KEY))
    out[VALUE] = _payload(row.get(VALUE))
    out[HEADERS] = [
        {HEADER_KEY: plain(h[HEADER_KEY]), HEADER_VALUE: _payload(h[HEADER_VALUE])} for h in (row.get(HEADERS) or [])
    ]
    return out


def _shown(payload: Mapping[str, str | None]) -> str | None:
    text = payload["text"]
    if text is None:
        return None
    return shorten(text if payload["encoding"] == "utf-8" else f"hex:{text}", _PAYLOAD_WIDTH)


def _inspect_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in records:
        headers = ", ".join(f"{h[HEADER_KEY]}={_shown(h[HEADER_VALUE])}" for h in r[HEADERS]) or None
        rows.append([
            _coordinates(r), r["status"], r["stage"], r["error_class"],
            gist(r["message"], _MESSAGE_WIDTH), r["error_count"],
            r["last_seen_at"] and dt.datetime.fromisoformat(r["last_seen_at"]),
            _shown(r[KEY]), _shown(r[VALUE]), shorten(headers, _HEADERS_WIDTH),
        ])
    return rows


def _print_records(title: str, records: list[dict[str, Any]], *, out: TextIO | None = None) -> None:
    """``inspect``'s table of :func:`record_json` records: the message gets its width before the payloads."""
    print_table(title, _INSPECT_COLUMNS, _inspect_rows(records), out=out, first=("message",))


#: A record's coordinates in one column, as Kafka's tools write them (``orders-0@4``: topic-partition@offset):
#: three columns of their own left the message and the payloads less of the page.
_INSPECT_COLUMNS = ("record", "status", "stage", "error_class", "message",
                    "failures", "last_seen_at", KEY, VALUE, HEADERS)


def _coordinates(record: Mapping[str, Any]) -> str:
    """``topic-partition@offset``; a NULL part reads ``NULL``."""
    topic, partition, offset = (("NULL" if record[c] is None else record[c]) for c in (TOPIC, PARTITION, OFFSET))
    return f"{topic}-{partition}@{offset}"


# --------------------------------------------------------------------------- the commands


def run_command(args: argparse.Namespace, overrides: Mapping[str, Any]) -> int:
    """Run ``args.command`` (one of :data:`COMMANDS`); its exit code.

    Raises:
        ConfigError: bad options, config, query name or parameters (exit code 2).
        QuarantineError: the quarantine table does not exist yet (exit code 1).
    """
    if args.command == "sql" and args.name is None:
        return _list_queries(args.json)
    if args.command == "sql":
        from quarantine.sql import get_query

        get_query(args.name)  # an unknown name is reported before the config is read
    if args.conf is None:
        raise ConfigError("--conf", None, f"the pipeline config whose tables `quarantine sql {args.name}` reads")
    from quarantine.config import load_config

    config = load_config(args.conf, overrides)
    if args.command == "sql":
        return _sql(args, config)
    if args.command == "views":
        return _views(args, config)
    if args.command == "inspect":
        record_filter = RecordFilter(
            pipeline=_pipeline(args, config), status=args.status, stage=args.stage, error_class=args.error_class,
            since=parse_time(args.since, "--since") if args.since else None,
            until=parse_time(args.until, "--until") if args.until else None,
            limit=args.limit,
        )
        return _inspect(config, record_filter, as_json=args.json)
    return _stats(config, _pipeline(args, config), as_json=args.json)


def _pipeline(args: argparse.Namespace, config: PipelineConfig) -> str | None:
    if args.pipeline is None:
        return config.pipeline
    return args.pipeline or None


def _spark(command: str, config: PipelineConfig) -> SparkSession:
    from quarantine.spark.session import get_spark

    return get_spark(f"quarantine:{command}", config.spark_conf)


def _quarantine(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    from quarantine.sinks.quarantine import read_quarantine
    from quarantine.tables import table_exists

    name = config.errors.dlq_table_name
    if not table_exists(spark, name):
        raise QuarantineError(
            f"no quarantine table at {name} yet (errors.deadletterqueue.table.name); "
            "a pipeline run creates it on its first batch"
        )
    return read_quarantine(spark, name)


def _inspect(config: PipelineConfig, f: RecordFilter, *, as_json: bool) -> int:
    df = select_records(_quarantine(_spark("inspect", config), config), f)
    records = [record_json(r.asDict()) for r in collect_utc(df)]
    if as_json:
        print_json(records)
        return 0
    where = f"pipeline {f.pipeline}" if f.pipeline else "every pipeline"
    _print_records(f"{f.status} records of {where} in {config.errors.dlq_table_name} "
                   f"(at most {f.limit}, last seen first)", records)
    return 0


def _stats(config: PipelineConfig, pipeline: str | None, *, as_json: bool) -> int:
    frames = stats_frames(_quarantine(_spark("stats", config), config), pipeline)
    tables = {title: (df.columns, [list(r) for r in collect_utc(df)]) for title, df in frames.items()}
    if as_json:
        print_json({title: [dict(zip(cols, row, strict=True)) for row in rows]
                    for title, (cols, rows) in tables.items()})
        return 0
    where = f"pipeline {pipeline}" if pipeline else "every pipeline"
    for title, (cols, rows) in tables.items():
        print_table(f"{title} ({where})", cols, rows)
    return 0


def _list_queries(as_json: bool) -> int:
    from quarantine.sql import catalogue

    queries = catalogue()
    if as_json:
        print_json([{"name": q.name, "summary": q.summary, "tables": list(q.tables),
                     "params": [{"name": p.name, "type": p.type.value, "default": p.default, "doc": p.doc,
                                 "choices": list(p.choices)}
                                for p in q.params]} for q in queries.values()])
        return 0
    print_table("the SQL library (quarantine sql NAME --conf FILE [--param NAME=VALUE ...])",
                ("name", "what it shows", "parameters"),
                [(q.name, q.summary, ", ".join(f"{p.name}={p.default}" for p in q.params))
                 for q in queries.values()])
    return 0


def _sql(args: argparse.Namespace, config: PipelineConfig) -> int:
    from quarantine.sql import bind, get_query, parse_params

    query = get_query(args.name)
    values = parse_params(args.param)
    if query.param("pipeline") is not None:
        values.setdefault("pipeline", config.pipeline)
    text = bind(query, values, {"quarantine": config.errors.dlq_table_name, "metrics": config.metrics.table})
    if args.print_sql:
        print(text)
        return 0
    if args.limit < 1:
        raise ConfigError("--limit", args.limit, "a positive number of rows")
    spark = _spark("sql", config)
    _quarantine(spark, config)  # a clear message when there is no table yet
    df = spark.sql(text).limit(args.limit + 1)  # one more row than shown: whether the output is cut
    rows = [list(r) for r in collect_utc(df)]
    cut = len(rows) > args.limit
    rows = rows[: args.limit]
    notice = f"the first {args.limit:,} rows: more rows match (--limit)" if cut else None
    if args.json:
        print_json([dict(zip(df.columns, row, strict=True)) for row in rows])
        if notice:
            print(notice, file=sys.stderr)  # stdout stays one JSON document
        return 0
    print_table(f"{query.name}: {query.summary}", df.columns, rows)
    if notice:
        print(notice)
    return 0


def _views(args: argparse.Namespace, config: PipelineConfig) -> int:
    from quarantine.ops.views import create_views, view_statements

    statements = view_statements(config.errors.dlq_table_name, schema=args.schema)
    if args.print_sql:
        for v in statements:
            print(v.sql + ";\n")
        return 0
    spark = _spark("views", config)
    _quarantine(spark, config)
    for v in create_views(spark, config.errors.dlq_table_name, schema=args.schema):
        print(f"created view {v.name}: {v.summary}")
    return 0
