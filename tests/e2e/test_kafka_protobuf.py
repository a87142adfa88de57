"""The protobuf stage from a real broker: wire-format Protobuf records with every poison kind.

Schemas are ``.proto`` text compiled by a real ``protoc`` (``grpcio-tools``), records
serialized by the ``protobuf`` package and framed in the schema-registry wire format
(magic byte, schema id, message indexes) by hand, then produced with ``confluent-kafka``.
No schema registry runs here: the writer schemas come from a folder of ``<id>.desc`` files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.support import KafkaBroker, Record, kafka_pipeline_conf, ledger, produce
from tests.support.protobuf import compile_proto, framed, message_class

V1 = """
syntax = "proto3";
package shop;
message Order { string order_id = 1; double amount = 2; }
message Refund { string order_id = 1; }
"""
V2 = V1.replace("double amount = 2;", "double amount = 2; string currency = 3;")


def test_protobuf_records_from_a_broker_land_once_each_poison_quarantined_byte_exact(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("protobuf-orders", partitions=2)
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    for sid, source in ((1, V1), (2, V2)):
        (schemas / f"{sid}.desc").write_bytes(compile_proto(tmp_path / f"v{sid}", "order", source).read_bytes())
    order1 = message_class(schemas / "1.desc", "shop.Order")
    order2 = message_class(schemas / "2.desc", "shop.Order")
    v1 = [order1(order_id=f"o-{i}", amount=float(i)).SerializeToString() for i in range(300)]
    v2 = [order2(order_id=f"n-{i}", amount=float(i), currency="USD").SerializeToString() for i in range(300)]
    good = [Record(topic, framed(1, v), key=f"k{i}".encode(), partition=i % 2) for i, v in enumerate(v1)]
    good += [Record(topic, framed(2, v), key=None, partition=i % 2, headers=(("trace", b"\x00\xff"),))
             for i, v in enumerate(v2)]
    refund = message_class(schemas / "1.desc", "shop.Refund")(order_id="r-1").SerializeToString()
    poison = {
        "BadMagicByte": Record(topic, b'{"order_id": "o-x", "amount": 1}', key=b"\xff", partition=0),
        "UnknownSchemaId": Record(topic, framed(7, v1[0]), partition=1),
        "UnknownMessageIndex": Record(topic, framed(1, v1[0], (4,)), partition=0),
        "UndecodableProtobuf": Record(topic, framed(2, b"\x0a\x05o\xff"), partition=0, headers=(("h", None),)),
        "IncompatibleReaderSchema": Record(topic, framed(1, refund, (1,)), partition=1),
        "NullInput": Record(topic, None, key=b"tombstone", partition=1),
    }
    produced = produce(kafka_broker.bootstrap, [*good[:250], *poison.values(), *good[250:]])
    raw = kafka_pipeline_conf(kafka_broker.bootstrap, tmp_path, topics=[topic], pipeline="orders_protobuf_kafka",
                              max_offsets_per_trigger=200)
    raw["stages"] = [{"name": "order", "type": "protobuf", "options": {"schemas": str(schemas)}}]
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()

    book = ledger(spark, produced, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()  # every record once; quarantined bytes exact
    assert (summary.records_ok, summary.records_quarantined) == (600, len(poison))
    coords = {(p.topic, p.partition, p.offset): p for p in produced}
    rows = spark.read.format("delta").load(raw["errors"]["deadletterqueue.table.name"]).collect()
    by_class = {r.error_class: r for r in rows}
    assert set(by_class) == set(poison)
    for cls, record in poison.items():
        row = by_class[cls]
        sent = coords[(row.topic, row.partition, row.offset)]
        assert (sent.value, sent.key) == (record.value, record.key) == (row.value, row.key)
    assert by_class["UnknownSchemaId"].message == f"schema id 7: no writer schema for it in {schemas} (ids: 1, 2)"
    assert by_class["UnknownMessageIndex"].message.startswith("schema id 1: message indexes [4] name no message")
    assert by_class["UndecodableProtobuf"].message == (
        "schema id 2: 4 bytes do not decode as the message shop.Order (starting 0x0A056FFF)"
    )
    target = spark.read.format("delta").load(raw["target"]["table"])
    # v1 records read as the highest id's message (v2): currency takes proto3's default
    assert {r.currency for r in target.where("order_id LIKE 'o-%'").collect()} == {""}
    assert {r.currency for r in target.where("order_id LIKE 'n-%'").collect()} == {"USD"}
