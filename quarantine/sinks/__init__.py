"""Delta sinks: the target table, the quarantine table, the metrics table.

A table is named either by a path (contains ``/`` or a URI scheme) or by a
catalog name (``catalog.schema.table``). Helpers here hide that difference.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

__all__ = ["delta_table", "is_path", "read_table", "save", "table_exists"]


def is_path(name: str) -> bool:
    """Whether a table reference is a filesystem/URI path rather than a catalog name."""
    return "/" in name or "://" in name or name.startswith((".", "~"))


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether a Delta table exists at the path / under the catalog name."""
    if is_path(name):
        return DeltaTable.isDeltaTable(spark, name)
    return bool(spark.catalog.tableExists(name))


def delta_table(spark: SparkSession, name: str) -> DeltaTable:
    """The :class:`DeltaTable` for a path or a catalog name."""
    return DeltaTable.forPath(spark, name) if is_path(name) else DeltaTable.forName(spark, name)


def read_table(spark: SparkSession, name: str) -> DataFrame:
    """Read a Delta table by path or name."""
    return spark.read.format("delta").load(name) if is_path(name) else spark.table(name)


def save(writer: DataFrameWriter, name: str) -> None:
    """Finish a Delta write to a path or a catalog table."""
    if is_path(name):
        writer.save(name)
    else:
        writer.saveAsTable(name)
