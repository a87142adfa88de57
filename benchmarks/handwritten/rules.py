"""What makes an order record good, in plain PySpark: the demo config's stages, without the library.

The same rules as ``conf/orders_demo.yml``'s ``decode`` -> ``parse_order`` -> ``convert`` ->
``check_order`` stages, so a hand-written job keeps exactly the rows a quarantine run
writes to its target (``bench_process`` checks the counts):

* the value is non-NULL, valid UTF-8;
* it parses as a JSON object of :data:`ORDER_SCHEMA` (no field of the wrong type) with
  ``order_id``, ``amount`` and ``currency`` present and non-null;
* ``created_at``, when present, converts with :data:`CREATED_AT_FORMAT`;
* ``amount`` in [0, 10000], ``currency`` in EUR/USD/GBP, ``quantity`` in [1, 1000]
  (a NULL passes a check, as in the ``checks`` stage).

Not mirrored: the json stage's strict strings (a number where a STRING field is
declared) and its count of undeclared fields; the demo's poison has neither.

Both jobs parse each record once: :func:`parsed` selects the parse as one column and
the rules read its fields (the split job caches that; the good-only job has no cache,
so it asks for the parse as a generator's output, which a filter cannot inline).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

__all__ = ["COORDINATES", "CREATED_AT_FORMAT", "ORDER_SCHEMA", "good_columns", "parsed", "reason"]

#: The JSON payload's schema (the demo config's json stage).
ORDER_SCHEMA = StructType([
    StructField("order_id", StringType()), StructField("customer_email", StringType()),
    StructField("amount", DoubleType()), StructField("currency", StringType()),
    StructField("quantity", IntegerType()), StructField("sku", StringType()),
    StructField("status", StringType()), StructField("created_at", StringType()),
])
#: The demo config's cast stage's format for ``created_at``.
CREATED_AT_FORMAT = "yyyy-MM-dd HH:mm:ss"
#: The source's Kafka coordinates, kept with every output row.
COORDINATES = ("topic", "partition", "offset", "timestamp")
_REQUIRED = ("order_id", "amount", "currency")
_CORRUPT = "_corrupt_record"
_PARSE = StructType([*ORDER_SCHEMA.fields, StructField(_CORRUPT, StringType())])


def parsed(source: DataFrame, *keep: str, generate: bool = False) -> DataFrame:
    """``keep`` columns of ``source``, its UTF-8 check (``_utf8``), the parse (``_p``) and the cast (``_ts``).

    One ``from_json`` per record, PERMISSIVE with a corrupt-record column, so a
    malformed record or a field of the wrong type is seen, not a struct of NULLs.

    Args:
        source: the Kafka-shaped source.
        keep: its columns to keep (the rules also read ``value``, kept whatever this says).
        generate: make the parse and the cast generator outputs (an explode of a one-element
            array): Spark pushes a filter below a projection by inlining the projection's
            expressions, so a filter on the parse's fields would run ``from_json`` once per
            reference and the projection once more; a generator's output is not inlined.
    """
    value = F.col("value")
    p = F.from_json(value.cast("string"), _PARSE, {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"})
    cols = [*dict.fromkeys([*keep, "value"])]
    with_p = source.select(*cols, F.is_valid_utf8(value).alias("_utf8"), _once(p, generate).alias("_p"))
    ts = F.try_to_timestamp(F.col("_p.created_at"), F.lit(CREATED_AT_FORMAT))
    return with_p.select("*", _once(ts, generate).alias("_ts"))


def _once(c: Column, generate: bool) -> Column:
    return F.explode(F.array(c)) if generate else c


def reason() -> Column:
    """Why a row of :func:`parsed` is bad, as a sentence; NULL for a good row."""
    p = F.col("_p")
    missing = [p.getField(r).isNull() for r in _REQUIRED]
    amount, currency, quantity = p.getField("amount"), p.getField("currency"), p.getField("quantity")
    return (
        F.when(F.col("value").isNull(), F.lit("value is NULL"))
        .when(~F.col("_utf8"), F.lit("value is not valid UTF-8"))
        .when(p.isNull() | p.getField(_CORRUPT).isNotNull(), F.lit("malformed JSON or a field of the wrong type"))
        .when(missing[0] | missing[1] | missing[2], F.lit("a required field (order_id, amount, currency) is missing"))
        .when(p.getField("created_at").isNotNull() & F.col("_ts").isNull(), F.lit("created_at is not a timestamp"))
        .when((amount < 0) | (amount > 10000), F.lit("amount out of [0, 10000]"))
        .when(~currency.isin("EUR", "USD", "GBP"), F.lit("currency not EUR, USD or GBP"))
        .when((quantity < 1) | (quantity > 1000), F.lit("quantity out of [1, 1000]"))
    )


def good_columns() -> list[Column]:
    """A good row's output: the order's fields (``created_at`` a timestamp) and its coordinates."""
    fields = [
        (F.col("_ts") if f.name == "created_at" else F.col("_p").getField(f.name)).alias(f.name)
        for f in ORDER_SCHEMA.fields
    ]
    return [*fields, *(F.col(c).alias(f"_source_{c}") for c in COORDINATES)]
