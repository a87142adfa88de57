"""The avro stage reading its writer schemas from a registry, through whole pipelines: a batch
run, a stream that meets an id registered after the stage was built (quarantined, then the
stage is listed again and the next micro-batch decodes it), a registry down while a stream
runs (nothing fails; the records wait in quarantine), and the replays that decode what waited.

The registry is :class:`tests.support.registry.RegistryStandIn`, a stand-in for the
Confluent Schema Registry REST API (not a registry). Values are encoded by Spark's
``to_avro`` and framed in the wire format by hand. The streams here read a Kafka-shaped
Delta table one commit per micro-batch (``maxFilesPerTrigger: 1``); the same stream from a
real broker is ``tests/e2e/test_kafka_avro.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.stages.avro import AvroDecode
from quarantine.stages.schema_sources import wire_encode
from tests.helpers import kafka_df
from tests.support.registry import Failure, RegistryStandIn, registry_stand_in

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"}]}
V2 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"},
                 {"name": "note", "type": ["null", "string"], "default": None}]}
V3 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"},
                 {"name": "channel", "type": "string", "default": "web"}]}
READER = {"type": "record", "name": "Order", "namespace": "shop",
          "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}]}
PASSWORD = "Registry-pw-7731"


@pytest.fixture
def stand_in() -> Iterator[RegistryStandIn]:
    with registry_stand_in(users={"bob": PASSWORD}) as s:
        yield s


def _encoded(spark: Any, schema: dict[str, Any], ids: list[str]) -> list[bytes]:
    from pyspark.sql.avro.functions import to_avro

    fields = {"id": F.col("id"), "amount": F.lit(7).cast("long" if schema is V3 else "int"),
              "note": F.lit("gift"), "channel": F.lit("app")}
    df = spark.createDataFrame([(i,) for i in ids], "id string")
    record = F.struct(*[fields[f["name"]].alias(f["name"]) for f in schema["fields"]])
    return [bytes(r[0]) for r in df.select(to_avro(record, json.dumps(schema))).collect()]


def _config(tmp_path: Path, url: str, **extra: Any) -> dict[str, Any]:
    (tmp_path / "reader.avsc").write_text(json.dumps(READER))
    return {
        "pipeline": "orders_registry",
        "source": {"format": "delta", "path": str(tmp_path / "source")},
        "target": {"table": str(tmp_path / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "stages": [{"name": "order", "type": "avro", "options": {
            "schemas": {"url": url, "subject": "orders-value", "user": "bob", "password": "${env:SR_PASSWORD}"},
            "reader_schema": str(tmp_path / "reader.avsc"),
        }}],
        **extra,
    }


def _pipeline(raw: dict[str, Any], spark: Any) -> Pipeline:
    return Pipeline.from_config(parse_config(raw), spark, listeners=[])


def _table(spark: Any, path: Path) -> list[Any]:
    return spark.read.format("delta").load(str(path)).collect()


def test_a_batch_run_decodes_listed_ids_and_a_replay_decodes_an_id_registered_after(
    spark: Any, tmp_path: Path, stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SR_PASSWORD", PASSWORD)
    stand_in.register("orders-value", V1)
    stand_in.register("orders-value", V2)
    values = [wire_encode(1, v) for v in _encoded(spark, V1, ["a", "b"])]
    values += [wire_encode(2, v) for v in _encoded(spark, V2, ["c", "d"])]
    values += [wire_encode(3, v) for v in _encoded(spark, V3, ["e", "f"])]  # not registered yet
    values.append(wire_encode(1, b"\xff\xff"))  # poison under a known id
    kafka_df(spark, values).write.format("delta").save(str(tmp_path / "source"))
    raw = _config(tmp_path, stand_in.url)

    summary = _pipeline(raw, spark).run()
    assert (summary.records_ok, summary.records_quarantined) == (4, 3)
    rows = {r.offset: r for r in _table(spark, tmp_path / "quarantine")}
    assert {o: r.error_class for o, r in rows.items()} == {4: "UnknownSchemaId", 5: "UnknownSchemaId",
                                                           6: "UndecodableAvro"}
    where = f"subject orders-value at {stand_in.url}"
    assert rows[4].message == f"schema id 3: no writer schema for it in {where} (ids: 1, 2)"
    assert not any(PASSWORD in str(r.asDict()) for r in rows.values())
    assert all(r.authorization is not None for r in stand_in.requests)  # basic auth on every request

    stand_in.register("orders-value", V3)
    result = replay(_pipeline(raw, spark))  # its stage is built anew: the subject lists id 3
    assert (result.replayed, result.still_failing) == (2, 1)
    target = {r.id: r.amount for r in _table(spark, tmp_path / "target")}
    assert target == {"a": 7, "b": 7, "c": 7, "d": 7, "e": 7, "f": 7}
    assert {r.offset: r.status for r in _table(spark, tmp_path / "quarantine")} == {
        4: "replayed", 5: "replayed", 6: "open"}


def _stream_source(spark: Any, tmp_path: Path, batches: list[list[bytes]]) -> None:
    """One Delta commit of one file per micro-batch, offsets running on."""
    offset = 0
    for values in batches:
        df = kafka_df(spark, values).withColumn("offset", F.col("offset") + offset).coalesce(1)
        df.write.format("delta").mode("append").save(str(tmp_path / "source"))
        offset += len(values)


def _stream_config(tmp_path: Path, url: str, **errors: Any) -> dict[str, Any]:
    raw = _config(tmp_path, url)
    raw["source"] = {**raw["source"], "streaming": True, "options": {"maxFilesPerTrigger": "1"}}
    raw["target"]["checkpoint"] = str(tmp_path / "checkpoint")
    raw["trigger"] = "available_now"
    raw["errors"].update(errors)
    return raw


def test_a_stream_lists_the_subject_again_after_a_batch_meets_an_unknown_id_and_decodes_it_from_the_next(
    spark: Any, tmp_path: Path, stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SR_PASSWORD", PASSWORD)
    stand_in.register("orders-value", V1)
    first = [wire_encode(1, v) for v in _encoded(spark, V1, ["a", "b"])]
    first += [wire_encode(2, v) for v in _encoded(spark, V2, ["c", "d"])]
    second = [wire_encode(2, v) for v in _encoded(spark, V2, ["e", "f", "g"])]
    _stream_source(spark, tmp_path, [first, [wire_encode(1, v) for v in _encoded(spark, V1, ["h"])], second])
    raw = _stream_config(tmp_path, stand_in.url)
    pipe = _pipeline(raw, spark)  # lists id 1 only
    stand_in.register("orders-value", V2)  # id 2, while the stream is about to run
    stand_in.requests.clear()

    summary = pipe.run()
    assert [(b.records_in, b.records_quarantined) for b in summary.batches] == [(4, 2), (1, 0), (3, 0)]
    assert [b.stale_stages for b in summary.batches] == [("order",), (), ()]
    assert [r.path for r in stand_in.requests] == [  # once, after the first batch: the list, then version 2
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/2",
    ]
    stage = pipe.stages[0]
    assert isinstance(stage, AvroDecode) and [sid for sid, _ in stage.writers] == [1, 2]
    assert sorted(r.id for r in _table(spark, tmp_path / "target")) == ["a", "b", "e", "f", "g", "h"]
    assert sorted((r.offset, r.error_class) for r in _table(spark, tmp_path / "quarantine")) == [
        (2, "UnknownSchemaId"), (3, "UnknownSchemaId")]

    assert replay(_pipeline(raw, spark)).replayed == 2
    assert sorted(r.id for r in _table(spark, tmp_path / "target")) == ["a", "b", "c", "d", "e", "f", "g", "h"]


def test_a_registry_down_while_a_stream_runs_fails_no_batch_and_a_replay_decodes_what_waited(
    spark: Any, tmp_path: Path, stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SR_PASSWORD", PASSWORD)
    stand_in.register("orders-value", V1)
    batches = [[wire_encode(n, v) for n, v in ((1, _encoded(spark, V1, [f"a{i}"])[0]),
                                                 (2, _encoded(spark, V2, [f"b{i}"])[0]))] for i in range(2)]
    _stream_source(spark, tmp_path, batches)
    raw = _stream_config(tmp_path, stand_in.url, **{"retry.timeout": 300, "retry.delay.max.ms": 20})
    pipe = _pipeline(raw, spark)
    stand_in.register("orders-value", V2)
    stand_in.fail_next = [Failure(500, 50001, "Error in the backend data store")] * 1000
    stand_in.requests.clear()

    summary = pipe.run()  # each batch lists again, is retried, gives up: the batch stands
    assert [(b.records_in, b.records_quarantined) for b in summary.batches] == [(2, 1), (2, 1)]
    listings = [r.path for r in stand_in.requests]
    assert len(listings) >= 4 and set(listings) == {"/subjects/orders-value/versions"}  # retried, each batch
    assert sorted(r.error_class for r in _table(spark, tmp_path / "quarantine")) == ["UnknownSchemaId"] * 2

    stand_in.fail_next = []
    assert replay(_pipeline(raw, spark)).replayed == 2
    assert sorted(r.id for r in _table(spark, tmp_path / "target")) == ["a0", "a1", "b0", "b1"]
