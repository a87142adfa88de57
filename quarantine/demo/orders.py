"""A realistic Kafka-shaped sample source: order events with varied poison records.

Generated with Spark expressions (no driver-side rows), so the same function
makes the 10k-record demo and the multi-million-record benchmark sources.
Deterministic for a given ``seed``.

Poison kinds, chosen to hit every stage:

| kind | what is wrong | caught by |
|---|---|---|
| invalid_utf8 | value bytes are not UTF-8 | decode |
| truncated_json | the JSON text is cut off | parse |
| wrong_type | ``amount`` is ``"abc"`` | parse |
| missing_field | no ``order_id`` | parse |
| empty_value | zero bytes | parse |
| null_value | NULL value | decode |
| negative_amount | ``amount`` < 0 | checks |
| bad_currency | ``currency`` not in EUR/USD/GBP | checks |
| bad_timestamp | ``created_at`` is not a date | cast |
| json_array | a JSON array, not an object | parse |
| bad_email | ``customer_email`` has no ``@`` | expectation |
| unknown_status | ``status`` is ``"refunded"`` | expectation |

(Each kind is one twelfth of the poison share.)
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from quarantine.columns import (
    HEADER_KEY,
    HEADER_VALUE,
    HEADERS,
    KEY,
    OFFSET,
    PARTITION,
    TIMESTAMP,
    TIMESTAMP_TYPE,
    TOPIC,
    VALUE,
)
from quarantine.schema import HEADERS_TYPE, KAFKA_SOURCE_SCHEMA

__all__ = [
    "DEMO_CONFIG",
    "ORDER_SCHEMA_DDL",
    "POISON_KINDS",
    "kafka_records",
    "orders_source",
    "write_demo_config",
    "write_demo_source",
    "write_demo_table",
    "write_framed_demo",
]

#: The name of the config file :func:`write_demo_config` writes into its folder.
DEMO_CONFIG = "orders_demo.yml"

#: The JSON payload's declared schema (what the demo config's json stage parses).
ORDER_SCHEMA_DDL = (
    "order_id STRING, customer_email STRING, amount DOUBLE, currency STRING, "
    "quantity INT, sku STRING, status STRING, created_at STRING"
)

POISON_KINDS: tuple[str, ...] = (
    "invalid_utf8", "truncated_json", "wrong_type", "missing_field", "empty_value",
    "null_value", "negative_amount", "bad_currency", "bad_timestamp", "json_array",
    "bad_email", "unknown_status",
)


def _pick(idx: Column, values: list[str]) -> Column:
    return F.element_at(F.array(*[F.lit(v) for v in values]), (idx % len(values)).cast("int") + 1)


def orders_source(
    spark: SparkSession,
    records: int = 10_000,
    *,
    poison_rate: float = 0.04,
    seed: int = 7,
    topic: str = "orders",
    partitions: int = 3,
    slices: int | None = None,
    first: int = 0,
) -> DataFrame:
    """A Kafka-shaped DataFrame of order events, ``poison_rate`` of them poison.

    Columns and types are exactly :data:`~quarantine.schema.KAFKA_SOURCE_SCHEMA`.
    Offsets are consecutive per partition; keys are customer ids; every record
    has a binary ``trace-id`` header and a ``source`` header.

    ``first``: the records are the topic's ``first`` … ``first + records - 1``th (order ids,
    offsets and timestamps follow from it), so the records of ``first=N`` appended to a
    source of ``N`` written with the same ``topic`` and ``partitions`` continue each
    partition's offsets where it ended (the ``growth`` benchmark's day 2).
    """
    ids = spark.range(first, first + records, 1, slices) if slices else spark.range(first, first + records)
    i = F.col("id")
    r = F.rand(seed)
    poison = r < F.lit(poison_rate)
    kind = F.floor(F.rand(seed + 1) * len(POISON_KINDS)).cast("int")
    amount = F.round(F.rand(seed + 2) * 500 + 1, 2)
    currency = _pick(i, ["EUR", "USD", "GBP", "EUR"])
    fields = {
        "order_id": F.format_string("ord-%06d", i),
        "customer_email": F.format_string("customer%d@example.com", i % 5000),
        "amount": amount,
        "currency": currency,
        "quantity": (i % 7 + 1).cast("int"),
        "sku": F.format_string("SKU-%04d", i % 977),
        "status": _pick(i, ["created", "paid", "shipped", "paid"]),
        "created_at": F.date_format(
            F.timestamp_seconds(F.lit(1_767_225_600) + i), "yyyy-MM-dd HH:mm:ss"
        ),
    }

    good = F.to_json(F.struct(*[v.alias(k) for k, v in fields.items()]))
    no_order_id = F.to_json(F.struct(*[v.alias(k) for k, v in fields.items() if k != "order_id"]))
    text = (
        F.when(~poison, good)
        .when(kind == 1, F.substring(good, 1, 25))
        .when(kind == 2, F.regexp_replace(good, r'"amount":[0-9.]+', '"amount":"abc"'))
        .when(kind == 3, no_order_id)
        .when(kind == 6, F.regexp_replace(good, r'"amount":', '"amount":-'))
        .when(kind == 7, F.regexp_replace(good, r'"currency":"[A-Z]+"', '"currency":"XXX"'))
        .when(kind == 8, F.regexp_replace(good, r'"created_at":"[^"]+"', '"created_at":"2026-13-45 25:61:00"'))
        .when(kind == 9, F.concat(F.lit("["), good, F.lit("]")))
        .when(
            kind == 10,
            F.regexp_replace(good, r'"customer_email":"customer([0-9]+)@', '"customer_email":"customer$1 at '),
        )
        .when(kind == 11, F.regexp_replace(good, r'"status":"[a-z]+"', '"status":"refunded"'))
        .otherwise(good)
    )
    value = (
        F.when(poison & (kind == 0), F.concat(F.unhex(F.lit("C328FFFE")), F.encode(good, "UTF-8")))
        .when(poison & (kind == 4), F.unhex(F.lit("")))
        .when(poison & (kind == 5), F.lit(None).cast("binary"))
        .otherwise(F.encode(text, "UTF-8"))
    )
    headers = F.array(
        F.struct(
            F.lit("trace-id").alias(HEADER_KEY),
            F.unhex(F.sha2(i.cast("string"), 256)).substr(1, 16).alias(HEADER_VALUE),
        ),
        F.struct(F.lit("source").alias(HEADER_KEY), F.encode(F.lit("web"), "UTF-8").alias(HEADER_VALUE)),
    )
    return kafka_records(ids, value, topic, partitions, headers)


def kafka_records(
    ids: DataFrame, value: Column, topic: str, partitions: int, headers: Column | None = None
) -> DataFrame:
    """The demos' records: each ``id`` of ``ids`` (a ``spark.range``) a Kafka record of ``value``.

    Keyed by customer, offsets consecutive per partition, a second apart from 2026-01-01, no
    headers unless given; columns and types exactly :data:`~quarantine.schema.KAFKA_SOURCE_SCHEMA`.
    """
    i = F.col("id")
    df = ids.select(
        F.encode(F.format_string("cust-%05d", i % 5000), "UTF-8").alias(KEY),
        value.alias(VALUE),
        F.lit(topic).alias(TOPIC),
        (i % partitions).cast("int").alias(PARTITION),
        F.floor(i / partitions).cast("bigint").alias(OFFSET),
        F.timestamp_seconds(F.lit(1_767_225_600) + i).alias(TIMESTAMP),
        F.lit(0).cast("int").alias(TIMESTAMP_TYPE),
        (F.lit(None).cast(HEADERS_TYPE) if headers is None else headers).alias(HEADERS),
    )
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in KAFKA_SOURCE_SCHEMA.fields])


def _overwrite(source: DataFrame, path: str) -> None:
    source.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def write_demo_source(
    spark: SparkSession, path: str, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7
) -> int:
    """Write :func:`orders_source` as a Delta table at ``path`` (overwriting it); return the record count."""
    _overwrite(orders_source(spark, records, poison_rate=poison_rate, seed=seed), path)
    return records


def write_framed_demo(root: Path, source: DataFrame, config: str, stage: dict[str, Any], flag: str) -> Path:
    """Write a schema-registry-framed demo (``init-demo --format avro`` or ``protobuf``) into ``root``:
    ``source`` as ``root/source`` (Delta), and its config ``root/config``, whose first stage is ``stage``
    (its schemas already in ``root``) and whose second checks the orders; return the config's path.

    Every path in the config is absolute, so it runs from any working directory.
    """
    _overwrite(source, str(root / "source"))
    raw = {
        "pipeline": config.removesuffix(".yml"),
        "source": {"format": "delta", "path": str(root / "source")},
        "target": {"table": str(root / "orders")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(root / "quarantine")},
        "stages": [
            {"name": "order", **stage},
            {"name": "check_order", "type": "checks", "options": {"rules": [
                {"column": "amount", "check": "range", "min": 0, "max": 10_000},
                {"column": "currency", "check": "in_set", "values": ["EUR", "USD", "GBP"]},
            ]}},
        ],
    }
    path = root / config
    header = (
        f"# The quarantine {stage['type'].capitalize()} demo pipeline, written by `quarantine init-demo {flag}`\n"
        f"# with its tables under {root}. Run it: quarantine run --conf {path}\n"
    )
    path.write_text(header + yaml.safe_dump(raw, sort_keys=False, width=100), encoding="utf-8")
    return path


def write_demo_table(
    spark: SparkSession,
    table: str,
    records: int = 10_000,
    *,
    poison_rate: float = 0.04,
    seed: int = 7,
    if_missing: bool = False,
) -> int:
    """Write :func:`orders_source` as the catalog table ``table`` (``catalog.schema.table``).

    The bundle's setup task runs this (``quarantine init-demo --table … --if-missing``)
    so that the batch job has its source on a fresh workspace.

    Args:
        spark: the session.
        table: the table's name; its catalog and schema must exist.
        records: how many order events.
        poison_rate: the fraction of them that are malformed.
        seed: the generator's seed (the same seed writes the same records).
        if_missing: leave the table alone when it exists.

    Returns:
        The number of records written: 0 when ``if_missing`` left an existing table alone.
    """
    if if_missing and spark.catalog.tableExists(table):
        return 0
    orders_source(spark, records, poison_rate=poison_rate, seed=seed).write.format("delta").mode(
        "overwrite"
    ).option("overwriteSchema", "true").saveAsTable(table)
    return records


def write_demo_config(out: str | Path) -> Path:
    """Write the demo pipeline's config and expectation suite into ``out``; return the config's path.

    The config is the repository's ``conf/orders_demo.yml`` (``quarantine/demo/conf/`` links to
    it and its suite, so a wheel holds them) with every table and the suite named relative to ``out``
    (``./source``, ``./orders``, ``./quarantine``, ``./metrics``,
    ``./expectations/orders.json``): a config's relative paths are read from its own folder
    (:func:`quarantine.config.load_config`), so ``quarantine run --conf OUT/orders_demo.yml``
    runs from any working directory, without the repository, and the folder can be moved
    or copied whole. The MLflow URI stays the repository's ``sqlite:///mlflow.db``, which
    MLflow reads relative to where the command runs. Files already there are overwritten.
    """
    root = Path(out)
    packaged = resources.files("quarantine.demo").joinpath("conf")
    raw: dict[str, Any] = yaml.safe_load(packaged.joinpath(DEMO_CONFIG).read_text(encoding="utf-8"))
    suite = root / "expectations" / "orders.json"
    suite.parent.mkdir(parents=True, exist_ok=True)
    suite.write_bytes(packaged.joinpath("expectations", "orders.json").read_bytes())
    # "./": a name without a slash would be a catalog table's (configuration.md)
    raw["source"]["path"] = "./source"
    raw["target"]["table"] = "./orders"
    raw["errors"]["deadletterqueue.table.name"] = "./quarantine"
    raw["metrics"]["table"] = "./metrics"
    for stage in raw["stages"]:
        if stage["type"] == "expectation":
            stage["options"]["suite"] = "./expectations/orders.json"
    path = root / DEMO_CONFIG
    folder = root.resolve().name
    header = (
        "# The quarantine demo pipeline (the project's conf/orders_demo.yml), written by\n"
        "# `quarantine init-demo`. Relative paths are read from this file's folder; the MLflow\n"
        "# URI (sqlite:///mlflow.db) from the folder you run in, as MLflow reads it.\n"
        f"# Run it from the folder that holds {folder}/: quarantine run --conf {folder}/{DEMO_CONFIG}\n"
    )
    path.write_text(header + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    return path
