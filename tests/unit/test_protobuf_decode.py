"""protobuf: the executor side without Spark: the wire format's message indexes, every poison
kind with its exact message, the result struct a message gives, unknown fields, versions.

Schemas are ``.proto`` text compiled by a real ``protoc`` (``grpcio-tools``); records are
serialized by the ``protobuf`` package's generated classes. The batch is run as the
stage's Arrow UDF runs it (:meth:`DecodeBatch.run` on an Arrow batch and a skip mask).
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from quarantine.stages.protobuf import reader_message
from quarantine.stages.protobuf.batch import DecodeBatch
from quarantine.stages.protobuf.descriptors import (
    MessageIndexError,
    decode_message_indexes,
    encode_message_indexes,
)
from tests.support.protobuf import compile_proto, framed, message_class

V1 = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum Status { STATUS_UNKNOWN = 0; PAID = 1; SHIPPED = 2; }
message Order {
  string order_id = 1;
  double amount = 2;
  int32 quantity = 3;
  Status status = 4;
  google.protobuf.Timestamp created_at = 5;
  google.protobuf.StringValue note = 6;
  repeated string tags = 7;
  map<string, int64> counts = 8;
  message Line { string sku = 1; uint64 units = 2; }
  repeated Line lines = 9;
  Line first = 10;
  optional int64 coupon = 11;
}
message Refund { string order_id = 1; }
"""
#: v2 adds a channel (and widens quantity to int64)
V2 = V1.replace("int32 quantity = 3;", "int64 quantity = 3;").replace(
    "optional int64 coupon = 11;", "optional int64 coupon = 11;\n  string channel = 12;")
#: v3 made amount a string: a v2 reader cannot read it
V3 = V1.replace("double amount = 2;", "string amount = 2;")


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[int, bytes]:
    folder = tmp_path_factory.mktemp("protos")
    return {sid: compile_proto(folder / f"v{sid}", "order", src).read_bytes()
            for sid, src in ((1, V1), (2, V3), (3, V2))}


def _batch(sets: dict[int, bytes], *, wire: bool = True, nullable: bool = False,
           message: str | None = None) -> DecodeBatch:
    ids = tuple(sorted(sets.items()))
    reader, rtype = reader_message(ids[-1][1], message, "options.message", "schemas/")
    return DecodeBatch("order", "deserialize", "column 'value'", wire, ids, ids[-1][1], reader, rtype,
                       nullable, "schemas/")


def _run(batch: DecodeBatch, values: list[bytes | None], skip: list[bool] | None = None) -> list[dict[str, Any]]:
    out = batch.run(pa.array(values, pa.binary()), pa.array(skip or [False] * len(values)))
    rows: list[dict[str, Any]] = out.to_pylist()
    return rows


def test_message_indexes_are_zigzag_varints_with_0_for_the_first_message() -> None:
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([1]) == b"\x02\x02"
    assert encode_message_indexes([0, 2]) == b"\x04\x00\x04"
    assert encode_message_indexes([70]) == b"\x02\x8c\x01"
    for indexes in ([0], [1], [0, 2], [3, 1, 0], [70]):
        encoded = encode_message_indexes(indexes) + b"rest"
        assert decode_message_indexes(b"x" + encoded, 1) == (tuple(indexes), len(encoded) - 3)
    assert decode_message_indexes(b"\x02\x00", 0) == ((0,), 2)  # [0] written in full is [0] too
    with pytest.raises(MessageIndexError, match="cut short at byte 2"):
        decode_message_indexes(b"\x04\x00", 0)
    with pytest.raises(MessageIndexError, match="count is -1"):
        decode_message_indexes(b"\x01", 0)
    with pytest.raises(MessageIndexError, match="longer than 5 bytes"):
        decode_message_indexes(b"\xff\xff\xff\xff\xff\xff", 0)


def test_a_message_gives_a_struct_of_its_fields_with_wkts_maps_enums_and_defaults(sets: dict[int, bytes]) -> None:
    order = message_class(sets[3], "shop.Order")
    full = order(order_id="o-1", amount=2.5, quantity=2**40, status=2, tags=["a", "b"], coupon=0, channel="app")
    full.created_at.FromNanoseconds(1_767_225_600_123_456_789)
    full.note.value = ""
    full.counts["z"], full.counts["a"] = 1, 2
    full.lines.add(sku="s-1", units=2**64 - 1)
    full.first.sku = "f"
    odd = order(status=7)  # an open enum's number the schema does not name
    batch = _batch(sets)
    assert batch.result_type.simpleString() == (
        "struct<order_id:string,amount:double,quantity:bigint,status:string,created_at:timestamp,note:string,"
        "tags:array<string>,counts:map<string,bigint>,lines:array<struct<sku:string,units:decimal(20,0)>>,"
        "first:struct<sku:string,units:decimal(20,0)>,coupon:bigint,channel:string>"
    )
    rows = _run(batch, [framed(3, full.SerializeToString()), framed(3, b""), framed(3, odd.SerializeToString())])
    assert [r["error"] for r in rows] == [None] * 3
    assert rows[0]["result"] == {
        "order_id": "o-1", "amount": 2.5, "quantity": 2**40, "status": "SHIPPED",
        "created_at": dt.datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=dt.UTC), "note": "",
        "tags": ["a", "b"], "counts": [("a", 2), ("z", 1)],  # entries in key order
        "lines": [{"sku": "s-1", "units": Decimal(2**64 - 1)}], "first": {"sku": "f", "units": Decimal(0)},
        "coupon": 0, "channel": "app",
    }
    # no presence: the default; presence (a message, a wrapper, optional): NULL; repeated: empty
    assert rows[1]["result"] == {
        "order_id": "", "amount": 0.0, "quantity": 0, "status": "STATUS_UNKNOWN", "created_at": None, "note": None,
        "tags": [], "counts": [], "lines": [], "first": None, "coupon": None, "channel": "",
    }
    assert rows[2]["result"]["status"] == "7"


def test_each_writer_version_is_read_as_the_reader_message(sets: dict[int, bytes]) -> None:
    v1 = message_class(sets[1], "shop.Order")(order_id="o-1", quantity=3)
    v2 = message_class(sets[3], "shop.Order")(order_id="o-2", quantity=4, channel="app")
    rows = _run(_batch(sets), [framed(1, v1.SerializeToString()), framed(3, v2.SerializeToString())])
    assert [(r["result"]["order_id"], r["result"]["quantity"], r["result"]["channel"]) for r in rows] == [
        ("o-1", 3, ""),  # v1 has no channel: the proto3 default; its int32 quantity widens to the reader's int64
        ("o-2", 4, "app"),
    ]


def test_every_poison_kind_gets_its_class_and_exact_message(sets: dict[int, bytes]) -> None:
    good = message_class(sets[1], "shop.Order")(order_id="o-1").SerializeToString()
    stray = good + b"\x07"  # a record, then a byte that starts no field (wire type 7)
    refund = message_class(sets[1], "shop.Refund")(order_id="r-1").SerializeToString()
    bad_utf8 = b"\x0a\x02\xff\xfe"  # order_id: two bytes that are not UTF-8 (proto3 strings must be)
    values: list[bytes | None] = [
        None,
        b'{"order_id": "o-1", "amount": 12}',  # JSON on a Protobuf topic
        b"\x00\x00",  # shorter than the header
        framed(99, good),  # an id no schema has
        framed(1, good, (5,)),  # an index the schema file does not have
        framed(1, good, (0, 7)),  # Order has two nested messages (CountsEntry, Line), not eight
        struct.pack(">BI", 0, 1),  # the header, then nothing: no message-index array
        framed(1, b"\xff\xff\xff\xff"),  # not Protobuf
        framed(1, bad_utf8),
        framed(1, stray),
        framed(2, good),  # schema 2 writes amount as a string: the reader cannot read it
        framed(1, refund, (1,)),  # another message of the schema
    ]
    rows = _run(_batch(sets), values)
    assert all(r["result"] is None for r in rows)
    assert [(r["error"]["error_class"], r["error"]["message"]) for r in rows] == [
        ("NullInput", "column 'value' is NULL; expected Protobuf bytes"),
        ("BadMagicByte", "column 'value' is not in the schema-registry wire format: expected the magic byte 0x00 "
                         "and a 4-byte schema id, found 0x7B226F7264 (33 bytes)"),
        ("BadMagicByte", "column 'value' is not in the schema-registry wire format: expected the magic byte 0x00 "
                         "and a 4-byte schema id, found 0x0000 (2 bytes)"),
        ("UnknownSchemaId", "schema id 99: no writer schema for it in schemas/ (ids: 1, 2, 3)"),
        ("UnknownMessageIndex", "schema id 1: message indexes [5] name no message of order.proto "
                                "(its messages: shop.Order, shop.Refund)"),
        ("UnknownMessageIndex", "schema id 1: message indexes [0, 7] name no message of order.proto "
                                "(its messages: shop.Order, shop.Refund)"),
        ("UndecodableProtobuf", "schema id 1: the message-index array is cut short at byte 5"),
        ("UndecodableProtobuf", "schema id 1: 4 bytes do not decode as the message shop.Order "
                                "(starting 0xFFFFFFFF)"),
        ("UndecodableProtobuf", "schema id 1: 4 bytes do not decode as the message shop.Order "
                                "(starting 0x0A02FFFE)"),
        ("UndecodableProtobuf", f"schema id 1: {len(stray)} bytes do not decode as the message shop.Order "
                                f"(starting 0x{stray[:16].hex().upper()})"),
        ("IncompatibleReaderSchema", "schema id 2: its records (shop.Order) cannot be read as the message "
                                     "shop.Order (field 'amount': written as string, read as double)"),
        ("IncompatibleReaderSchema", "schema id 1: its records (shop.Refund) cannot be read as the message "
                                     "shop.Order (another message)"),
    ]
    assert {r["error"]["kind"] for r in rows} == {"deserialize"}
    assert {r["error"]["stage"] for r in rows} == {"order"}


def test_unknown_fields_are_dropped_from_the_result_and_named_by_number(sets: dict[int, bytes]) -> None:
    """A proto3 record from a producer on a newer schema: fields 20 (varint) and 21 (bytes) are
    not in its writer message. The record decodes; the fields are left out and reported."""
    good = message_class(sets[1], "shop.Order")(order_id="o-1").SerializeToString()
    newer = good + b"\xa0\x01\x05" + b"\xaa\x01\x02hi" + b"\xa0\x01\x06"  # 20: 5, 21: "hi", 20 again
    rows = _run(_batch(sets), [framed(1, newer), framed(1, good)])
    assert [r["error"] for r in rows] == [None, None]
    assert rows[0]["result"] == rows[1]["result"]
    assert [r["unknown_fields"] for r in rows] == [["#20", "#21"], None]


def test_skipped_rows_are_not_decoded_and_a_null_passes_when_nullable(sets: dict[int, bytes]) -> None:
    rows = _run(_batch(sets, nullable=True), [None, b"junk"], skip=[False, True])
    assert rows == [{"result": None, "error": None, "unknown_fields": None}] * 2


def test_plain_protobuf_is_read_as_the_named_message(sets: dict[int, bytes]) -> None:
    refund = message_class(sets[1], "shop.Refund")
    batch = _batch({0: sets[1]}, wire=False, message="shop.Refund")
    rows = _run(batch, [refund(order_id="r-1").SerializeToString(), b"", b"\x0a\x05ab"])
    assert [r["result"] for r in rows[:2]] == [{"order_id": "r-1"}, {"order_id": ""}]
    assert rows[2]["error"]["message"] == (
        "plain Protobuf: 4 bytes do not decode as the message shop.Refund (starting 0x0A056162)"
    )


def test_a_timestamp_spark_cannot_hold_fails_its_record_only(sets: dict[int, bytes]) -> None:
    order = message_class(sets[3], "shop.Order")
    fine, far = order(order_id="a"), order(order_id="b")
    far.created_at.seconds = 2**62  # not a valid Timestamp; it parses, but overflows microseconds
    rows = _run(_batch(sets), [framed(3, fine.SerializeToString()), framed(3, far.SerializeToString())])
    assert rows[0]["result"]["order_id"] == "a"
    assert rows[1]["error"]["error_class"] == "UndecodableProtobuf"
    assert rows[1]["error"]["message"] == (
        "schema id 3: the message shop.Order decodes, but a value does not fit its Spark type (ValueError: "
        "a google.protobuf.Timestamp outside 0001-01-01..9999-12-31 (seconds=4611686018427387904, nanos=0))"
    )


def test_a_recursive_message_has_no_spark_type(tmp_path: Path) -> None:
    from quarantine.errors import ConfigError

    data = compile_proto(tmp_path, "tree", 'syntax = "proto3"; message Node { repeated Node kids = 1; }').read_bytes()
    with pytest.raises(ConfigError, match=r"Node holds itself \(Node → Node\)"):
        reader_message(data, None, "stages[0].options.message", "tree.desc")
    with pytest.raises(ConfigError, match=r"got 'Tree'; expected a message of tree.desc .* declares Node"):
        reader_message(data, "Tree", "stages[0].options.message", "tree.desc")


def test_proto2_required_fields_are_checked_and_oneof_members_are_null_when_not_chosen(tmp_path: Path) -> None:
    """upb's parser does not check proto2 ``required`` fields: the stage does, for messages that have any."""
    source = """
    syntax = "proto2";
    package legacy;
    message Item {
      required string id = 1;
      optional int32 n = 2 [default = 5];
      oneof pick { string a = 3; int64 b = 4; }
    }
    """
    data = compile_proto(tmp_path, "item", source).read_bytes()
    item = message_class(data, "legacy.Item")
    batch = _batch({0: data}, wire=False)
    assert batch.result_type.simpleString() == "struct<id:string,n:int,a:string,b:bigint>"
    rows = _run(batch, [item(id="x", b=3).SerializeToString(), item(n=1).SerializePartialToString()])
    assert rows[0]["result"] == {"id": "x", "n": None, "a": None, "b": 3}  # not set: NULL, not the [default]
    assert (rows[1]["error"]["error_class"], rows[1]["error"]["message"]) == (
        "UndecodableProtobuf", "plain Protobuf: the message legacy.Item lacks required fields: id"
    )


def test_records_framed_alike_are_decoded_alike_whichever_way_they_are_grouped(sets: dict[int, bytes]) -> None:
    """[0] as one byte is grouped by Arrow; [0] written in full goes through the loop; a skipped row
    is in neither."""
    good = message_class(sets[1], "shop.Order")(order_id="o-1").SerializeToString()
    in_full = struct.pack(">BI", 0, 1) + b"\x02\x00" + good
    rows = _run(_batch(sets), [framed(1, good), in_full, framed(1, good)], skip=[False, False, True])
    assert rows[0] == rows[1] and rows[0]["result"]["order_id"] == "o-1"
    assert rows[2] == {"result": None, "error": None, "unknown_fields": None}
