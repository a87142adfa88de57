"""The target table: good rows, written exactly once per batch.

Two idempotence strategies, both Delta-native:

* **streaming** — a target that keeps the source coordinates is appended plainly:
  the stream's first micro-batch after a start leaves out the records the tables
  hold (compared by coordinates and content, as a batch run's records are), and
  every later one reads offsets that no table holds yet (README, Guarantees). A
  target without them is appended with ``txnAppId`` (pipeline + query id) and
  ``txnVersion`` (the micro-batch id): Delta skips a version it has already
  committed, so a micro-batch replayed after a crash appends nothing.
* **batch** — the first write creates the table with a plain append; later
  runs MERGE insert-only on the source record's identity: its coordinates
  (``_source_topic``, ``_source_partition``, ``_source_offset``) and its content's
  fingerprint (``_source_fingerprint``), so re-running the same input adds nothing,
  new records are added once, and a record with other content under coordinates
  the table holds (a recreated topic) is a new record. A row written before the
  fingerprint existed is the same record when its ``_source_timestamp`` is.
"""

from __future__ import annotations

import uuid

from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from quarantine.columns import (
    OFFSET,
    TARGET_FINGERPRINT,
    TARGET_OFFSET,
    TARGET_PARTITION,
    TARGET_TIMESTAMP,
    TARGET_TOPIC,
)
from quarantine.config.choices import SchemaEvolution
from quarantine.errors import SchemaMismatchError
from quarantine.identity import Floors
from quarantine.sinks.ownership import claim_written_topics
from quarantine.sinks.target_schema import (
    SchemaChange,
    add_columns_sql,
    check,
    compare,
    lacking,
    same_type,
    widen_sql,
)
from quarantine.tables import read_table, save, table_exists, table_ref

__all__ = [
    "DELTA_INDEXED_COLUMNS",
    "INDEXED_COLUMNS_PROPERTY",
    "SOURCE_COLUMNS",
    "aligned",
    "append_batch",
    "evolve_target",
    "highest_offsets",
    "layout_properties",
    "merge_new_rows",
    "target_change",
    "txn_app_id",
]

#: The source record kept in the target (when ``target.source_columns``): its coordinates,
#: timestamp and content fingerprint (:func:`quarantine.identity.fingerprint`).
SOURCE_COLUMNS: tuple[str, ...] = (
    TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET, TARGET_TIMESTAMP, TARGET_FINGERPRINT,
)


def target_change(
    spark: SparkSession, table: str, rows: StructType, *, evolution: SchemaEvolution
) -> SchemaChange | None:
    """How rows of schema ``rows`` differ from the existing target's schema, refused if it cannot take them.

    The one place that decides whether the pipeline's output may be written into the
    target (:mod:`quarantine.sinks.target_schema`): a batch's writer asks it before any
    write of the batch, and :func:`merge_new_rows` and :func:`append_batch` ask it again.
    The :data:`SOURCE_COLUMNS` a target of an older version lacks are added whatever
    ``evolution`` says.

    Returns:
        The change (:func:`evolve_target` adds its new fields and widens its columns); None when there is no
        table yet (the write creates it with the rows' schema).

    Raises:
        SchemaMismatchError: a field retyped, or new or widened fields under ``evolution`` ``fail``.
    """
    if not table_exists(spark, table):
        return None
    change = compare(read_table(spark, table).schema, rows)
    check(change, table=table, evolution=evolution, always_added=SOURCE_COLUMNS)
    return change


def evolve_target(spark: SparkSession, table: str, change: SchemaChange) -> None:
    """Make the table take ``change``: add its new fields (nested ones inside their structs, NULL in
    its rows) and widen its widened columns (Delta's type widening, turned on for the table).

    An ``ALTER TABLE … ADD COLUMNS`` commit, and for a widening one commit turning on
    ``delta.enableTypeWidening`` and one per column; nothing when there is nothing to do. A
    concurrent writer that made the same change first is no failure.
    """
    columns = add_columns_sql(change)
    widen = widen_sql(change)
    ref = table_ref(table)
    try:
        if columns is not None:
            spark.sql(f"ALTER TABLE {ref} ADD COLUMNS ({columns})")
        if widen:
            spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for clause in widen:
            spark.sql(f"ALTER TABLE {ref} ALTER COLUMN {clause}")
    except Exception:
        if lacking(read_table(spark, table).schema, change):
            raise


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _fit(col: Column, have: DataType, want: DataType) -> Column:
    """``col`` (of type ``have``) as type ``want``: a struct field by field (a field it lacks NULL), else cast."""
    if same_type(have, want):
        return col
    if isinstance(have, StructType) and isinstance(want, StructType):
        fields = {f.name.lower(): f for f in have.fields}
        parts = [
            _fit(col.getField(fields[w.name.lower()].name), fields[w.name.lower()].dataType, w.dataType).alias(w.name)
            if w.name.lower() in fields else F.lit(None).cast(w.dataType).alias(w.name)
            for w in want.fields
        ]
        return F.when(col.isNull(), F.lit(None).cast(want)).otherwise(F.struct(*parts))
    return col.cast(want)


def aligned(rows: DataFrame, schema: StructType) -> DataFrame:
    """``rows`` in the table's shape: its columns in its order and types; a column the rows lack is NULL.

    A struct column is rebuilt field by field the same way; a narrower type is cast up.

    Raises:
        SchemaMismatchError: the rows hold a field the table lacks or one it cannot take
            (:func:`target_change` and :func:`evolve_target` were not asked first).
    """
    change = compare(schema, rows.schema)
    if change.added or change.retyped:
        wrong = (change.added or change.retyped)[0]
        raise SchemaMismatchError(f"the target's schema changed during the write: column {wrong.name}; re-run")
    have = {f.name.lower(): f for f in rows.schema.fields}
    return rows.select(*[
        _fit(F.col(_quoted(have[f.name.lower()].name)), have[f.name.lower()].dataType, f.dataType).alias(f.name)
        if f.name.lower() in have else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ])


def _fitted(spark: SparkSession, rows: DataFrame, table: str, evolution: SchemaEvolution) -> DataFrame:
    """``rows`` ready for the existing ``table``: checked, its new columns added, aligned to it."""
    change = target_change(spark, table, rows.schema, evolution=evolution)
    if change is None:  # dropped since it was seen: the write creates it
        return rows
    evolve_target(spark, table, change)
    return aligned(rows, read_table(spark, table).schema)


def txn_app_id(pipeline: str, table: str) -> str:
    """The Delta ``txnAppId`` for one pipeline writing one table."""
    return f"quarantine:{pipeline}:{table}"


def append_batch(
    rows: DataFrame,
    table: str,
    *,
    pipeline: str,
    batch_id: int | None,
    owner: str | None = None,
    evolution: SchemaEvolution = SchemaEvolution.ADD_COLUMNS,
) -> None:
    """Append a micro-batch: exactly once by ``txnAppId``/``txnVersion``, or plainly.

    Args:
        pipeline: the ``txnAppId``'s writer (the pipeline and its query's id).
        batch_id: the ``txnVersion`` (the micro-batch id); None for a plain append, which
            is exactly once only when the caller has left out the records the table
            holds (a stream's first micro-batch after a start, compared with the tables
            by coordinates; later micro-batches read offsets no table holds: see
            README, Guarantees).
        owner: the pipeline recorded as the writer of the topics of a table this
            append creates (:mod:`quarantine.sinks.ownership`).
        evolution: ``target.schema_evolution``: an existing table takes the rows as
            :func:`target_change` says (new columns added, removed ones NULL).

    Raises:
        SchemaMismatchError: the table cannot take the rows (:func:`target_change`).
    """
    spark = rows.sparkSession
    existed = table_exists(spark, table)
    if existed:
        rows = _fitted(spark, rows, table, evolution)
    writer = rows.write.format("delta").mode("append")
    if not existed:
        writer = _laid_out(writer, rows.schema)
    if batch_id is not None:
        # Delta checks the identifiers against the snapshot's whole state (in Delta 4.1,
        # Snapshot.setTransactions reconstructs it on every such commit)
        writer = writer.option("txnAppId", txn_app_id(pipeline, table)).option("txnVersion", str(batch_id))
    save(writer, table)
    if not existed and owner is not None:
        claim_written_topics(spark, table, owner, rows)


def merge_new_rows(
    spark: SparkSession,
    rows: DataFrame,
    table: str,
    *,
    pipeline: str | None = None,
    evolution: SchemaEvolution = SchemaEvolution.ADD_COLUMNS,
    floors: Floors | None = None,
) -> int | None:
    """Insert rows whose source record is not in the table yet (see the module doc).

    With ``floors`` (every row at or above them), the MERGE reads only the table's rows at or
    above them too: Delta skips the files below.

    Creates the table with a plain append when it does not exist, and then records
    ``pipeline`` as the writer of the topics it wrote (:mod:`quarantine.sinks.ownership`).
    Needs the :data:`SOURCE_COLUMNS`. An existing table takes the rows as
    :func:`target_change` says for ``evolution`` (new columns added, removed ones NULL).

    Returns:
        The rows this call's own commit inserted (Delta's ``num_inserted_rows`` of its
        MERGE): fewer than ``rows`` holds when another writer (a replay, a concurrent
        run) or an earlier run had already written some of the records. None when the
        call created the table (every row was appended).

    Raises:
        SchemaMismatchError: the table cannot take the rows (:func:`target_change`).
    """
    if not table_exists(spark, table):
        save(_laid_out(rows.write.format("delta").mode("append"), rows.schema), table)
        if pipeline is not None:
            claim_written_topics(spark, table, pipeline, rows)
        return None
    rows = _fitted(spark, rows, table, evolution)
    view = f"_quarantine_merge_{uuid.uuid4().hex}"
    rows.createOrReplaceTempView(view)
    bounded = "" if floors is None else " AND " + floors.sql("t", TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET)
    try:
        out = spark.sql(
            f"MERGE INTO {table_ref(table)} AS t USING {view} AS s ON {_SAME_RECORD}{bounded} "
            "WHEN NOT MATCHED THEN INSERT *"
        ).collect()
    finally:
        spark.catalog.dropTempView(view)
    return int(out[0]["num_inserted_rows"]) if out and "num_inserted_rows" in out[0] else None


#: Delta's default count of a table's leading leaf columns it keeps statistics of
#: (``delta.dataSkippingNumIndexedCols``).
DELTA_INDEXED_COLUMNS = 32
#: The property a new target gets when its coordinates lie past them.
INDEXED_COLUMNS_PROPERTY = "delta.dataSkippingNumIndexedCols"


def layout_properties(schema: StructType) -> dict[str, str]:
    """The table properties a new target of ``schema`` is created with, so that Delta keeps each
    file's smallest and largest source coordinate: a batch of what is new is compared with, and
    MERGEd into, only the files at or above its offsets (:class:`quarantine.identity.Floors`), and
    Delta skips the others by these statistics.

    Delta keeps statistics of a table's first :data:`DELTA_INDEXED_COLUMNS` leaf columns (a
    struct's fields counted one by one), and the coordinates follow the record's fields: a
    target whose record has more keeps statistics of every column (``-1``). None are needed
    (an empty dict) when the coordinates lie within them, or the target does not keep them.
    """
    position = 0
    for field in schema.fields:
        position += _leaves(field.dataType)
        if field.name in (TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET) and position > DELTA_INDEXED_COLUMNS:
            return {INDEXED_COLUMNS_PROPERTY: "-1"}
    return {}


def _leaves(dtype: DataType) -> int:
    """The leaf columns Delta counts for a column of ``dtype`` (a struct's fields one by one)."""
    if isinstance(dtype, StructType):
        return sum(_leaves(f.dataType) for f in dtype.fields) or 1
    return 1


def _laid_out(writer: DataFrameWriter, schema: StructType) -> DataFrameWriter:
    """``writer``, creating the target, with :func:`layout_properties` (Delta takes a ``delta.``
    option of the write that creates a table as its table property)."""
    for key, value in layout_properties(schema).items():
        writer = writer.option(key, value)
    return writer


#: The insert-only MERGE's condition: the same source record (see the module doc).
_SAME_RECORD = (
    "t._source_topic = s._source_topic AND t._source_partition = s._source_partition "
    "AND t._source_offset = s._source_offset AND CASE "
    f"WHEN t.{TARGET_FINGERPRINT} IS NOT NULL AND s.{TARGET_FINGERPRINT} IS NOT NULL "
    f"THEN t.{TARGET_FINGERPRINT} = s.{TARGET_FINGERPRINT} "
    f"WHEN t.{TARGET_FINGERPRINT} IS NULL AND s.{TARGET_FINGERPRINT} IS NOT NULL "
    "THEN t._source_timestamp <=> s._source_timestamp ELSE TRUE END"
)


def highest_offsets(spark: SparkSession, table: str) -> dict[tuple[str, int], int]:
    """The target's highest ``_source_offset`` per topic-partition (one aggregate job; empty for
    no table, or one without the source columns)."""
    if not table_exists(spark, table):
        return {}
    rows = read_table(spark, table)
    if not {TARGET_TOPIC, TARGET_PARTITION, TARGET_OFFSET} <= set(rows.columns):
        return {}
    found = (
        rows.where(F.col(TARGET_TOPIC).isNotNull() & F.col(TARGET_PARTITION).isNotNull())
        .groupBy(TARGET_TOPIC, TARGET_PARTITION)
        .agg(F.max(TARGET_OFFSET).alias(OFFSET))
        .collect()
    )
    return {(r[0], int(r[1])): int(r[OFFSET]) for r in found if r[OFFSET] is not None}
