"""The Spark engine of the operator's reads: each table a temporary view named by its role.

For catalog names, Spark Connect, Databricks, a table delta-rs cannot read and
``$QUARANTINE_READ_ENGINE=spark``, the reads (:mod:`quarantine.ops.reads`) run here: each
table is read at its current version (pinned: every read of a command sees the same
snapshot, as DuckDB's Arrow rows do) and registered as the temporary view ``quarantine`` or
``metrics``, which the reads' Spark SQL names; the rows are collected with every instant in
UTC (:func:`~quarantine.instants.collect_utc`). The report's target is only counted, which
Delta answers from its log. The views are dropped when the command is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS
from quarantine.config import PipelineConfig
from quarantine.instants import collect_utc
from quarantine.runners.replay import check_predicate
from quarantine.spark.session import get_spark
from quarantine.tables import read_table_pinned, table_exists

__all__ = ["SparkEngine", "engine"]


class SparkEngine:
    """The reads' views over a Spark session's tables (:class:`quarantine.ops.reads.Engine`)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._views: list[str] = []

    def view(self, role: str, table: str) -> Sequence[str] | None:
        """Register the temporary view ``role`` over ``table`` at its current version; its columns, or None."""
        if not table_exists(self.spark, table):
            return None
        df = read_table_pinned(self.spark, table)
        if role == "quarantine" and HEADERS in df.columns:
            # a header key is a STRING whose bytes need not be UTF-8 (a Delta or file source's): its bytes
            df = df.withColumn(HEADERS, F.transform(HEADERS, lambda h: F.struct(
                h[HEADER_KEY].cast("binary").alias(HEADER_KEY), h[HEADER_VALUE].alias(HEADER_VALUE))))
        df.createOrReplaceTempView(role)
        self._views.append(role)
        return df.columns

    def rows(self, sql: str) -> tuple[list[str], list[list[Any]]]:
        """``sql``'s column names and rows, every instant an aware UTC datetime."""
        df = self.spark.sql(sql)
        return df.columns, [list(r) for r in collect_utc(df)]

    def row_count(self, role: str, table: str) -> int | None:
        """How many rows ``table`` holds at its current version (Delta answers from its log); None: no such table."""
        del role
        return read_table_pinned(self.spark, table).count() if table_exists(self.spark, table) else None

    def check_condition(self, where: str) -> None:
        """Check ``where`` over the quarantine table's columns (:func:`~quarantine.runners.replay.check_predicate`).

        Raises:
            ConfigError: it is not a condition over them; the message has Spark's reason.
        """
        check_predicate(self.spark, where)

    def close(self) -> None:
        """Drop the views this engine registered."""
        for role in self._views:
            self.spark.catalog.dropTempView(role)
        self._views.clear()


def engine(config: PipelineConfig, roles: Sequence[str], *, app: str, read_only: bool) -> SparkEngine:
    """Spark for a read of ``config``'s tables: the active session, or one started as ``quarantine:<app>``.

    ``read_only``: a session it starts is the lean one of a command that reads a few tables
    (:data:`quarantine.spark.session.READ_ONLY`).
    """
    del roles
    return SparkEngine(get_spark(f"quarantine:{app}", config.spark_conf, read_only=read_only))
