"""The ``avro`` stage against plain ``from_avro``: 1M wire-format records, 1 % poison.

The source is Kafka-shaped Delta: order records encoded by Spark's ``to_avro`` under
one writer schema (id 1) and framed in the schema-registry wire format; one record in
100 is poison, in turn JSON on the Avro topic (bad magic byte), an unknown schema id,
and bytes that do not decode.

* **plain** — what a team writes by hand: keep rows with the magic byte and id 1,
  ``from_avro`` the rest of the bytes in PERMISSIVE mode, drop rows that did not
  decode, append the good ones (with their coordinates) to a Delta table. Poison is
  dropped, not kept.
* **quarantine** — a batch run of a pipeline whose one stage is ``avro`` (writer
  schemas from a folder), no listeners: poison to the quarantine table with its raw
  bytes and error, good rows to the target (insert-only MERGE), exactly once.
* **decode only** — the two arms' expressions alone, written to Spark's ``noop``
  sink: the stage's own cost, without the writes.

Goal (issue 14): quarantine / plain <= 1.25x.

    python -m benchmarks.bench_avro [--records N] [--repeat K] [--smoke]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks import Row, bench_dir, bench_spark, drop_dir, fresh_dir, median, standard_main, timed
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline

__all__ = ["GOAL", "WRITER", "main", "run"]

#: quarantine / plain.
GOAL = 1.25

WRITER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"}, {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"}, {"name": "currency", "type": "string"},
        {"name": "quantity", "type": "int"}, {"name": "created_at", "type": "long"},
    ],
}
_HEADER = b"\x00\x00\x00\x00\x01"  # magic byte, schema id 1
_COORDS = ("topic", "partition", "offset")


def avro_source(spark: SparkSession, records: int, poison_rate: float) -> str:
    """Path of the Kafka-shaped Avro source, written once per ``(records, poison_rate)``."""
    from pyspark.sql.avro.functions import to_avro

    name = f"avro-source-{records}-p{round(poison_rate * 1000):04d}"
    path = bench_dir() / "sources" / name
    marker = path.parent / f"{name}.ok"
    if marker.exists():
        return str(path)
    drop_dir(path)
    i = F.col("id")
    order = F.struct(
        F.format_string("ord-%08d", i).alias("order_id"),
        F.format_string("cust-%05d", i % 50_000).alias("customer"),
        ((i % 100_000) / 10.0).alias("amount"),
        F.element_at(F.array(F.lit("EUR"), F.lit("USD"), F.lit("GBP")), (i % 3 + 1).cast("int")).alias("currency"),
        (i % 7 + 1).cast("int").alias("quantity"),
        (F.lit(1_700_000_000_000) + i).alias("created_at"),
    )
    encoded = to_avro(order, json.dumps(WRITER))
    period = round(1 / poison_rate)
    kind = (i / period).cast("long") % 3
    value = (
        F.when(i % period != 0, F.concat(F.lit(_HEADER), encoded))
        .when(kind == 0, F.to_binary(F.to_json(order), F.lit("utf-8")))  # JSON on the Avro topic
        .when(kind == 1, F.concat(F.lit(b"\x00\x00\x00\x00\x63"), encoded))  # schema id 99
        .otherwise(F.concat(F.lit(_HEADER), F.lit(b"\xff\xff\xff\xff")))  # not Avro
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


def _plain_rows(df: DataFrame) -> DataFrame:
    from pyspark.sql.avro.functions import from_avro

    framed: Column = (F.substring("value", 1, 5) == F.lit(_HEADER))
    decoded = from_avro(F.expr("substring(value, 6)"), json.dumps(WRITER), {"mode": "PERMISSIVE"})
    return (
        df.where(framed)
        .select(decoded.alias("r"), *_COORDS)
        .where(F.col("r.order_id").isNotNull())
        .select("r.*", *_COORDS)
    )


def _config(source: str, out: Path, schemas: Path) -> dict[str, object]:
    return {
        "pipeline": "orders_avro_bench",
        "source": {"format": "delta", "path": source},
        "target": {"table": str(out / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(out / "quarantine")},
        "stages": [{"name": "order", "type": "avro", "options": {"schemas": str(schemas)}}],
    }


def run(records: int = 1_000_000, repeat: int = 3, poison_rate: float = 0.01, *, smoke: bool = False) -> list[Row]:
    """Measure the arms, interleaved, ``repeat`` times each; return the result rows (``smoke``: no warm-up)."""
    spark = bench_spark("quarantine-bench-avro")
    source = avro_source(spark, records, poison_rate)
    schemas = bench_dir() / "avro-schemas"
    schemas.mkdir(exist_ok=True)
    (schemas / "1.avsc").write_text(json.dumps(WRITER), encoding="utf-8")

    def plain(out: Path) -> None:
        _plain_rows(spark.read.format("delta").load(source)).write.format("delta").mode("append").save(
            str(out / "target")
        )

    def quarantine(out: Path) -> None:
        Pipeline.from_config(parse_config(_config(source, out, schemas)), spark, listeners=[]).run()

    def plain_noop(out: Path) -> None:
        _plain_rows(spark.read.format("delta").load(source)).write.format("noop").mode("overwrite").save()

    built = Pipeline.from_config(parse_config(_config(source, bench_dir() / "avro-noop", schemas)), spark, listeners=[])

    def stage_noop(out: Path) -> None:  # the pipeline built once, outside the timing: the expressions alone
        built.split_frame(spark.read.format("delta").load(source)).write.format("noop").mode("overwrite").save()

    arms = {"plain": plain, "quarantine": quarantine, "plain_noop": plain_noop, "stage_noop": stage_noop}
    samples: dict[str, list[float]] = {a: [] for a in arms}
    for name, fn in [] if smoke else list(arms.items()):  # warm-up: JIT, the Delta log, the jar's classes
        out = fresh_dir(f"avro-{name}")
        try:
            timed(lambda fn=fn, out=out: fn(out))  # type: ignore[misc]
        finally:
            drop_dir(out)
    names = list(arms)
    for k in range(repeat):
        for name in names if k % 2 == 0 else list(reversed(names)):
            out = fresh_dir(f"avro-{name}")
            try:
                samples[name].append(timed(lambda name=name, out=out: arms[name](out)))  # type: ignore[misc]
            finally:
                drop_dir(out)
            print(f"  [{name}] repeat {k + 1}/{repeat}: {samples[name][-1]:.2f}s", file=sys.stderr, flush=True)
    base, subject = median(samples["plain"]), median(samples["quarantine"])
    nbase, nsubject = median(samples["plain_noop"]), median(samples["stage_noop"])
    pct = f"{poison_rate:.0%}"
    return [
        Row("avro", f"{records:,} wire-format records, {pct} poison: avro stage run vs plain from_avro",
            base, subject, subject / base, f"<= {GOAL:.2f}x", subject / base <= GOAL,
            samples={"plain": samples["plain"], "quarantine": samples["quarantine"]}),
        Row("avro", f"{records:,} records, {pct} poison: decode only (noop sink), stage vs plain",
            nbase, nsubject, nsubject / nbase, "reported", True,
            samples={"plain_noop": samples["plain_noop"], "stage_noop": samples["stage_noop"]}),
    ]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run and print the table (``argv`` None: defaults, as ``benchmarks.run`` calls it)."""
    return standard_main(__doc__, run, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
