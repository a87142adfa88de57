"""A Delta table given as a path, read without a JVM: delta-rs's snapshot, its rows as Arrow.

The JVM-free engine of the reads (:mod:`quarantine.ops.duck`) reads the quarantine and metrics
tables here (:func:`read_delta`), and counts a target's rows from its files' Parquet footers
without reading them (:func:`row_count`, the report's records). delta-rs (the ``deltalake``
package) opens the table and lists its current snapshot's data files. Two ways to its rows:

* a table whose rows are exactly its files' rows (no deletion vectors, column mapping,
  partitions or newer reader features: the tables this library writes) is read file by file
  with pyarrow's Parquet reader. Not delta-rs's scan, which reads Spark's INT96 timestamps
  at nanoseconds, where 9999-12-31 overflows without an error (it came back as 1816-03-29),
  and refuses a STRING whose bytes are not UTF-8 (a Delta source's header key), which
  pyarrow keeps as written: each header's key comes as BINARY, its stored bytes;
* any other table is delta-rs's scan, collected as an arro3 table (the PyCapsule interface
  DuckDB reads), unless its files store INT96.

Besides a table: None when the path holds no Delta table, and
:class:`~quarantine.errors.DeltaRsUnreadableError`
when delta-rs cannot read it (a reader feature it does not support, such as
``typeWidening``, which a target's schema evolution turns on; text it refuses; INT96 in a
table only it can read): its message is the one line the command prints before Spark
answers instead.

This module imports neither pyspark nor pandas (``pyarrow.table`` and ``pyarrow.dataset``
would import pandas; the Parquet reader does not).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import unquote, urlparse

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS
from quarantine.errors import DeltaRsUnreadableError

__all__ = ["ArrowStream", "open_table", "read_columns", "read_delta", "row_count"]


class ArrowStream(Protocol):
    """Anything that exports an Arrow C stream (the PyCapsule interface): delta-rs's reader, a pyarrow table."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The stream's capsule."""


#: Reader features that leave a table's rows exactly its data files' rows, typed as its schema says.
_FILES_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


def _plain(table: DeltaTable) -> bool:
    """Whether ``table``'s rows are exactly its data files' rows (delta-rs's snapshot lists them).

    Not so with deletion vectors, column mapping, partition columns (values kept in the log)
    or any reader feature beyond :data:`_FILES_READER_FEATURES` (``typeWidening``: files of
    an older type). Such a table is delta-rs's to read.
    """
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    mapped = table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    return (protocol.min_reader_version <= 3 and features <= _FILES_READER_FEATURES and not mapped
            and not table.metadata().partition_columns)


def _files(table: DeltaTable) -> ArrowStream:
    """The rows of ``table``'s data files (delta-rs's snapshot) read by pyarrow's Parquet reader; headers' keys BINARY.

    Spark writes TIMESTAMP as INT96 by default: read at microseconds, the unit of Delta's
    TIMESTAMP. delta-rs's own scan reads INT96 at nanoseconds, where 9999-12-31 overflows
    silently (it came back as 1816-03-29); pyarrow's reader keeps text bytes as written too.
    A column the file lacks (added to the table later) reads NULL.
    """
    import pyarrow as pa  # imported when a table is read: pyarrow and numpy are much of a command's start
    import pyarrow.parquet as pq

    binary_headers = pa.list_(pa.struct([pa.field(HEADER_KEY, pa.binary()), pa.field(HEADER_VALUE, pa.binary())]))
    schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
    if HEADERS in schema.names:
        schema = schema.set(schema.get_field_index(HEADERS), pa.field(HEADERS, binary_headers))
    parts = []
    for uri in table.file_uris():
        data = pq.ParquetFile(_local(uri), coerce_int96_timestamp_unit="us")
        read = data.read(columns=[n for n in schema.names if n in data.schema_arrow.names])
        for name in schema.names:  # a column added after the file was written reads NULL, as Delta reads it
            if name not in read.column_names:
                read = read.append_column(pa.field(name, schema.field(name).type), pa.nulls(read.num_rows,
                                                                                          schema.field(name).type))
        read = read.select(schema.names)
        if HEADERS in read.column_names:  # string -> binary keeps the bytes; it checks nothing
            at = read.column_names.index(HEADERS)
            read = read.set_column(at, pa.field(HEADERS, binary_headers), read.column(HEADERS).cast(binary_headers))
        parts.append(read.cast(schema))
    return cast("ArrowStream", pa.concat_tables(parts) if parts else schema.empty_table())


def open_table(path: str, role: str) -> DeltaTable | None:
    """delta-rs's current snapshot of the Delta table at ``path`` (``~`` expanded, relative to the working
    folder); None: no Delta table there.

    Raises:
        DeltaRsUnreadableError: delta-rs cannot open it.
    """
    folder = str(Path(path).expanduser().absolute())
    try:
        return DeltaTable(folder)
    except TableNotFoundError:
        return None
    except DeltaError as exc:
        raise DeltaRsUnreadableError(f"delta-rs cannot open the {role} table at {path}: {_line(exc)}") from exc


def read_columns(table: DeltaTable, columns: Sequence[str]) -> Any:
    """``columns`` of a plain table's current snapshot (a ``pyarrow.Table``), read from its data
    files' column chunks alone; None: the table is not plain (:func:`_plain`) or lacks a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not _plain(table):
        return None
    schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
    if any(c not in schema.names for c in columns):
        return None
    wanted = pa.schema([schema.field(c) for c in columns])
    parts = []
    for uri in table.file_uris():
        data = pq.ParquetFile(_local(uri), coerce_int96_timestamp_unit="us")
        have = [c for c in columns if c in data.schema_arrow.names]
        read = data.read(columns=have)
        for name in columns:  # a column added after the file was written reads NULL
            if name not in read.column_names:
                read = read.append_column(pa.field(name, wanted.field(name).type),
                                          pa.nulls(read.num_rows, wanted.field(name).type))
        parts.append(read.select(list(columns)).cast(wanted))
    return pa.concat_tables(parts) if parts else wanted.empty_table()


def read_delta(path: str, role: str) -> ArrowStream | None:
    """The current snapshot of the Delta table at ``path``, as an Arrow table (PyCapsule interface).

    Args:
        path: a local or mounted folder (relative to the working directory, ``~`` expanded).
        role: what the table is (``quarantine``, ``metrics``), for the messages.

    Returns:
        Every row, in no particular order, or None: no Delta table at ``path``. A ``headers``
        column's keys are BINARY (a table read from its files) or text (delta-rs's scan).

    Raises:
        DeltaRsUnreadableError: delta-rs cannot read it (the message says why, in one line).
    """
    table = open_table(path, role)
    if table is None:
        return None
    if _plain(table):
        return _files(table)
    unreadable = f"delta-rs cannot read the {role} table at {path}"
    try:
        table.scan().read_next_batch()  # delta-rs refuses a table feature it cannot read here
    except StopIteration:  # no rows
        pass
    except Exception as exc:  # DeltaError, or Arrow's UTF-8 check (the Rust reader raises a plain Exception)
        raise DeltaRsUnreadableError(f"{unreadable}: {_line(exc)}") from exc
    if _int96(table):
        raise DeltaRsUnreadableError(
            f"{unreadable}: its TIMESTAMPs are stored as INT96 (Spark's default), which delta-rs reads at "
            "nanoseconds, in a table it must read itself (deletion vectors, column mapping, partitions or a "
            "newer reader feature): an instant after 2262 would come back wrong"
        )
    return cast("ArrowStream", table.scan().read_all())


def row_count(path: str, role: str) -> int | None:
    """How many rows the Delta table at ``path`` holds now, from its data files' Parquet footers (no row
    read); None: no Delta table there.

    Exact while no deletion vector hides rows of a file (the tables this library writes have
    none); otherwise delta-rs's file statistics cannot say it exactly.

    Raises:
        DeltaRsUnreadableError: delta-rs cannot open it, or deletion vectors are on (Spark counts it).
    """
    import pyarrow.parquet as pq  # the Parquet reader, without the pandas pyarrow.dataset would import

    table = open_table(path, role)
    if table is None:
        return None
    if "deletionVectors" in set(table.protocol().reader_features or []):
        raise DeltaRsUnreadableError(f"the {role} table at {path} has deletion vectors: its files' row counts "
                                     "are not its rows")
    return sum(int(pq.read_metadata(_local(uri)).num_rows) for uri in table.file_uris())


def _int96(table: DeltaTable) -> bool:
    """Whether any data file of ``table`` stores a column as Parquet INT96."""
    import pyarrow.parquet as pq  # only for a table delta-rs must scan itself

    for uri in table.file_uris():
        schema = pq.read_metadata(_local(uri)).schema
        if any(schema.column(i).physical_type == "INT96" for i in range(len(schema))):
            return True
    return False


def _local(uri: str) -> str:
    """A data file's URI from delta-rs as a path pyarrow opens."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())
