"""protobuf: the stage in Spark: wire-format Protobuf decoded in an Arrow UDF, poison quarantined
byte-exact, unknown fields counted as schema drift, options checked when the stage is built.

Schemas are ``.proto`` text compiled by a real ``protoc`` (``grpcio-tools``); every message
of each error class is held exactly by ``tests/unit/test_protobuf_decode.py`` (no Spark).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec, load_config
from quarantine.errors import ConfigError
from quarantine.pipeline import Pipeline
from quarantine.stages import build_stage, build_stages
from quarantine.stages.protobuf import ProtobufDecode
from tests.helpers import kafka_df
from tests.support.protobuf import compile_proto, framed, message_class
from tests.support.readme import block

ORDER = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  string order_id = 1;
  double amount = 2;
  google.protobuf.Timestamp created_at = 3;
  repeated string tags = 4;
}
"""
#: v2 adds a currency
ORDER_V2 = ORDER.replace("repeated string tags = 4;", "repeated string tags = 4;\n  string currency = 5;")


def _schemas(folder: Path, root: Path) -> Path:
    """Compile each version under ``root/protos/v<id>`` and copy its set to ``folder/<id>.desc``."""
    for sid, source in ((1, ORDER), (2, ORDER_V2)):
        desc = compile_proto(root / "protos" / f"v{sid}", "order", source)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{sid}.desc").write_bytes(desc.read_bytes())
    return folder


def _stage(tmp_path: Path, **options: Any) -> Any:
    return build_stage(StageSpec(name="order", type="protobuf",
                                 options={"schemas": str(_schemas(tmp_path / "schemas", tmp_path)), **options}))


def test_the_stage_decodes_each_version_and_gives_poison_its_error_in_spark(spark: Any, tmp_path: Path) -> None:
    stage = _stage(tmp_path)
    assert isinstance(stage, ProtobufDecode) and stage.reader == "shop.Order"
    v1 = message_class(tmp_path / "protos" / "v1" / "order.desc", "shop.Order")
    v2 = message_class(tmp_path / "protos" / "v2" / "order.desc", "shop.Order")
    first = v1(order_id="o-1", amount=1.5, tags=["x"])
    first.created_at.FromSeconds(1_767_225_600)
    values: list[bytes | None] = [framed(1, first.SerializeToString()),
                                  framed(2, v2(order_id="o-2", currency="USD").SerializeToString()),
                                  b"not protobuf", None, framed(7, b"")]
    out = apply_stages(kafka_df(spark, values), [stage]).orderBy("offset").collect()
    rows = [r.order for r in out]
    assert [r.result.asDict(recursive=True) if r.result else r.error.error_class for r in rows] == [
        {"order_id": "o-1", "amount": 1.5, "created_at": rows[0].result.created_at, "tags": ["x"], "currency": ""},
        {"order_id": "o-2", "amount": 0.0, "created_at": None, "tags": [], "currency": "USD"},
        "BadMagicByte", "NullInput", "UnknownSchemaId",
    ]
    assert rows[0].result.created_at.timestamp() == 1_767_225_600
    assert "__q_order_call" not in out[0].asDict()  # the hidden call column is dropped


def test_a_pipeline_quarantines_protobuf_poison_byte_exact_and_counts_unknown_fields(
    spark: Any, tmp_path: Path
) -> None:
    """The docs' stage block (paths relative to the config's folder), then a checks stage."""
    raw = {
        "pipeline": "orders_protobuf",
        "source": {"format": "delta", "path": str(tmp_path / "source")},
        "target": {"table": str(tmp_path / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "metrics": {"table": str(tmp_path / "metrics")},
    } | yaml.safe_load(block("protobuf-stage").body)
    _schemas(tmp_path / "schemas" / "orders", tmp_path)
    v2 = message_class(tmp_path / "protos" / "v2" / "order.desc", "shop.Order")
    good = [framed(2, v2(order_id=f"o-{i}", amount=i + 1).SerializeToString()) for i in range(10)]
    newer = framed(2, v2(order_id="o-new", amount=3).SerializeToString() + b"\x30\x01")  # field 6: unknown
    poison: list[bytes | None] = [b'{"order_id": "x"}', framed(2, b"\xff\xff"), None,
                                  framed(2, v2(order_id="neg", amount=-1).SerializeToString())]
    values = [*good, newer, *poison]
    kafka_df(spark, values).write.format("delta").save(str(tmp_path / "source"))
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    summary = Pipeline.from_config(load_config(tmp_path / "p.yml"), spark, listeners=[]).run()

    assert (summary.records_ok, summary.records_quarantined) == (11, 4)
    quarantine = spark.read.format("delta").load(str(tmp_path / "quarantine")).collect()
    by_offset = {r.offset: r for r in quarantine}
    for offset, value in enumerate(values):
        if offset in by_offset:
            assert by_offset[offset].value == value  # byte-exact (None for the tombstone)
    assert sorted(r.error_class for r in quarantine) == ["BadMagicByte", "NullInput", "UndecodableProtobuf", "range"]
    (batch,) = summary.batches
    assert batch.schema_drift == {"order": {"#6": 1}}
    assert "  schema drift at order: 1 record(s) with undeclared fields: #6 (1)" in summary.render()
    target = spark.read.format("delta").load(str(tmp_path / "target"))
    assert {"order_id", "amount", "created_at", "tags", "currency"} <= set(target.columns)
    assert target.where("order_id = 'o-new'").select("amount").collect()[0][0] == 3.0  # its field 6 dropped


def test_options_are_checked_when_the_stage_is_built(tmp_path: Path) -> None:
    def refused(**options: Any) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            build_stages([StageSpec(name="order", type="protobuf", options=options)])
        return info.value

    schemas = _schemas(tmp_path / "schemas", tmp_path)
    assert refused().key == "stages[0].options.schemas"
    assert refused(wire_format="none").key == "stages[0].options.descriptor"
    e = refused(schemas=str(schemas), message="shop.Ordr")
    assert e.key == "stages[0].options.message" and "declares shop.Order" in str(e)
    proto_text = tmp_path / "text" / "1.desc"
    proto_text.parent.mkdir()
    proto_text.write_text(ORDER)  # .proto source where protoc's output belongs
    e = refused(schemas=str(proto_text.parent))
    assert e.key == "stages[0].options.schemas" and "--descriptor_set_out" in str(e)
    (tmp_path / "empty").mkdir()
    assert "at least one <id>.desc" in str(refused(schemas=str(tmp_path / "empty")))
    plain = build_stage(StageSpec(name="order", type="protobuf", options={
        "wire_format": "none", "descriptor": str(tmp_path / "protos" / "v1" / "order.desc")}))
    assert isinstance(plain, ProtobufDecode) and not plain.wire_format and plain.source.endswith("order.desc")
    older = build_stage(StageSpec(name="order", type="protobuf", options={
        "schemas": str(schemas), "reader_descriptor": str(tmp_path / "protos" / "v1" / "order.desc")}))
    assert isinstance(older, ProtobufDecode) and "currency" not in older.result_type.fieldNames()  # read as v1


def test_a_checks_rule_after_the_stage_is_held_to_the_message_fields(tmp_path: Path) -> None:
    schemas = _schemas(tmp_path / "schemas", tmp_path)
    with pytest.raises(ConfigError, match="amout"):
        build_stages([
            StageSpec(name="order", type="protobuf", options={"schemas": str(schemas)}),
            StageSpec(name="check", type="checks", options={"rules": [{"column": "amout", "check": "not_null"}]}),
        ])
