"""Delta tables by name: a path or a catalog name, read, created, saved, versioned, quoted in SQL.

Every table the library writes or reads (the target, the quarantine and metrics
tables, the tolerance window's state) goes through these helpers. A table is named
either by a path or by a catalog name (``catalog.schema.table``; the rule:
:func:`quarantine.table_names.is_path`). Helpers here hide that difference.

Spark Connect (Databricks serverless, shared clusters, Databricks Connect) serves
the DataFrame API and SQL but not ``delta.tables.DeltaTable`` unless the server
loads Delta's Connect plugin. So what runs on every batch goes through the
DataFrame API and SQL only: MERGE is :meth:`DataFrame.mergeInto` on
:func:`table_ref`, a table's version is ``DESCRIBE HISTORY``. Only a classic
session uses ``DeltaTable`` (to see a path table another process just created,
see :func:`table_exists`, and to create a path table).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from quarantine.table_names import is_path, name_parts, quote_part, sql_literal, table_ref

__all__ = [
    "add_missing_columns",
    "create_table",
    "is_connect",
    "local_table_location",
    "name_parts",
    "read_table",
    "read_table_pinned",
    "register_warehouse_tables",
    "save",
    "sql_literal",
    "table_column",
    "table_exists",
    "table_ref",
    "table_version",
]

_log = logging.getLogger(__name__)

#: What ``DeltaTable.forPath`` raises for a path that holds no Delta table (yet).
_NO_DELTA_TABLE = frozenset({"DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND"})


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def table_column(name: str, column: str) -> Column:
    """The target table's ``column`` in a MERGE on ``name`` (qualified by :func:`table_ref`)."""
    return F.col(f"{table_ref(name)}.{quote_part(column)}")


def table_version(spark: SparkSession, name: str) -> int:
    """The table's latest commit version (``DESCRIBE HISTORY … LIMIT 1``).

    Raises:
        AnalysisException: no Delta table there.
    """
    row = spark.sql(f"DESCRIBE HISTORY {table_ref(name)} LIMIT 1").select("version").first()
    assert row is not None  # a Delta table has at least its version 0
    return int(row[0])


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether a Delta table exists at the path / under the catalog name, as of now.

    For a path, ``DeltaTable.isDeltaTable`` answers from the process's cached
    snapshot: once this process has looked at a table another writer was still
    creating (a ``_delta_log`` without a first commit), it keeps answering False
    after that commit. A False is therefore confirmed with ``DeltaTable.forPath``,
    which reads the log again. Over Spark Connect the table's schema is asked for.
    """
    if not is_path(name):
        return bool(spark.catalog.tableExists(name)) or _register_local(spark, name)
    if is_connect(spark):
        try:
            _ = spark.read.format("delta").load(name).schema
        except AnalysisException as exc:
            if exc.getCondition() in _NO_DELTA_TABLE or exc.getCondition() == "PATH_NOT_FOUND":
                return False
            raise
        return True
    if DeltaTable.isDeltaTable(spark, name):
        return True
    try:
        DeltaTable.forPath(spark, name)
    except AnalysisException as exc:
        if exc.getCondition() in _NO_DELTA_TABLE:
            return False
        raise
    return True


def create_table(
    spark: SparkSession,
    name: str,
    schema: StructType,
    *,
    comment: str,
    cluster_by: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> bool:
    """Create an empty Delta table unless it exists; return whether this call created it.

    True means exactly "this call committed the table's version 0", so the caller
    may treat the table as empty (e.g. append instead of MERGE). Safe against a
    concurrent creator: losing that race returns False once the winner's table
    is there. A location that is not a Delta table yet still holds files of a
    creator that has not committed raises ``DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION``,
    which the write retry policy retries (:func:`quarantine.errorhandling.retriable.is_table_creation_race`).
    """
    if table_exists(spark, name):
        return False
    # create, not createIfNotExists: the latter also "succeeds" when the table already
    # exists, and then this call could not tell that it did not create it.
    try:
        if is_path(name) and not is_connect(spark):
            builder = DeltaTable.create(spark).location(name).addColumns(schema).comment(comment)
            for key, value in (properties or {}).items():
                builder = builder.property(key, value)
            if cluster_by:
                builder = builder.clusterBy(*cluster_by)
            builder.execute()
        else:
            # SQL, not DeltaTable.create().tableName(): the builder parses the name as a
            # two-part identifier, so catalog.schema.table failed with PARSE_SYNTAX_ERROR;
            # and over Spark Connect there is no DeltaTable builder
            spark.sql(_create_table_sql(name, schema, comment, cluster_by, properties or {}))
    except Exception:
        # Another writer created it first: TABLE_OR_VIEW_ALREADY_EXISTS, or, when both
        # raced for version 0, ProtocolChangedException. Either way the table is there.
        if table_exists(spark, name):
            return False
        raise
    return True


def _create_table_sql(
    name: str, schema: StructType, comment: str, cluster_by: Sequence[str], properties: Mapping[str, str]
) -> str:
    """``CREATE TABLE`` for a catalog name (``db.table`` or ``catalog.schema.table``) or a path."""
    columns = ", ".join(
        f"{quote_part(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}" for f in schema.fields
    )
    sql = f"CREATE TABLE {table_ref(name)} ({columns}) USING delta"
    if cluster_by:
        sql += f" CLUSTER BY ({', '.join(quote_part(c) for c in cluster_by)})"
    sql += f" COMMENT {sql_literal(comment)}"
    if properties:
        pairs = ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in properties.items())
        sql += f" TBLPROPERTIES ({pairs})"
    return sql


def read_table(spark: SparkSession, name: str) -> DataFrame:
    """Read a Delta table by path or name."""
    return spark.read.format("delta").load(name) if is_path(name) else spark.table(name)


def read_table_pinned(spark: SparkSession, name: str) -> DataFrame:
    """Read a Delta table as of its current version, by path or name.

    A DataFrame over a Delta table reads the latest version each time it runs;
    this one reads the same version every time (``versionAsOf``), so a batch
    read twice holds the same records while others append to the table.
    """
    v = table_version(spark, name)
    if is_path(name):
        return spark.read.format("delta").option("versionAsOf", v).load(name)
    return spark.read.format("delta").option("versionAsOf", v).table(name)


def save(writer: DataFrameWriter, name: str) -> None:
    """Finish a Delta write to a path or a catalog table."""
    if is_path(name):
        writer.save(name)
    else:
        writer.saveAsTable(name)


def add_missing_columns(spark: SparkSession, name: str, schema: StructType) -> list[str]:
    """Add the columns of ``schema`` that the existing table ``name`` lacks (a table of an older version).

    Columns are added at the end, NULL in the table's existing rows; nothing else
    changes. Returns the names added (empty: the table had them all).
    """
    have = set(read_table(spark, name).columns)
    missing = [f for f in schema.fields if f.name not in have]
    if missing:
        cols = ", ".join(f"{quote_part(f.name)} {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"ALTER TABLE {table_ref(name)} ADD COLUMNS ({cols})")
    return [f.name for f in missing]


#: The catalog names of Spark's session catalog: a one- or two-part name is in it too.
_SESSION_CATALOGS = frozenset({"spark_catalog"})


def _local_warehouse(spark: SparkSession) -> Path | None:
    """The local default's warehouse folder: Spark's in-memory catalog over a ``file:`` warehouse; else None.

    The in-memory catalog forgets every name when its process ends; the tables' folders
    stay in the warehouse. A Hive or Unity Catalog metastore keeps its names itself.
    """
    try:
        # unset is Spark's default, the in-memory catalog (enableHiveSupport sets "hive")
        catalog = spark.conf.get("spark.sql.catalogImplementation", "in-memory")
        warehouse = spark.conf.get("spark.sql.warehouse.dir", None) or ""
    except PySparkException:  # a Connect server that does not show its static settings
        return None
    if catalog != "in-memory":
        return None
    uri = urlparse(warehouse)
    if uri.scheme not in ("", "file"):
        return None
    return Path(unquote(uri.path)) if uri.path else None


def local_table_location(spark: SparkSession, name: str) -> Path | None:
    """The folder the local default keeps the catalog table ``name`` in; None off the local default.

    Spark's session catalog puts a table of the ``default`` schema at
    ``<warehouse>/<table>`` and one of schema ``s`` at ``<warehouse>/s.db/<table>``
    (names lower-cased); a name of another catalog has no such folder.
    """
    warehouse = _local_warehouse(spark)
    if warehouse is None:
        return None
    parts = [p.lower() for p in name_parts(name)]
    if len(parts) == 3 and parts[0] not in _SESSION_CATALOGS:
        return None
    schema = parts[-2] if len(parts) > 1 else spark.catalog.currentDatabase().lower()
    return warehouse / parts[-1] if schema == "default" else warehouse / f"{schema}.db" / parts[-1]


def _is_committed_delta(folder: Path) -> bool:
    """Whether ``folder`` holds a Delta table with at least one commit (a creator may not have committed yet)."""
    log = folder / "_delta_log"
    return log.is_dir() and any(log.glob("*.json"))


def _register(spark: SparkSession, schema: str, table: str, folder: Path) -> None:
    """Give the Delta table at ``folder`` the name ``spark_catalog.schema.table`` in this session's catalog."""
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS spark_catalog.{quote_part(schema)}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS spark_catalog.{quote_part(schema)}.{quote_part(table)} "
        f"USING delta LOCATION {sql_literal(folder.as_uri())}"
    )


def _register_local(spark: SparkSession, name: str) -> bool:
    """On the local default, register ``name`` if its warehouse folder holds a Delta table; return whether it did.

    Another process may have created the table since this session listed the warehouse
    (:func:`register_warehouse_tables`).
    """
    folder = local_table_location(spark, name)
    if folder is None or not _is_committed_delta(folder):
        return False
    schema = "default" if folder.parent == _local_warehouse(spark) else folder.parent.name[: -len(".db")]
    _register(spark, schema, folder.name, folder)
    return True


def register_warehouse_tables(spark: SparkSession) -> list[str]:
    """On the local default, give each Delta table in the warehouse its catalog name again; return the names.

    Spark's in-memory catalog (a local session's, without Hive) forgets a table's name
    when its process ends, while the table stays in ``spark-warehouse/``: a name written
    by ``quarantine run`` would be unknown to the next command. A session the library
    builds therefore registers every committed Delta table it finds there
    (``<warehouse>/<table>`` as ``default.<table>``, ``<warehouse>/<s>.db/<table>`` as
    ``s.<table>``) under its name, pointing at its folder, as a metastore that persists
    would have kept it. Off the local default (Hive, Unity Catalog, a warehouse that is
    not a local folder) nothing is done.
    """
    warehouse = _local_warehouse(spark)
    if warehouse is None or not warehouse.is_dir():
        return []
    names: list[str] = []
    schemas = [("default", warehouse)] + [
        (d.name[: -len(".db")], d) for d in sorted(warehouse.glob("*.db")) if d.is_dir()
    ]
    for schema, folder in schemas:
        for table in sorted(t for t in folder.iterdir() if t.is_dir() and not t.name.endswith(".db")):
            if not _is_committed_delta(table):
                continue
            try:
                _register(spark, schema, table.name, table)
            except AnalysisException as exc:  # one damaged folder does not keep the others nameless
                _log.warning("the Delta table at %s keeps no name in this session: %s", table, exc.getCondition())
                continue
            names.append(f"{schema}.{table.name}")
    return names
