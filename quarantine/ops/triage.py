"""Looking at quarantine from the shell on Spark: ``inspect``, ``stats``, ``sql`` and ``views``.

The DataFrame side is pure (:func:`select_records`, :func:`stats_frames`); the
commands (:func:`run_command`) read the configured tables, collect a bounded
number of rows and print them with :mod:`quarantine.ops.triage_output`, which the
JVM-free engine (:mod:`quarantine.ops.duck`) prints its rows with too. This is the
path for catalog names, Spark Connect and Databricks, and for a table delta-rs cannot read.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quarantine.display import print_json
from quarantine.errors import ConfigError, QuarantineError
from quarantine.instants import collect_utc
from quarantine.keyring import KeyRing
from quarantine.ops.triage_output import (
    ALL,
    COMMANDS,
    RecordFilter,
    list_queries,
    parse_time,
    print_records,
    print_sql,
    print_stats,
    record_json,
    record_title,
)
from quarantine.schema import (
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

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from quarantine.config import PipelineConfig

__all__ = [
    "ALL",
    "COMMANDS",
    "RecordFilter",
    "parse_time",
    "pipeline_of",
    "record_json",
    "run_command",
    "select_records",
    "stats_frames",
]


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


# --------------------------------------------------------------------------- the commands


def run_command(args: argparse.Namespace, overrides: Mapping[str, Any]) -> int:
    """Run ``args.command`` (one of :data:`COMMANDS`); its exit code.

    Raises:
        ConfigError: bad options, config, query name or parameters (exit code 2).
        QuarantineError: the quarantine table does not exist yet (exit code 1).
    """
    if args.command == "sql" and args.name is None:
        return list_queries(args.json)
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
            pipeline=pipeline_of(args, config), status=args.status, stage=args.stage, error_class=args.error_class,
            since=parse_time(args.since, "--since") if args.since else None,
            until=parse_time(args.until, "--until") if args.until else None,
            limit=args.limit,
        )
        return _inspect(config, record_filter, as_json=args.json)
    return _stats(config, pipeline_of(args, config), as_json=args.json)


def pipeline_of(args: argparse.Namespace, config: PipelineConfig) -> str | None:
    """The pipeline whose rows ``inspect``/``stats`` show: ``--pipeline``, else the config's ('' is every one)."""
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
    keys = KeyRing.from_errors(config.errors)
    records = [record_json(r.asDict(), keys) for r in collect_utc(df)]
    if as_json:
        print_json(records)
        return 0
    print_records(record_title(f, config.errors.dlq_table_name), records)
    return 0


def _stats(config: PipelineConfig, pipeline: str | None, *, as_json: bool) -> int:
    frames = stats_frames(_quarantine(_spark("stats", config), config), pipeline)
    tables = {title: (df.columns, [list(r) for r in collect_utc(df)]) for title, df in frames.items()}
    print_stats(tables, pipeline, as_json=as_json)
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
    print_sql(query, df.columns, [list(r) for r in collect_utc(df)], args.limit, as_json=args.json,
              keys=KeyRing.from_errors(config.errors))
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
