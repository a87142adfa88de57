"""The Protobuf demo: order events in the schema-registry wire format, with Protobuf's poison pills.

``quarantine init-demo --format protobuf`` writes a Kafka-shaped Delta source of order
events serialized by the ``protobuf`` package under two writer schema versions (id 1, and
id 2 which adds ``channel``), the writer schemas as ``schemas/<id>.desc``
(``FileDescriptorSet``, built in Python: no ``protoc`` needed), the reader schema (v2,
``order.desc``) and a config whose ``protobuf`` stage decodes them and whose ``checks``
stage validates them. Deterministic for a ``seed``; the fields are drawn by Spark
expressions and serialized by a ``pandas_udf`` (:func:`encode_udf`).

Poison kinds (one seventh of the poison share each):

| kind | what is wrong | error class |
|---|---|---|
| json_on_protobuf_topic | a JSON text, no wire-format header | BadMagicByte |
| unknown_schema_id | framed with id 9, which no schema has | UnknownSchemaId |
| unknown_message_index | message indexes [5]: the schema's file declares two messages | UnknownMessageIndex |
| undecodable | the header, then bytes that are not Protobuf | UndecodableProtobuf |
| incompatible_writer | id 3, whose ``amount`` is a string the reader cannot read | IncompatibleReaderSchema |
| null_value | NULL value (a tombstone) | NullInput |
| negative_amount | a fine record, ``amount`` < 0 | range (checks) |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.demo.orders import kafka_records, write_framed_demo

__all__ = [
    "MESSAGE",
    "POISON_KINDS",
    "PROTOBUF_DEMO_CONFIG",
    "descriptor_set",
    "encode_udf",
    "protobuf_orders_source",
    "write_protobuf_demo",
]

#: The config file :func:`write_protobuf_demo` writes.
PROTOBUF_DEMO_CONFIG = "orders_protobuf_demo.yml"
#: The message records are read as.
MESSAGE = "demo.orders.Order"

#: (name, number, FieldDescriptorProto type) of v1's fields; created_at is a google.protobuf.Timestamp.
_FIELDS: list[tuple[str, int, str]] = [
    ("order_id", 1, "TYPE_STRING"), ("customer_email", 2, "TYPE_STRING"), ("amount", 3, "TYPE_DOUBLE"),
    ("currency", 4, "TYPE_STRING"), ("quantity", 5, "TYPE_INT32"), ("created_at", 6, "TYPE_MESSAGE"),
]
_VERSIONS: dict[int, list[tuple[str, int, str]]] = {
    1: _FIELDS,
    2: [*_FIELDS, ("channel", 7, "TYPE_STRING")],  # adds a field: v1 records read as v2 get its default ""
    3: [(n, k, "TYPE_STRING" if n == "amount" else t) for n, k, t in _FIELDS],  # amount a string: unreadable
}

POISON_KINDS: tuple[str, ...] = (
    "json_on_protobuf_topic", "unknown_schema_id", "unknown_message_index", "undecodable", "incompatible_writer",
    "null_value", "negative_amount",
)


def descriptor_set(version: int) -> bytes:
    """The ``FileDescriptorSet`` of writer schema ``version`` (1, 2 or 3), imports first (pure).

    What ``protoc --include_imports --descriptor_set_out`` writes for ``demo/orders.proto``:
    ``package demo.orders; message Order {...} message Refund { string order_id = 1; }``.
    """
    from google.protobuf import descriptor_pb2, timestamp_pb2

    types = descriptor_pb2.FieldDescriptorProto
    fds = descriptor_pb2.FileDescriptorSet()
    timestamp_pb2.DESCRIPTOR.CopyToProto(fds.file.add())
    file = fds.file.add(name="demo/orders.proto", package="demo.orders", syntax="proto3",
                        dependency=["google/protobuf/timestamp.proto"])
    order = file.message_type.add(name="Order")
    for name, number, kind in _VERSIONS[version]:
        field = order.field.add(name=name, number=number, type=getattr(types, kind), label=types.LABEL_OPTIONAL,
                                json_name=_camel(name))
        if kind == "TYPE_MESSAGE":
            field.type_name = ".google.protobuf.Timestamp"
    refund = file.message_type.add(name="Refund")
    refund.field.add(name="order_id", number=1, type=types.TYPE_STRING, label=types.LABEL_OPTIONAL,
                     json_name="orderId")
    data: bytes = fds.SerializeToString()
    return data


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def encode_udf(sets: dict[int, bytes], message: str = MESSAGE) -> Any:
    """A ``pandas_udf(schema_id INT, order STRUCT) -> BINARY``: each order serialized as ``message`` of
    its schema id's set (the message alone, no header). The struct's fields are set by name; a
    ``created_at`` given as microseconds since the epoch (BIGINT) fills the Timestamp; a number
    for a string field is written as its text."""

    def encode(ids: pd.Series, orders: pd.DataFrame) -> pd.Series:
        from google.protobuf import message_factory

        from quarantine.stages.protobuf.descriptors import pool_of

        classes: dict[int, Any] = {}
        out = []
        records = orders.to_dict("records")
        for sid, record in zip(ids.tolist(), records, strict=True):
            cls = classes.get(sid)
            if cls is None:
                pool, _ = pool_of(sets[sid])
                cls = classes[sid] = message_factory.GetMessageClass(pool.FindMessageTypeByName(message))
            msg = cls()
            fields = cls.DESCRIPTOR.fields_by_name
            for name, value in record.items():
                if name not in fields or value is None or value != value:  # absent, NULL or NaN: not written
                    continue
                if name == "created_at":
                    msg.created_at.FromMicroseconds(int(value))
                elif fields[name].type == fields[name].TYPE_STRING:
                    setattr(msg, name, value if isinstance(value, str) else str(value))
                else:
                    setattr(msg, name, value)
            out.append(msg.SerializeToString())
        return pd.Series(out, dtype=object)

    from pyspark.sql.pandas.functions import pandas_udf

    factory: Any = pandas_udf  # its stubs want functionType; the type hints are preferred at runtime
    return factory(encode, "binary")


def _header(schema_id: int, indexes: bytes = b"\x00") -> Column:
    return F.lit(bytes([0, 0, 0, 0, schema_id]) + indexes)


def protobuf_orders_source(
    spark: SparkSession, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7, partitions: int = 3
) -> DataFrame:
    """A Kafka-shaped DataFrame of wire-format Protobuf order events, ``poison_rate`` of them poison.

    Columns and types are exactly :data:`~quarantine.schema.KAFKA_SOURCE_SCHEMA`; even
    records are written with schema 1, odd ones with schema 2.
    """
    i = F.col("id")
    poison = F.rand(seed) < F.lit(poison_rate)
    kind = F.floor(F.rand(seed + 1) * len(POISON_KINDS)).cast("int")
    amount = F.round(F.rand(seed + 2) * 500 + 1, 2)
    order = F.struct(
        F.format_string("ord-%06d", i).alias("order_id"),
        F.format_string("customer%d@example.com", i % 5000).alias("customer_email"),
        F.when(poison & (kind == 6), -amount).otherwise(amount).alias("amount"),
        F.element_at(F.array(*[F.lit(c) for c in ("EUR", "USD", "GBP", "EUR")]), (i % 4 + 1).cast("int"))
        .alias("currency"),
        (i % 7 + 1).cast("int").alias("quantity"),
        ((F.lit(1_767_225_600) + i) * 1_000_000).alias("created_at"),
        F.lit("app").alias("channel"),
    )
    sid = F.when(poison & (kind == 4), 3).when(i % 2 == 0, 1).otherwise(2)
    encoded = encode_udf({v: descriptor_set(v) for v in _VERSIONS})(sid, order)
    value = (
        F.when(~poison | (kind == 6), F.concat(F.when(i % 2 == 0, _header(1)).otherwise(_header(2)), encoded))
        .when(kind == 0, F.encode(F.to_json(order.dropFields("channel")), "UTF-8"))
        .when(kind == 1, F.concat(_header(9), encoded))
        .when(kind == 2, F.concat(_header(1, b"\x02\x0a"), encoded))  # indexes [5]
        .when(kind == 3, F.concat(_header(1), F.unhex(F.lit("FFFFFFFF0A"))))
        .when(kind == 4, F.concat(_header(3), encoded))
        .otherwise(F.lit(None).cast("binary"))
    )
    return kafka_records(spark.range(records), value, "orders-protobuf", partitions)


def write_protobuf_demo(
    spark: SparkSession, out: str | Path, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7
) -> Path:
    """Write the Protobuf demo into ``out``: the source (Delta), the descriptor sets and the config;
    return the config's path.

    Every path in the config is absolute, so ``quarantine run --conf OUT/orders_protobuf_demo.yml``
    runs from any working directory. Files already there are overwritten.
    """
    root = Path(out).resolve()
    schemas = root / "schemas"
    schemas.mkdir(parents=True, exist_ok=True)
    for version in _VERSIONS:
        (schemas / f"{version}.desc").write_bytes(descriptor_set(version))
    (root / "order.desc").write_bytes(descriptor_set(2))
    return write_framed_demo(
        root, protobuf_orders_source(spark, records, poison_rate=poison_rate, seed=seed), PROTOBUF_DEMO_CONFIG,
        {"type": "protobuf", "options": {"schemas": str(schemas), "reader_descriptor": str(root / "order.desc"),
                                         "message": MESSAGE}},
        "--format protobuf",
    )
