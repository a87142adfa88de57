"""The source contract: a source is Kafka-shaped, checked on its DataFrame or, without Spark, from its Delta log.

A Delta or Parquet source must be Kafka-shaped: the columns of Spark's Kafka source
with their types (:data:`quarantine.schema.KAFKA_SOURCE_SCHEMA`; more columns are
allowed). A run checks that when it reads the source (:func:`check_kafka_shaped`); :func:`check_source_contract` lets
``quarantine validate`` check it before, without a JVM, for a Delta table named by a
local path that exists: its schema is the ``schemaString`` of the latest ``metaData``
action in ``_delta_log`` — the JSON commits after the latest checkpoint, else that
checkpoint (Parquet, read with pyarrow; or a V2 checkpoint's JSON).

Not checked here, and said so: a catalog table (``source.table``; only Spark can ask the
catalog), a URI other than ``file:`` (``s3://…``, ``dbfs:/…``), a path that does not
exist yet, a Parquet source, and a log whose schema cannot be read (nothing is guessed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from quarantine.config import SourceConfig, SourceFormat
from quarantine.errors import ConfigError, SourceError
from quarantine.schema import KAFKA_SOURCE_SCHEMA, kafka_shape_problems

__all__ = ["CONTRACT", "check_kafka_shaped", "check_source_contract", "delta_schema", "unchecked"]

#: The contract as a message shows it: each Kafka column and its type.
CONTRACT = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in KAFKA_SOURCE_SCHEMA.fields)

_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.[^.]+)*\.(parquet|json)")


def unchecked(source: SourceConfig) -> str | None:
    """Why :func:`check_source_contract` cannot check ``source``'s columns (None when it can,
    or when it is Kafka itself), for ``quarantine validate`` to say so."""
    if source.format is SourceFormat.KAFKA:
        return None
    if source.table is not None:
        return (f"source {source.table} is a catalog table: only Spark can read its schema, so its columns "
                "(docs: Configuration, \"Source contract\") are checked when a run reads it")
    path = _local(source.path or "")
    if source.format is SourceFormat.PARQUET or path is None or not (Path(path) / "_delta_log").is_dir():
        return (f"source {source.path} is not a Delta table on a local path that exists yet: its columns "
                "(docs: Configuration, \"Source contract\") are checked when a run reads it")
    return None


def _local(path: str) -> str | None:
    """``path`` as a local file-system path, or None for another URI (``s3://``, ``dbfs:/``…)."""
    local = path.removeprefix("file://").removeprefix("file:")
    return local if local.startswith("/") else None


def check_source_contract(source: SourceConfig) -> None:
    """Refuse a path-named Delta source whose log says it is not Kafka-shaped.

    Args:
        source: the ``source:`` section; only a ``delta`` source named by a local path
            (absolute after loading, or ``file:``) that exists is checked.

    Raises:
        ConfigError: naming ``source.path``, the contract and what the table's schema lacks.
    """
    if source.format is not SourceFormat.DELTA or source.path is None:
        return  # a catalog table needs Spark to be read; parquet and kafka are checked by the run
    path = _local(source.path)
    if path is None:
        return  # a URI (s3://, dbfs:/…): not readable from here
    schema = delta_schema(Path(path))
    if schema is None:
        return
    problems = kafka_shape_problems(schema)
    if problems:
        raise ConfigError(
            "source.path", source.path,
            f"a Kafka-shaped Delta table (docs: Configuration, \"Source contract\": the columns {CONTRACT}; "
            f"more columns are allowed); the table's log says: {'; '.join(problems)}",
        )


def delta_schema(table: Path) -> StructType | None:
    """The schema of the Delta table at ``table``, from its log; None if it has no readable one."""
    log = table / "_delta_log"
    if not log.is_dir():
        return None
    commits: dict[int, Path] = {}
    checkpoints: dict[int, list[Path]] = {}
    for f in log.iterdir():
        if m := _COMMIT.fullmatch(f.name):
            commits[int(m.group(1))] = f
        elif m := _CHECKPOINT.fullmatch(f.name):
            checkpoints.setdefault(int(m.group(1)), []).append(f)
    last_checkpoint = max(checkpoints, default=-1)
    for version in sorted((v for v in commits if v > last_checkpoint), reverse=True):
        found = _schema_in_json(commits[version])
        if found is not None:
            return _parsed(found)
    for f in checkpoints.get(last_checkpoint, []):
        found = _schema_in_json(f) if f.suffix == ".json" else _schema_in_parquet(f)
        if found is not None:
            return _parsed(found)
    return None


def _schema_in_json(f: Path) -> str | None:
    """The ``schemaString`` of the last ``metaData`` action of a JSON-lines log file."""
    found = None
    try:
        lines = f.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        if '"metaData"' in line:
            try:
                found = json.loads(line)["metaData"]["schemaString"]
            except (ValueError, KeyError, TypeError):
                return None
    return found if isinstance(found, str) else None


def _schema_in_parquet(f: Path) -> str | None:
    """The ``schemaString`` of the ``metaData`` action of a checkpoint Parquet file."""
    # pyarrow's Parquet reader is imported for a log with a checkpoint only, not at every
    # `quarantine validate`; a third-party module: no circle hidden
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(f, columns=["metaData"]).column("metaData").to_pylist()
    except (OSError, KeyError, ValueError):  # pyarrow's errors derive from these
        return None
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("schemaString"), str):
            return str(row["schemaString"])
    return None


def _parsed(schema_string: str) -> StructType | None:
    try:
        return StructType.fromJson(json.loads(schema_string))
    except (ValueError, KeyError, TypeError):
        return None


def check_kafka_shaped(df: DataFrame, where: str) -> None:
    """Raise :class:`~quarantine.errors.SourceError` unless ``df`` has the Kafka source's columns and types."""
    problems = kafka_shape_problems(df.schema)
    if problems:
        raise SourceError(
            f"source {where} is not Kafka-shaped (the columns of Spark's Kafka source): " + "; ".join(problems)
        )
