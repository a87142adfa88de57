"""A Delta table given as a path, read by delta-rs (the ``deltalake`` package) into Arrow, without a JVM.

The JVM-free read path (:mod:`quarantine.ops.duck`) reads the quarantine and metrics
tables here. :func:`read_delta` is delta-rs's own scan of the table's current snapshot
(deletion vectors, column mapping and partition values applied by delta-rs), collected into
one Arrow table. Two outcomes besides a table:

* the path holds no Delta table: :class:`~quarantine.errors.QuarantineError` saying so, as
  the Spark path says it;
* delta-rs cannot read it — a table feature it does not support (``typeWidening``, which
  the target's schema evolution turns on), or a STRING column whose bytes are not UTF-8 in
  a table delta-rs can only read through its scan: :class:`~quarantine.errors.DeltaRsUnreadableError`,
  whose message is the one line the command prints before Spark answers instead.

A STRING whose bytes are not UTF-8 (a Delta source's header key) is what Spark stores and
Arrow's UTF-8 check refuses. For a table that needs nothing beyond its data files (no
deletion vectors, no column mapping, no partition columns) the files of delta-rs's snapshot
are read again with pyarrow's Parquet reader, which keeps the bytes as they are. Either way
each header's key is returned as BINARY (its bytes as stored), as :func:`quarantine.ops.triage.select_records`
gives it on Spark.

This module imports neither pyspark nor pandas (``pyarrow.table`` and ``pyarrow.dataset``
import pandas; a record batch reader's ``read_all`` does not).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS
from quarantine.errors import DeltaRsUnreadableError, QuarantineError

__all__ = ["read_delta"]


#: A ``headers`` column with each key as its bytes.
_BINARY_HEADERS = pa.list_(pa.struct([pa.field(HEADER_KEY, pa.binary()), pa.field(HEADER_VALUE, pa.binary())]))


def _headers_as_bytes(table: pa.Table) -> pa.Table:
    """``table`` with each header's key as BINARY (the stored bytes), when it has a ``headers`` column."""
    if HEADERS not in table.column_names:
        return table
    at = table.column_names.index(HEADERS)
    return table.set_column(at, pa.field(HEADERS, _BINARY_HEADERS), table.column(HEADERS).cast(_BINARY_HEADERS))


def _bytes_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with a ``headers`` column's keys as BINARY."""
    if HEADERS not in schema.names:
        return schema
    return schema.set(schema.get_field_index(HEADERS), pa.field(HEADERS, _BINARY_HEADERS))


def _plain(table: DeltaTable) -> bool:
    """Whether ``table``'s rows are exactly its data files' rows: no deletion vectors, column mapping, partitions."""
    config = table.metadata().configuration
    mapped = config.get("delta.columnMapping.mode", "none") != "none"
    deletion_vectors = (table.protocol().reader_features or []).count("deletionVectors") > 0
    return not (mapped or deletion_vectors or table.metadata().partition_columns)


def _files(table: DeltaTable) -> pa.Table:
    """The rows of ``table``'s data files read by pyarrow's Parquet reader (bytes kept), headers' keys as BINARY.

    Spark writes TIMESTAMP as INT96 by default: read at microseconds, the unit of Delta's
    TIMESTAMP, or a year-9999 instant overflows pyarrow's default nanoseconds.
    """
    schema = _bytes_schema(pa.schema(table.schema().to_arrow()))  # type: ignore[arg-type]
    parts = []
    for uri in table.file_uris():
        parsed = urlparse(uri)
        path = unquote(parsed.path) if parsed.scheme == "file" else uri
        read = pq.ParquetFile(path, coerce_int96_timestamp_unit="us").read(columns=schema.names)
        parts.append(_headers_as_bytes(read).cast(schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_delta(path: str, role: str) -> pa.Table:
    """The current snapshot of the Delta table at ``path``, as one Arrow table.

    Args:
        path: a local or mounted folder (relative to the working directory, ``~`` expanded).
        role: what the table is (``quarantine``, ``metrics``), for the messages.

    Returns:
        Every row, in no particular order; a ``headers`` column's keys as BINARY.

    Raises:
        QuarantineError: no Delta table at ``path``.
        DeltaRsUnreadableError: delta-rs cannot read it (the message says why, in one line).
    """
    folder = str(Path(path).expanduser().absolute())
    try:
        table = DeltaTable(folder)
    except TableNotFoundError:
        raise QuarantineError(f"no {role} table at {path} yet; a pipeline run creates it on its first batch") from None
    except DeltaError as exc:
        raise DeltaRsUnreadableError(f"delta-rs cannot open the {role} table at {path}: {_line(exc)}") from exc
    try:
        return _headers_as_bytes(pa.RecordBatchReader.from_stream(table.scan()).read_all())
    except (DeltaError, pa.ArrowInvalid) as exc:
        if "UTF-8" not in str(exc) or not _plain(table):
            raise DeltaRsUnreadableError(f"delta-rs cannot read the {role} table at {path}: {_line(exc)}") from exc
    return _files(table)


def _line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())
