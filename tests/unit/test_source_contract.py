"""A path-named Delta source that is not Kafka-shaped fails ``quarantine validate``, read from the
table's own log without a JVM (issue 34, "What validate must know without Spark").

The Delta log is written here by hand, as Delta writes it: JSON commits in ``_delta_log``
(the latest ``metaData`` action's ``schemaString`` is the table's schema) and, past a
checkpoint, a checkpoint Parquet file holding that action.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quarantine.config import SourceConfig, parse_config
from quarantine.errors import ConfigError
from quarantine.pipeline import Pipeline
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.source_contract import check_source_contract, delta_schema, unchecked

NOT_KAFKA = {"type": "struct", "fields": [
    {"name": "value", "type": "string", "nullable": True, "metadata": {}},
    {"name": "topic", "type": "string", "nullable": True, "metadata": {}},
]}


def _metadata(schema: dict[str, Any]) -> dict[str, Any]:
    return {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {}}}


def _commit(table: Path, version: int, *actions: dict[str, Any]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(a) for a in actions]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _table(tmp_path: Path, schema: dict[str, Any]) -> Path:
    table = tmp_path / "source"
    _commit(table, 0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _metadata(schema))
    _commit(table, 1, {"commitInfo": {"operation": "WRITE"}})
    return table


def _config(source: Path | str) -> Any:
    return parse_config({
        "pipeline": "orders",
        "source": {"format": "delta", "path": str(source)},
        "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": "/data/quarantine"},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    })


def test_a_delta_source_that_is_not_kafka_shaped_is_refused_naming_the_columns(tmp_path: Path) -> None:
    table = _table(tmp_path, NOT_KAFKA)
    with pytest.raises(ConfigError) as info:
        Pipeline.check_config(_config(table))  # what quarantine validate runs
    e = info.value
    assert e.key == "source.path" and e.value == str(table)
    message = str(e)
    assert "column value: expected binary, found string" in message
    assert "missing column key binary" in message and "missing column headers" in message
    assert "Source contract" in message


def test_the_latest_schema_is_read_past_a_checkpoint(tmp_path: Path) -> None:
    table = _table(tmp_path, NOT_KAFKA)
    # a checkpoint at version 1 holding the Kafka schema, then a commit with no metaData
    kafka = {"id": "t", "schemaString": KAFKA_SOURCE_SCHEMA.json(), "partitionColumns": []}
    checkpoint = pa.table({"metaData": pa.array([None, kafka])})
    pq.write_table(checkpoint, table / "_delta_log" / f"{1:020d}.checkpoint.parquet")
    (table / "_delta_log" / f"{0:020d}.json").unlink()  # a log cleaned up behind the checkpoint
    _commit(table, 2, {"commitInfo": {"operation": "WRITE"}})
    assert delta_schema(table) == KAFKA_SOURCE_SCHEMA
    Pipeline.check_config(_config(table))
    _commit(table, 3, _metadata(NOT_KAFKA))  # a later schema change wins over the checkpoint
    with pytest.raises(ConfigError):
        Pipeline.check_config(_config(table))


def test_a_kafka_shaped_delta_source_with_more_columns_passes(tmp_path: Path) -> None:
    schema = json.loads(KAFKA_SOURCE_SCHEMA.json())
    schema["fields"].append({"name": "ingested_at", "type": "timestamp", "nullable": True, "metadata": {}})
    Pipeline.check_config(_config(_table(tmp_path, schema)))


def test_a_source_that_does_not_exist_yet_or_is_a_catalog_table_is_not_checked(tmp_path: Path) -> None:
    Pipeline.check_config(_config(tmp_path / "not_written_yet"))
    check_source_contract(SourceConfig.from_mapping({"format": "delta", "table": "main.raw.orders"}))
    check_source_contract(SourceConfig.from_mapping({"format": "delta", "path": "s3://bucket/orders"}))


def test_validate_says_which_sources_it_could_not_check(tmp_path: Path) -> None:
    catalog = SourceConfig.from_mapping({"format": "delta", "table": "main.raw.orders"})
    assert "catalog table" in (unchecked(catalog) or "") and "when a run reads it" in (unchecked(catalog) or "")
    assert "exists yet" in (unchecked(_config(tmp_path / "not_written_yet").source) or "")
    assert unchecked(_config(_table(tmp_path, NOT_KAFKA)).source) is None
