"""The avro stage from a real broker: wire-format Avro records with every poison kind, and a
writer schema registered while a stream runs.

Values are encoded by Spark's ``to_avro`` (the Avro Java library) and framed in the
schema-registry wire format by hand, then produced with ``confluent-kafka``. No registry
product runs here: the first test reads its writer schemas from a folder of ``<id>.avsc``
files; the second from :class:`tests.support.registry.RegistryStandIn`, an in-process
stand-in for the Confluent Schema Registry REST API (not a registry).
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.runners.streaming import run_stream
from quarantine.stages.avro import AvroDecode
from tests.support import KafkaBroker, Record, kafka_pipeline_conf, ledger, produce
from tests.support.registry import registry_stand_in

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


def _rows(spark: Any, path: str) -> list[Any]:
    try:
        return spark.read.format("delta").load(path).collect()
    except Exception:  # not created yet
        return []


def test_a_schema_registered_while_the_stream_runs_is_quarantined_until_the_stage_lists_it_then_decoded(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    """Issue 39: the stage lists the subject when it is built (v1 only). v2 is registered while the
    query runs; the first micro-batch holding v2 records quarantines them as UnknownSchemaId and the
    stage lists the subject again after it, once; later v2 records are decoded; a replay decodes the
    quarantined ones; every record ends in exactly one place."""
    (topic,) = new_topics("avro-registry")
    b = kafka_broker.bootstrap
    subject = f"{topic}-value"  # Kafka Connect's default subject for the topic's values
    (tmp_path / "reader.avsc").write_text(json.dumps(V2))
    raw = kafka_pipeline_conf(b, tmp_path, topics=[topic], pipeline="orders_avro_registry", processing_time="1 second")
    q_path, t_path = raw["errors"]["deadletterqueue.table.name"], raw["target"]["table"]

    def v1(first: int, n: int) -> list[Record]:
        values = _encoded(spark, V1, [(f"o-{i}", float(i)) for i in range(first, first + n)],
                          "order_id string, amount double")
        return [Record(topic, _framed(1, v), key=f"k{first + j}".encode()) for j, v in enumerate(values)]

    def v2(first: int, n: int) -> list[Record]:
        values = _encoded(spark, V2, [(f"n-{i}", float(i), "USD") for i in range(first, first + n)],
                          "order_id string, amount double, currency string")
        return [Record(topic, _framed(2, v), key=f"n{first + j}".encode()) for j, v in enumerate(values)]

    def settled(n: int, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while len(_rows(spark, q_path)) + len(_rows(spark, t_path)) < n:
            assert time.monotonic() < deadline, f"the stream did not settle {n} records"
            assert thread.is_alive(), outcome
            time.sleep(1)

    with registry_stand_in() as stand_in:
        assert stand_in.register(subject, V1) == 1
        raw["stages"] = [{"name": "order", "type": "avro", "options": {
            "schemas": {"url": stand_in.url, "subject": subject}, "reader_schema": str(tmp_path / "reader.avsc")}}]
        pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])  # lists v1
        outcome: dict[str, Any] = {}
        queries: list[Any] = []

        def stream() -> None:
            try:
                outcome["summary"] = run_stream(pipe, max_duration_s=600, on_started=queries.append)
            except BaseException as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=stream, daemon=True)
        thread.start()
        produced = produce(b, v1(0, 20))
        settled(20)
        assert stand_in.register(subject, V2) == 2  # while the query runs
        stand_in.requests.clear()
        produced += produce(b, v2(0, 15))
        settled(35)
        produced += produce(b, v2(15, 15) + v1(20, 5))
        settled(55)
        queries[0].stop()
        thread.join(timeout=120)
        assert not thread.is_alive() and "error" not in outcome, outcome

        # one listing of the subject, after the micro-batch that met id 2, and id 2 read once
        assert [r.path for r in stand_in.requests] == [
            f"/subjects/{subject}/versions", f"/subjects/{subject}/versions/2"]
        stage = pipe.stages[0]
        assert isinstance(stage, AvroDecode) and [sid for sid, _ in stage.writers] == [1, 2]
        batches = outcome["summary"].batches
        assert [bt.stale_stages for bt in batches].count(("order",)) == 1

        quarantined = _rows(spark, q_path)
        assert quarantined and {r.error_class for r in quarantined} == {"UnknownSchemaId"}
        assert {r.message for r in quarantined} == {
            f"schema id 2: no writer schema for it in subject {subject} at {stand_in.url} (ids: 1)"}
        decoded_v2 = [r for r in _rows(spark, t_path) if r.order_id.startswith("n-")]
        # quarantined until the stage listed the subject again, decoded from then on
        assert max(r.offset for r in quarantined) < min(r._source_offset for r in decoded_v2)
        assert len(quarantined) + len(decoded_v2) == 30 and len(quarantined) <= 15
        assert {r.currency for r in decoded_v2} == {"USD"}

        result = replay(Pipeline.from_config(parse_config(raw), spark, listeners=[]))
        assert (result.replayed, result.still_failing) == (len(quarantined), 0)
    book = ledger(spark, produced, target=t_path, quarantine=q_path, pipeline=raw["pipeline"], statuses=["open"])
    assert book.exactly_once and book.in_target == 55 and book.in_quarantine == 0, book.describe()
