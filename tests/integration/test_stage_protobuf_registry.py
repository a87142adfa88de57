"""The protobuf stage reading its writer schemas from a registry, in Spark: the ``.proto`` versions
compiled to descriptor sets decode wire-format records in the executors' Arrow UDF, an id not
listed yet is ``UnknownSchemaId``, and the refreshed stage decodes it; then a stream that meets
an id registered after the stage was built, refreshed by the runner for its next micro-batch.

The registry is :class:`tests.support.registry.RegistryStandIn`, a stand-in for the Confluent
Schema Registry REST API (not a registry). Records are serialized with message classes made
from the stage's own descriptor sets; the same shape from a folder of ``.desc`` files is
``tests/integration/test_stage_protobuf.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec, parse_config
from quarantine.pipeline import Pipeline
from quarantine.stages import build_stage
from quarantine.stages.protobuf import ProtobufDecode
from tests.helpers import kafka_df
from tests.support.protobuf import framed, message_class
from tests.support.registry import RegistryStandIn, registry_stand_in

MONEY = """syntax = "proto3";
package shop;
message Money { string currency = 1; double amount = 2; }
"""
ORDER = """syntax = "proto3";
package shop;
import "shop/money.proto";
import "google/protobuf/timestamp.proto";
message Order {
  string order_id = 1;
  shop.Money total = 2;
  google.protobuf.Timestamp created_at = 3;
}
"""
#: v2 adds a note; v3 a channel
ORDER_V2 = ORDER.replace("created_at = 3;", "created_at = 3;\n  string note = 4;")
ORDER_V3 = ORDER_V2.replace("note = 4;", "note = 4;\n  string channel = 5;")
MONEY_REF = {"name": "shop/money.proto", "subject": "shop-money", "version": 1}


@pytest.fixture
def stand_in() -> Iterator[RegistryStandIn]:
    with registry_stand_in() as s:
        assert s.register("shop-money", MONEY, schema_type="PROTOBUF") == 1
        assert s.register("orders-value", ORDER, schema_type="PROTOBUF", references=[MONEY_REF]) == 2
        assert s.register("orders-value", ORDER_V2, schema_type="PROTOBUF", references=[MONEY_REF]) == 3
        yield s


def _record(stage: ProtobufDecode, sid: int, order_id: str, **fields: Any) -> bytes:
    cls = message_class(dict(stage.sets)[sid], "shop.Order")
    message = cls(order_id=order_id, **fields)
    message.total.currency, message.total.amount = "EUR", 2.5
    return framed(sid, message.SerializeToString())


def test_registered_versions_decode_an_unknown_id_is_quarantined_and_the_refreshed_stage_decodes_it(
    spark: Any, stand_in: RegistryStandIn
) -> None:
    stage = build_stage(StageSpec("order", "protobuf", None, {"schemas": {"url": stand_in.url,
                                                                          "subject": "orders-value"}}, 0))
    assert isinstance(stage, ProtobufDecode) and [sid for sid, _ in stage.sets] == [2, 3]
    assert stage.result_type.fieldNames() == ["order_id", "total", "created_at", "note"]  # the latest version
    stand_in.register("orders-value", ORDER_V3, schema_type="PROTOBUF", references=[MONEY_REF])  # id 4, later
    values: list[bytes | None] = [_record(stage, 2, "o-1"), _record(stage, 3, "o-2", note="gift")]
    df = kafka_df(spark, values)

    rows = [r.order for r in apply_stages(df, [stage]).orderBy("offset").collect()]
    assert [(r.result.order_id, r.result.total.currency, r.result.note) for r in rows] == [
        ("o-1", "EUR", ""), ("o-2", "EUR", "gift")]

    fresh = stage.refreshed()
    assert fresh is not None and [sid for sid, _ in fresh.sets] == [2, 3, 4]
    third = _record(fresh, 4, "o-3", note="n", channel="app")
    out = [r.order for r in apply_stages(kafka_df(spark, [third]), [stage]).collect()]
    assert out[0].result is None and out[0].error.error_class == "UnknownSchemaId"
    assert out[0].error.message.startswith(f"schema id 4: no writer schema for it in subject orders-value at "
                                           f"{stand_in.url} (ids: 2, 3)")
    out = [r.order for r in apply_stages(kafka_df(spark, [third]), [fresh]).collect()]
    assert out[0].error is None and (out[0].result.order_id, out[0].result.note) == ("o-3", "n")  # read as v2


def test_a_stream_refreshes_the_stage_after_an_unknown_id_and_decodes_it_from_the_next_micro_batch(
    spark: Any, tmp_path: Path, stand_in: RegistryStandIn
) -> None:
    raw = {
        "pipeline": "orders_protobuf_registry",
        "source": {"format": "delta", "path": str(tmp_path / "source"), "streaming": True,
                   "options": {"maxFilesPerTrigger": "1"}},
        "target": {"table": str(tmp_path / "target"), "checkpoint": str(tmp_path / "checkpoint")},
        "trigger": "available_now",
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "stages": [{"name": "order", "type": "protobuf", "options": {
            "schemas": {"url": stand_in.url, "subject": "orders-value"}}}],
    }
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])  # lists ids 2 and 3
    stand_in.register("orders-value", ORDER_V3, schema_type="PROTOBUF", references=[MONEY_REF])  # id 4
    built = pipe.stages[0]
    assert isinstance(built, ProtobufDecode)
    fresh = built.refreshed()
    assert fresh is not None  # only to serialize id 4's records here; the pipeline's stage is not changed
    batches = [[_record(built, 2, "a"), _record(fresh, 4, "b", channel="app")], [_record(fresh, 4, "c")]]
    offset = 0
    for values in batches:
        df = kafka_df(spark, values).withColumn("offset", F.col("offset") + offset).coalesce(1)
        df.write.format("delta").mode("append").save(str(tmp_path / "source"))
        offset += len(values)
    stand_in.requests.clear()

    summary = pipe.run()
    assert [(b.records_in, b.records_quarantined) for b in summary.batches] == [(2, 1), (1, 0)]
    assert [b.stale_stages for b in summary.batches] == [("order",), ()]
    assert [r.path for r in stand_in.requests] == [  # once, after the first batch: the list, version 3, its import
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/3", "/subjects/shop-money/versions/1",
    ]
    target = spark.read.format("delta").load(str(tmp_path / "target"))
    assert sorted(r.order_id for r in target.collect()) == ["a", "c"]
    quarantine = spark.read.format("delta").load(str(tmp_path / "quarantine")).collect()
    assert [(r.offset, r.error_class) for r in quarantine] == [(1, "UnknownSchemaId")]
