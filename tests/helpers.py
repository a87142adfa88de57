"""Test helpers: Kafka-shaped rows and DataFrame equality that ignores volatile columns."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from quarantine.schema import KAFKA_SOURCE_SCHEMA

VOLATILE = ("first_seen_at", "last_seen_at", "run_id", "resolved_at", "first_seen_date", "error_history")

_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def kafka_rows(
    values: Iterable[bytes | None],
    *,
    topic: str = "orders",
    partition: int = 0,
    start_offset: int = 0,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
) -> list[tuple[Any, ...]]:
    """Rows shaped like Spark's Kafka source, one per value, offsets consecutive."""
    out = []
    for i, v in enumerate(values):
        k = keys[i] if keys is not None else f"k{start_offset + i}".encode()
        h = headers[i] if headers is not None else None
        out.append(
            (k, v, topic, partition, start_offset + i, _T0 + dt.timedelta(seconds=i), 0, h)
        )
    return out


def kafka_df(spark: Any, values: Iterable[bytes | None], **kw: Any) -> Any:
    """A Kafka-shaped DataFrame (see :func:`kafka_rows`)."""
    return spark.createDataFrame(kafka_rows(values, **kw), KAFKA_SOURCE_SCHEMA)


def orders_config(d: Any, pipeline: str = "orders_test", **errors: Any) -> dict[str, Any]:
    """A decode + json pipeline over ``d/source`` (Delta) into ``d/target`` and ``d/quarantine``;
    ``errors.tolerance: all`` unless ``errors`` says otherwise."""
    return {
        "pipeline": pipeline,
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json",
             "options": {"schema": "order_id STRING, amount DOUBLE", "required": ["order_id"]}},
        ],
    }
