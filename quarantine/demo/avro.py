"""The Avro demo: order events in the schema-registry wire format, with Avro's poison pills.

``quarantine init-demo --format avro`` writes a Kafka-shaped Delta source of order
events encoded by Spark's ``to_avro`` under two writer schema versions (id 1, and id 2
which adds ``channel`` with a default), the writer schemas as ``schemas/<id>.avsc``, the
reader schema (v2) and a config whose ``avro`` stage decodes them and whose ``checks``
stage validates them. Generated with Spark expressions, deterministic for a ``seed``.

Poison kinds (one sixth of the poison share each):

| kind | what is wrong | error class |
|---|---|---|
| json_on_avro_topic | a JSON text, no wire-format header | BadMagicByte |
| unknown_schema_id | framed with id 9, which no schema has | UnknownSchemaId |
| undecodable | the header, then bytes that are not Avro | UndecodableAvro |
| incompatible_writer | id 3, whose ``amount`` is a string the reader cannot read | IncompatibleReaderSchema |
| null_value | NULL value (a tombstone) | NullInput |
| negative_amount | a fine record, ``amount`` < 0 | range (checks) |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.demo.orders import kafka_records, write_framed_demo

__all__ = ["AVRO_DEMO_CONFIG", "POISON_KINDS", "READER", "WRITERS", "avro_orders_source", "write_avro_demo"]

#: The config file :func:`write_avro_demo` writes.
AVRO_DEMO_CONFIG = "orders_avro_demo.yml"

_FIELDS: list[dict[str, Any]] = [
    {"name": "order_id", "type": "string"},
    {"name": "customer_email", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "currency", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]
_V2 = [*_FIELDS, {"name": "channel", "type": "string", "default": "web"}]
_V3 = [{**f, "type": "string"} if f["name"] == "amount" else f for f in _FIELDS]

#: Writer schemas by id: v1, v2 (adds ``channel``), and v3 (``amount`` a string: unreadable as v2).
WRITERS: dict[int, dict[str, Any]] = {
    sid: {"type": "record", "name": "Order", "namespace": "demo.orders", "fields": fields}
    for sid, fields in ((1, _FIELDS), (2, _V2), (3, _V3))
}
#: The reader schema: v2.
READER: dict[str, Any] = WRITERS[2]

POISON_KINDS: tuple[str, ...] = (
    "json_on_avro_topic", "unknown_schema_id", "undecodable", "incompatible_writer", "null_value",
    "negative_amount",
)


def _header(schema_id: int) -> Column:
    return F.lit(bytes([0, 0, 0, 0, schema_id]))


def avro_orders_source(
    spark: SparkSession, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7, partitions: int = 3
) -> DataFrame:
    """A Kafka-shaped DataFrame of wire-format Avro order events, ``poison_rate`` of them poison.

    Columns and types are exactly :data:`~quarantine.schema.KAFKA_SOURCE_SCHEMA`; even
    records are written with schema 1, odd ones with schema 2.
    """
    from pyspark.sql.avro.functions import to_avro

    i = F.col("id")
    poison = F.rand(seed) < F.lit(poison_rate)
    kind = F.floor(F.rand(seed + 1) * len(POISON_KINDS)).cast("int")
    amount = F.round(F.rand(seed + 2) * 500 + 1, 2)
    base = {
        "order_id": F.format_string("ord-%06d", i),
        "customer_email": F.format_string("customer%d@example.com", i % 5000),
        "amount": F.when(poison & (kind == 5), -amount).otherwise(amount),
        "currency": F.element_at(F.array(*[F.lit(c) for c in ("EUR", "USD", "GBP", "EUR")]), (i % 4 + 1).cast("int")),
        "quantity": (i % 7 + 1).cast("int"),
        "created_at": F.timestamp_seconds(F.lit(1_767_225_600) + i),
    }

    def encoded(sid: int) -> Column:
        fields = {**base, "channel": F.lit("app")} if sid == 2 else dict(base)
        if sid == 3:
            fields["amount"] = fields["amount"].cast("string")
        return F.concat(_header(sid), to_avro(F.struct(*[v.alias(k) for k, v in fields.items()]),
                                              json.dumps(WRITERS[sid])))

    value = (
        F.when(~poison | (kind == 5), F.when(i % 2 == 0, encoded(1)).otherwise(encoded(2)))
        .when(kind == 0, F.encode(F.to_json(F.struct(*[v.alias(k) for k, v in base.items()])), "UTF-8"))
        .when(kind == 1, F.concat(_header(9), F.substring(encoded(1), 6, 1_000_000)))
        .when(kind == 2, F.concat(_header(1), F.unhex(F.lit("FFFFFFFF0A"))))
        .when(kind == 3, encoded(3))
        .otherwise(F.lit(None).cast("binary"))
    )
    return kafka_records(spark.range(records), value, "orders-avro", partitions)


def write_avro_demo(
    spark: SparkSession, out: str | Path, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7
) -> Path:
    """Write the Avro demo into ``out``: the source (Delta), the schemas and the config; return the config's path.

    Every path in the config is absolute, so ``quarantine run --conf OUT/orders_avro_demo.yml``
    runs from any working directory. Files already there are overwritten.
    """
    root = Path(out).resolve()
    schemas = root / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    for sid in (1, 2, 3):
        (schemas / f"{sid}.avsc").write_text(json.dumps(WRITERS[sid], indent=2), encoding="utf-8")
    (root / "order.avsc").write_text(json.dumps(READER, indent=2), encoding="utf-8")
    return write_framed_demo(
        root, avro_orders_source(spark, records, poison_rate=poison_rate, seed=seed), AVRO_DEMO_CONFIG,
        {"type": "avro", "options": {"schemas": str(schemas), "reader_schema": str(root / "order.avsc")}},
        "--format avro",
    )
