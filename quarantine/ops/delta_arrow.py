"""A Delta table given as a path, read by delta-rs (the ``deltalake`` package) as an Arrow stream, without a JVM.

The JVM-free read path (:mod:`quarantine.ops.duck`) reads the quarantine and metrics
tables here. :func:`read_delta` is delta-rs's own scan of the table's current snapshot
(deletion vectors, column mapping and partition values applied by delta-rs), collected as
an arro3 table that DuckDB reads through the Arrow PyCapsule interface: neither pyarrow nor
numpy is imported on the common path. Two outcomes besides a table:

* the path holds no Delta table: :class:`~quarantine.errors.QuarantineError` saying so, as
  the Spark path says it;
* delta-rs cannot read it — a table feature it does not support (``typeWidening``, which
  the target's schema evolution turns on), or a STRING column whose bytes are not UTF-8 in
  a table delta-rs can only read through its scan: :class:`~quarantine.errors.DeltaRsUnreadableError`,
  whose message is the one line the command prints before Spark answers instead.

A STRING whose bytes are not UTF-8 (a Delta source's header key) is what Spark stores and
Arrow's UTF-8 check refuses. For a table that needs nothing beyond its data files (no
deletion vectors, no column mapping, no partition columns) the files of delta-rs's snapshot
are read again with pyarrow's Parquet reader, which keeps the bytes as they are; that table
comes with each header's key as BINARY (the stored bytes), where the scan gives it as text.

This module imports neither pyspark nor pandas (``pyarrow.table`` and ``pyarrow.dataset``
import pandas; pyarrow's Parquet reader, only for the files above, does not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, cast
from urllib.parse import unquote, urlparse

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS
from quarantine.errors import DeltaRsUnreadableError, QuarantineError

__all__ = ["ArrowStream", "read_delta"]


class ArrowStream(Protocol):
    """Anything that exports an Arrow C stream (the PyCapsule interface): delta-rs's reader, a pyarrow table."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The stream's capsule."""


def _plain(table: DeltaTable) -> bool:
    """Whether ``table``'s rows are exactly its data files' rows: no deletion vectors, column mapping, partitions."""
    config = table.metadata().configuration
    mapped = config.get("delta.columnMapping.mode", "none") != "none"
    deletion_vectors = "deletionVectors" in (table.protocol().reader_features or [])
    return not (mapped or deletion_vectors or table.metadata().partition_columns)


def _files(table: DeltaTable) -> ArrowStream:
    """The rows of ``table``'s data files read by pyarrow's Parquet reader (bytes kept), headers' keys as BINARY.

    Spark writes TIMESTAMP as INT96 by default: read at microseconds, the unit of Delta's
    TIMESTAMP, or a year-9999 instant overflows pyarrow's default nanoseconds.
    """
    import pyarrow as pa  # only here: the common path (the scan) needs neither pyarrow nor numpy
    import pyarrow.parquet as pq

    binary_headers = pa.list_(pa.struct([pa.field(HEADER_KEY, pa.binary()), pa.field(HEADER_VALUE, pa.binary())]))
    schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
    if HEADERS in schema.names:
        schema = schema.set(schema.get_field_index(HEADERS), pa.field(HEADERS, binary_headers))
    parts = []
    for uri in table.file_uris():
        parsed = urlparse(uri)
        path = unquote(parsed.path) if parsed.scheme == "file" else uri
        read = pq.ParquetFile(path, coerce_int96_timestamp_unit="us").read(columns=schema.names)
        if HEADERS in read.column_names:  # string -> binary keeps the bytes; it checks nothing
            at = read.column_names.index(HEADERS)
            read = read.set_column(at, pa.field(HEADERS, binary_headers), read.column(HEADERS).cast(binary_headers))
        parts.append(read.cast(schema))
    return cast("ArrowStream", pa.concat_tables(parts) if parts else schema.empty_table())


def read_delta(path: str, role: str) -> ArrowStream:
    """The current snapshot of the Delta table at ``path``, as an Arrow table (PyCapsule interface).

    Args:
        path: a local or mounted folder (relative to the working directory, ``~`` expanded).
        role: what the table is (``quarantine``, ``metrics``), for the messages.

    Returns:
        Every row, in no particular order. A ``headers`` column's keys are text (delta-rs's
        scan) or BINARY (a table whose text is not all UTF-8, read from its files).

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
        # delta-rs checks the protocol and UTF-8 as the stream is read: read it all now (an arro3
        # table, which DuckDB reads through the PyCapsule interface as often as it is queried)
        return cast("ArrowStream", table.scan().read_all())
    except DeltaError as exc:
        raise DeltaRsUnreadableError(f"delta-rs cannot read the {role} table at {path}: {_line(exc)}") from exc
    except Exception as exc:  # Arrow's UTF-8 check: the Rust reader raises it as a plain Exception
        if "UTF-8" not in str(exc) or not _plain(table):
            raise DeltaRsUnreadableError(f"delta-rs cannot read the {role} table at {path}: {_line(exc)}") from exc
    return _files(table)


def _line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())
