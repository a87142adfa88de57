"""avro: wire-format and plain Avro decoded as the reader schema; every poison kind quarantined.

Values are encoded by Spark's own ``to_avro`` (the Avro Java library) under each writer
schema, then framed as the schema-registry wire format by hand (0x00, 4-byte id).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import load_config
from quarantine.errors import ConfigError
from quarantine.pipeline import Pipeline
from quarantine.stages import build_stages
from quarantine.stages.avro import AvroDecode
from tests.helpers import kafka_df

W1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}]}
# v2 adds an optional note
W2 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"},
                 {"name": "note", "type": ["null", "string"], "default": None}]}
# v3 changed id's type: no reader with a string id can read it
W3 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "int"}, {"name": "amount", "type": "int"}]}
# the reader: amount promoted to long, a currency the writers never had (default EUR), no note
READER = {"type": "record", "name": "Order", "namespace": "shop",
          "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"},
                     {"name": "currency", "type": "string", "default": "EUR"}]}


def _avro(spark: Any, rows: list[tuple[Any, ...]], ddl: str, schema: dict[str, Any]) -> list[bytes]:
    from pyspark.sql.avro.functions import to_avro

    df = spark.createDataFrame(rows, ddl)
    return [bytes(r[0]) for r in df.select(to_avro(F.struct(*df.columns), json.dumps(schema))).collect()]


def _framed(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">BI", 0, schema_id) + payload


def _stage(**kw: Any) -> AvroDecode:
    writers = ((1, json.dumps(W1)), (2, json.dumps(W2)), (3, json.dumps(W3)))
    return AvroDecode("order", writers=writers, reader=json.dumps(READER), source="schemas/", **kw)


def _run(spark: Any, values: list[bytes | None], stage: AvroDecode) -> list[Any]:
    out = apply_stages(kafka_df(spark, values), [stage])
    return [r[stage.name] for r in out.orderBy("offset").collect()]


def test_each_writer_version_is_read_as_the_reader_schema(spark: Any) -> None:
    (v1,) = _avro(spark, [("o-1", 12)], "id string, amount int", W1)
    (v2,) = _avro(spark, [("o-2", 7, "gift")], "id string, amount int, note string", W2)
    rows = _run(spark, [_framed(1, v1), _framed(2, v2)], _stage())
    assert [r.error for r in rows] == [None, None]
    assert [r.result.asDict() for r in rows] == [
        {"id": "o-1", "amount": 12, "currency": "EUR"},
        {"id": "o-2", "amount": 7, "currency": "EUR"},
    ]


def test_every_poison_kind_gets_its_own_class_and_a_message_naming_the_schema_id(spark: Any) -> None:
    (good,) = _avro(spark, [("o-1", 12)], "id string, amount int", W1)
    (v3,) = _avro(spark, [(5, 1)], "id int, amount int", W3)
    values: list[bytes | None] = [
        None,
        b'{"id": "o-1", "amount": 12}',  # JSON on an Avro topic
        b"\x00\x00",  # shorter than the header
        _framed(99, good),  # an id no schema has
        _framed(1, b"\xff\xff\xff\xff"),  # not Avro under schema 1
        _framed(1, good + b"\x07\x07"),  # a record, then bytes that belong to none
        _framed(1, good[:-1]),  # cut short
        _framed(3, v3),  # a fine record the reader cannot read
    ]
    rows = _run(spark, values, _stage())
    assert all(r.result is None for r in rows)
    classes = [r.error.error_class for r in rows]
    assert classes == ["NullInput", "BadMagicByte", "BadMagicByte", "UnknownSchemaId", "UndecodableAvro",
                       "UndecodableAvro", "UndecodableAvro", "IncompatibleReaderSchema"]
    messages = [r.error.message for r in rows]
    assert messages[0] == "column 'value' is NULL; expected Avro bytes"
    assert messages[1] == (
        "column 'value' is not in the schema-registry wire format: expected the magic byte 0x00 and a "
        f"4-byte schema id, found 0x{values[1][:5].hex().upper()} (27 bytes)"  # type: ignore[index]
    )
    assert messages[2].endswith("found 0x0000 (2 bytes)")
    assert messages[3] == "schema id 99: no writer schema for it in schemas/ (ids: 1, 2, 3)"
    assert messages[4] == "schema id 1: 4 bytes do not decode as the writer schema shop.Order (starting 0xFFFFFFFF)"
    assert messages[5].startswith(f"schema id 1: {len(good) + 2} bytes do not decode")
    assert messages[7].startswith("schema id 3: its records cannot be read as the reader schema shop.Order")
    assert {r.error.kind for r in rows} == {"deserialize"}


def test_a_null_value_passes_when_nullable(spark: Any) -> None:
    (row,) = _run(spark, [None], _stage(nullable=True))
    assert row.error is None and row.result is None


def test_plain_avro_of_optional_fields_all_null_passes_and_garbage_does_not(spark: Any) -> None:
    """A struct of NULLs is what Spark's PERMISSIVE mode gives for bad bytes, and also what a
    record of optional fields may be: the envelope's ``ok`` tells them apart."""
    optional = {"type": "record", "name": "Maybe", "fields": [{"name": "a", "type": ["null", "string"]}]}
    (empty,) = _avro(spark, [(None,)], "a string", optional)
    stage = AvroDecode("m", writers=((0, json.dumps(optional)),), reader=json.dumps(optional),
                       wire_format=False, source="maybe.avsc")
    rows = _run(spark, [empty, b"\x09"], stage)
    assert rows[0].error is None and rows[0].result.asDict() == {"a": None}
    assert rows[1].error.error_class == "UndecodableAvro"
    assert rows[1].error.message == "plain Avro: 1 bytes do not decode as the writer schema Maybe (starting 0x09)"


def test_ids_past_2_31_match_and_a_users_named_types_never_clash_with_the_stages_wrapping(spark: Any) -> None:
    """The header's 4 bytes are an unsigned id (3000000000 is one); a writer schema without a
    namespace, whose named types land in the stage's wrapping record's namespace, may name its
    types as the wrapping's own types are named (here a record and a 5-byte fixed)."""
    user = {"type": "record", "name": "WireHeader",
            "fields": [{"name": "tag", "type": {"type": "fixed", "name": "Header", "size": 5}},
                       {"name": "n", "type": "string"}]}
    (encoded,) = _avro(spark, [(b"\x00\x01\x02\x03\x04", "x")], "tag binary, n string", user)
    big = 3_000_000_000
    stage = AvroDecode("m", writers=((big, json.dumps(user)),), reader=json.dumps(user), source="schemas/")
    rows = _run(spark, [_framed(big, encoded), _framed(1, encoded), _framed(big, encoded[:3])], stage)
    assert rows[0].error is None and rows[0].result.asDict() == {"tag": b"\x00\x01\x02\x03\x04", "n": "x"}
    assert rows[1].error.message == "schema id 1: no writer schema for it in schemas/ (ids: 3000000000)"
    assert rows[2].error.message == (
        "schema id 3000000000: 3 bytes do not decode as the writer schema WireHeader (starting 0x000102)"
    )


def _avro_pipeline(tmp_path: Path, spark: Any, **options: Any) -> dict[str, Any]:
    folder = tmp_path / "schemas"
    folder.mkdir()
    for sid, schema in ((1, W1), (2, W2)):
        (folder / f"{sid}.avsc").write_text(json.dumps(schema))
    (tmp_path / "reader.avsc").write_text(json.dumps(READER))
    return {
        "pipeline": "orders_avro",
        "source": {"format": "delta", "path": str(tmp_path / "source")},
        "target": {"table": str(tmp_path / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "stages": [{"name": "order", "type": "avro",
                    "options": {"schemas": "schemas", "reader_schema": "reader.avsc", **options}}],
    }


def test_a_pipeline_quarantines_avro_poison_byte_exact_and_delivers_the_rest(spark: Any, tmp_path: Path) -> None:
    good = _avro(spark, [(f"o-{i}", i) for i in range(20)], "id string, amount int", W1)
    values = [_framed(1, v) for v in good]
    poison: list[bytes | None] = [b"not avro", _framed(42, good[0]), _framed(2, b"\xff" * 9), None]
    source = kafka_df(spark, values + poison)
    source.write.format("delta").save(str(tmp_path / "source"))
    raw = _avro_pipeline(tmp_path, spark)
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    summary = Pipeline.from_config(load_config(tmp_path / "p.yml"), spark, listeners=[]).run()

    assert (summary.records_ok, summary.records_quarantined) == (20, 4)
    target = spark.read.format("delta").load(str(tmp_path / "target"))
    assert {r.id for r in target.collect()} == {f"o-{i}" for i in range(20)}
    assert {r.currency for r in target.collect()} == {"EUR"}
    quarantined = spark.read.format("delta").load(str(tmp_path / "quarantine")).orderBy("offset").collect()
    assert [q.error_class for q in quarantined] == ["BadMagicByte", "UnknownSchemaId", "UndecodableAvro", "NullInput"]
    assert [None if q.value is None else bytes(q.value) for q in quarantined] == poison  # byte for byte


def test_config_errors_name_the_option(tmp_path: Path, spark: Any) -> None:
    raw = _avro_pipeline(tmp_path, spark)
    raw["stages"][0]["options"]["schemas"] = "no-such-folder"
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"stages\[0\]\.options\.schemas.*folder of <id>\.avsc files"):
        load_config(tmp_path / "p.yml")

    raw["stages"][0]["options"] = {"wire_format": "none"}
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"stages\[0\]\.options\.writer_schema.*got None; expected an \.avsc file"):
        build_stages(load_config(tmp_path / "p.yml").stages)

    (tmp_path / "schemas" / "7.avsc").write_text("{not json")
    raw["stages"][0]["options"] = {"schemas": "schemas", "reader_schema": None}
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"stages\[0\]\.options\.schemas.*7\.avsc is not JSON"):
        build_stages(load_config(tmp_path / "p.yml").stages)


def test_the_readme_example_builds_with_these_schemas(tmp_path: Path) -> None:
    """The manual's ``avro`` stage example (docs/stages.md), as written, loads and builds (paths
    from the config's folder)."""
    from tests.support.readme import block

    raw = _avro_pipeline(tmp_path, None) | yaml.safe_load(block("avro-stage").body)
    (tmp_path / "schemas" / "orders").mkdir()
    for sid, schema in ((1, W1), (2, W2)):
        (tmp_path / "schemas" / "orders" / f"{sid}.avsc").write_text(json.dumps(schema))
    (tmp_path / "order.avsc").write_text(json.dumps(READER))
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    avro, _checks = build_stages(load_config(tmp_path / "p.yml").stages)
    assert isinstance(avro, AvroDecode) and [sid for sid, _ in avro.writers] == [1, 2]
    assert json.loads(avro.reader) == READER and avro.source == str(tmp_path / "schemas" / "orders")
