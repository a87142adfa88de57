"""The avro stage from a real broker: wire-format Avro records with every poison kind.

Values are encoded by Spark's ``to_avro`` (the Avro Java library) and framed in the
schema-registry wire format by hand, then produced with ``confluent-kafka``. No schema
registry runs here (issue 14's registry source is not built yet): the writer schemas
come from a folder of ``<id>.avsc`` files, as the stage's offline option reads them.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.support import KafkaBroker, Record, kafka_pipeline_conf, ledger, produce

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "double"}]}
V2 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "order_id", "type": "string"}, {"name": "amount", "type": "double"},
                 {"name": "currency", "type": "string", "default": "EUR"}]}


def _encoded(spark: Any, schema: dict[str, Any], rows: list[tuple[Any, ...]], ddl: str) -> list[bytes]:
    from pyspark.sql.avro.functions import to_avro

    df = spark.createDataFrame(rows, ddl)
    return [bytes(r[0]) for r in df.select(to_avro(F.struct(*df.columns), json.dumps(schema))).collect()]


def _framed(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">BI", 0, schema_id) + payload


def test_avro_records_from_a_broker_land_once_each_poison_quarantined_byte_exact(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("avro-orders", partitions=2)
    v1 = _encoded(spark, V1, [(f"o-{i}", float(i)) for i in range(300)], "order_id string, amount double")
    v2 = _encoded(spark, V2, [(f"n-{i}", float(i), "USD") for i in range(300)],
                  "order_id string, amount double, currency string")
    good = [Record(topic, _framed(1, v), key=f"k{i}".encode(), partition=i % 2) for i, v in enumerate(v1)]
    good += [Record(topic, _framed(2, v), key=None, partition=i % 2, headers=(("trace", b"\x00\xff"),))
             for i, v in enumerate(v2)]
    poison = {
        "BadMagicByte": Record(topic, b'{"order_id": "o-x", "amount": 1}', key=b"\xff", partition=0),
        "UnknownSchemaId": Record(topic, _framed(7, v1[0]), partition=1),
        "UndecodableAvro": Record(topic, _framed(2, b"\x02o\xff"), partition=0, headers=(("h", None),)),
        "NullInput": Record(topic, None, key=b"tombstone", partition=1),
    }
    produced = produce(kafka_broker.bootstrap, [*good[:250], *poison.values(), *good[250:]])
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "1.avsc").write_text(json.dumps(V1))
    (schemas / "2.avsc").write_text(json.dumps(V2))
    raw = kafka_pipeline_conf(kafka_broker.bootstrap, tmp_path, topics=[topic], pipeline="orders_avro_kafka",
                              max_offsets_per_trigger=200)
    raw["stages"] = [{"name": "order", "type": "avro", "options": {"schemas": str(schemas)}}]
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()

    book = ledger(spark, produced, target=raw["target"]["table"],
                  quarantine=raw["errors"]["deadletterqueue.table.name"], pipeline=raw["pipeline"])
    assert book.exactly_once, book.describe()  # every record once; quarantined bytes exact
    assert (summary.records_ok, summary.records_quarantined) == (600, 4)
    coords = {(p.topic, p.partition, p.offset): p.value for p in produced}
    rows = spark.read.format("delta").load(raw["errors"]["deadletterqueue.table.name"]).collect()
    by_class = {r.error_class: r for r in rows}
    assert set(by_class) == set(poison)
    for cls, record in poison.items():
        row = by_class[cls]
        assert coords[(row.topic, row.partition, row.offset)] == record.value
    assert by_class["UnknownSchemaId"].message.startswith("schema id 7: no writer schema for it")
    assert by_class["UndecodableAvro"].message.startswith("schema id 2: 3 bytes do not decode")
    target = spark.read.format("delta").load(raw["target"]["table"])
    # v1 records read as the highest id's schema (v2): currency takes its default
    assert {r.currency for r in target.where("order_id LIKE 'o-%'").collect()} == {"EUR"}
    assert {r.currency for r in target.where("order_id LIKE 'n-%'").collect()} == {"USD"}
