"""The ``protobuf`` stage against the same decode by hand: 1M wire-format records, 1 % poison.

The source is Kafka-shaped Delta: the Protobuf demo's order message
(:mod:`quarantine.demo.protobuf`, six fields, one a ``google.protobuf.Timestamp``)
serialized by the ``protobuf`` package under schema id 1 and framed in the
schema-registry wire format (magic byte, id, message indexes ``[0]``); one record in 100
is poison, in turn JSON on the topic (bad magic byte), an unknown schema id, and bytes
that do not decode.

* **handwritten** — what a team writes without the library: a ``pandas_udf`` that,
  with the same ``protobuf`` package (upb), keeps values with the expected header,
  parses the rest with ``FromString`` in a ``try``, returns the six fields and an ``ok``
  flag; rows that did not decode are dropped by a filter, the good ones appended (with
  their coordinates) to a Delta table. Poison is dropped, not kept.
* **quarantine** — a batch run of a pipeline whose one stage is ``protobuf`` (writer
  schemas from a folder of ``<id>.desc``), no listeners: poison to the quarantine table
  with its raw bytes and error, good rows to the target (insert-only MERGE), exactly once.
* **decode only** — the two arms' expressions alone, written to Spark's ``noop`` sink.

Goal (issue 39): quarantine / handwritten <= 1.25x.

    python -m benchmarks.bench_protobuf [--records N] [--repeat K] [--smoke]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks import Row, bench_dir, bench_spark, drop_dir, fresh_dir, median, standard_main, timed
from quarantine.config import parse_config
from quarantine.demo.protobuf import MESSAGE, descriptor_set, encode_udf
from quarantine.pipeline import Pipeline

__all__ = ["GOAL", "handwritten_udf", "main", "protobuf_source", "run"]

#: quarantine / handwritten.
GOAL = 1.25

_HEADER = b"\x00\x00\x00\x00\x01\x00"  # magic byte, schema id 1, message indexes [0]
_COORDS = ("topic", "partition", "offset")
_FIELDS = "order_id string, customer_email string, amount double, currency string, quantity int, created_at timestamp"


def protobuf_source(spark: SparkSession, records: int, poison_rate: float) -> str:
    """Path of the Kafka-shaped Protobuf source, written once per ``(records, poison_rate)``."""
    name = f"protobuf-source-{records}-p{round(poison_rate * 1000):04d}"
    path = bench_dir() / "sources" / name
    marker = path.parent / f"{name}.ok"
    if marker.exists():
        return str(path)
    drop_dir(path)
    i = F.col("id")
    order = F.struct(
        F.format_string("ord-%08d", i).alias("order_id"),
        F.format_string("customer%05d@example.com", i % 50_000).alias("customer_email"),
        ((i % 100_000) / 10.0).alias("amount"),
        F.element_at(F.array(F.lit("EUR"), F.lit("USD"), F.lit("GBP")), (i % 3 + 1).cast("int")).alias("currency"),
        (i % 7 + 1).cast("int").alias("quantity"),
        ((F.lit(1_700_000_000) + i) * 1_000_000).alias("created_at"),
    )
    encoded = encode_udf({1: descriptor_set(1)})(F.lit(1), order)
    period = round(1 / poison_rate)
    kind = (i / period).cast("long") % 3
    value = (
        F.when(i % period != 0, F.concat(F.lit(_HEADER), encoded))
        .when(kind == 0, F.to_binary(F.to_json(order), F.lit("utf-8")))  # JSON on the Protobuf topic
        .when(kind == 1, F.concat(F.lit(b"\x00\x00\x00\x00\x63\x00"), encoded))  # schema id 99
        .otherwise(F.concat(F.lit(_HEADER), F.lit(b"\xff\xff\xff\xff")))  # not Protobuf
    )
    (
        spark.range(records, numPartitions=max(4, records // 250_000))
        .select(
            F.format_string("cust-%05d", i % 50_000).cast("binary").alias("key"),
            value.alias("value"),
            F.lit("orders").alias("topic"),
            (i % 4).cast("int").alias("partition"),
            (i / 4).cast("long").alias("offset"),
            F.timestamp_millis(F.lit(1_700_000_000_000) + i).alias("timestamp"),
            F.lit(0).alias("timestampType"),
            F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        )
        .write.format("delta").mode("overwrite").save(str(path))
    )
    marker.write_text(f"{records}\n", encoding="utf-8")
    return str(path)


def handwritten_udf(desc: bytes) -> Any:
    """The hand-written decode: a ``pandas_udf(value) -> STRUCT<ok, six fields>`` with the protobuf package."""

    def decode(values: pd.Series) -> pd.DataFrame:
        from google.protobuf import message_factory
        from google.protobuf.message import DecodeError

        from quarantine.stages.protobuf.descriptors import pool_of

        pool, _ = pool_of(desc)
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(MESSAGE))
        parse, empty = cls.FromString, cls()
        msgs = []
        ok = []
        for v in values:
            m = None
            if v is not None and v[:6] == _HEADER:
                try:
                    m = parse(v[6:])
                except DecodeError:
                    m = None
            ok.append(m is not None)
            msgs.append(m if m is not None else empty)
        micros = [m.created_at.seconds * 1_000_000 + m.created_at.nanos // 1_000 for m in msgs]
        return pd.DataFrame({
            "ok": ok,
            "order_id": [m.order_id for m in msgs],
            "customer_email": [m.customer_email for m in msgs],
            "amount": [m.amount for m in msgs],
            "currency": [m.currency for m in msgs],
            "quantity": [m.quantity for m in msgs],
            "created_at": pd.to_datetime(micros, unit="us", utc=True),
        })

    from pyspark.sql.pandas.functions import pandas_udf

    factory: Any = pandas_udf
    return factory(decode, f"ok boolean, {_FIELDS}")


def _handwritten_rows(df: DataFrame, desc: bytes) -> DataFrame:
    decoded = handwritten_udf(desc)(F.col("value"))
    return df.select(decoded.alias("r"), *_COORDS).where("r.ok").select("r.*", *_COORDS).drop("ok")


def _config(source: str, out: Path, schemas: Path) -> dict[str, object]:
    return {
        "pipeline": "orders_protobuf_bench",
        "source": {"format": "delta", "path": source},
        "target": {"table": str(out / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(out / "quarantine")},
        "stages": [{"name": "order", "type": "protobuf", "options": {"schemas": str(schemas)}}],
    }


def run(records: int = 1_000_000, repeat: int = 3, poison_rate: float = 0.01, *, smoke: bool = False) -> list[Row]:
    """Measure the arms, interleaved, ``repeat`` times each; return the result rows (``smoke``: no warm-up)."""
    spark = bench_spark("quarantine-bench-protobuf")
    source = protobuf_source(spark, records, poison_rate)
    desc = descriptor_set(1)
    schemas = bench_dir() / "protobuf-schemas"
    schemas.mkdir(exist_ok=True)
    (schemas / "1.desc").write_bytes(desc)

    def handwritten(out: Path) -> None:
        _handwritten_rows(spark.read.format("delta").load(source), desc).write.format("delta").mode("append").save(
            str(out / "target")
        )

    def quarantine(out: Path) -> None:
        Pipeline.from_config(parse_config(_config(source, out, schemas)), spark, listeners=[]).run()

    def handwritten_noop(out: Path) -> None:
        _handwritten_rows(spark.read.format("delta").load(source), desc).write.format("noop").mode("overwrite").save()

    noop_out = bench_dir() / "protobuf-noop"
    built = Pipeline.from_config(parse_config(_config(source, noop_out, schemas)), spark, listeners=[])

    def stage_noop(out: Path) -> None:  # the pipeline built once, outside the timing: the expressions alone
        built.split_frame(spark.read.format("delta").load(source)).write.format("noop").mode("overwrite").save()

    arms = {"handwritten": handwritten, "quarantine": quarantine, "handwritten_noop": handwritten_noop,
            "stage_noop": stage_noop}
    samples: dict[str, list[float]] = {a: [] for a in arms}
    for name, fn in [] if smoke else list(arms.items()):  # warm-up: JIT, the Delta log, the Python workers
        out = fresh_dir(f"protobuf-{name}")
        try:
            timed(lambda fn=fn, out=out: fn(out))  # type: ignore[misc]
        finally:
            drop_dir(out)
    names = list(arms)
    for k in range(repeat):
        for name in names if k % 2 == 0 else list(reversed(names)):
            out = fresh_dir(f"protobuf-{name}")
            try:
                samples[name].append(timed(lambda name=name, out=out: arms[name](out)))  # type: ignore[misc]
            finally:
                drop_dir(out)
            print(f"  [{name}] repeat {k + 1}/{repeat}: {samples[name][-1]:.2f}s", file=sys.stderr, flush=True)
    base, subject = median(samples["handwritten"]), median(samples["quarantine"])
    nbase, nsubject = median(samples["handwritten_noop"]), median(samples["stage_noop"])
    pct = f"{poison_rate:.0%}"
    return [
        Row("protobuf", f"{records:,} wire-format records, {pct} poison: protobuf stage run vs hand-written "
            "pandas_udf (bad rows dropped)", base, subject, subject / base, f"<= {GOAL:.2f}x", subject / base <= GOAL,
            samples={"handwritten": samples["handwritten"], "quarantine": samples["quarantine"]}),
        Row("protobuf", f"{records:,} records, {pct} poison: decode only (noop sink), stage vs hand-written",
            nbase, nsubject, nsubject / nbase, "reported", True,
            samples={"handwritten_noop": samples["handwritten_noop"], "stage_noop": samples["stage_noop"]}),
    ]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run and print the table (``argv`` None: defaults, as ``benchmarks.run`` calls it)."""
    return standard_main(__doc__, run, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
