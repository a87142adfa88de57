"""Quarantine and metrics tables written by local Spark + Delta for the two-engine test (issue 53).

The rows hold what a reader gets wrong first: NULLs in every nullable column, instants at
the ends of the range and between seconds, bytes that are not UTF-8 in payloads and in a
header's key, a string with a quote and a backslash, several pipelines, topics and statuses.
:func:`write_tables` writes them with Spark's own Delta writer, as a pipeline run does.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from quarantine.schema import METRICS_SCHEMA, QUARANTINE_SCHEMA

__all__ = ["PIPELINE", "write_tables"]

#: The pipeline most rows belong to (the config's).
PIPELINE = "orders_two"

_UTC = dt.UTC
#: Instants a reader can get wrong: before the epoch, at the end of year 9999, between microseconds.
_ODD = (
    dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=_UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
    dt.datetime(2026, 11, 29, 0, 30, 15, 123456, tzinfo=_UTC),
)


#: Stands for a header key whose bytes are not UTF-8 (``6b ff 65 79``): Python cannot hold one in
#: a str, so Spark casts the bytes to STRING after the rows are made (as a Delta source's can be).
_BAD_KEY = "BAD-KEY"
_HEADERS_WITH_BAD_KEY = (
    f"transform(headers, h -> named_struct('key', CASE WHEN h.key = '{_BAD_KEY}' "
    "THEN CAST(unhex('6BFF6579') AS STRING) ELSE h.key END, 'value', h.value))"
)


def _row(i: int, pipeline: str, status: str) -> dict[str, Any]:
    seen = dt.datetime(2026, 11, 1, tzinfo=_UTC) + dt.timedelta(hours=7 * i, microseconds=i)
    closed = status != "open"
    return {
        "pipeline": pipeline,
        "topic": None if i == 5 else ("orders" if i % 3 else "payments"),
        "partition": None if i == 6 else i % 2,
        "offset": None if i == 7 else (-(10**12) - i if i == 8 else 100 + i - (i % 4 == 0)),
        "timestamp": _ODD[(i // 2) % len(_ODD)] if i % 2 else None,
        "timestampType": None if i == 3 else 0,
        "key": None if i % 5 == 0 else (b"\xff\xfe" if i % 2 else f"k{i}".encode()),
        "value": None if i == 4 else (b"\xc3\x28bad" if i % 3 == 0 else b'{"amount": "x\'\\\\"}'),
        "headers": None if i % 4 == 1 else [
            {"key": "trace-id", "value": b"\x00\x81"},
            {"key": _BAD_KEY if i % 2 else "src", "value": None},
        ],
        "stage": None if i == 9 else ("parse" if i % 2 else "check_order"),
        "kind": "deserialize",
        "error_class": None if i == 10 else ("SchemaMismatch" if i % 3 else "Bad'Quote\\"),
        "message": None if i == 11 else f"field 'amount': expected DOUBLE, found {i % 4} — ünïcode",
        "stacktrace": None,
        "retriable": None if i == 2 else bool(i % 2),
        "attempts": 1,
        "error_history": None if i == 12 else [
            {"at": _ODD[(i + j) % len(_ODD)] if j else seen, "run_id": f"run-{j}", "stage": "parse",
             "error_class": "SchemaMismatch", "message": None if j == 2 else f"m{j}"}
            for j in range(1 + i % 3)
        ],
        "error_count": 1 + i % 4,
        "status": status,
        "first_seen_at": None if i == 13 else seen - dt.timedelta(days=40),
        "last_seen_at": None if i in (13, 14) else (_ODD[2] if i == 15 else seen),
        "run_id": "run-0",
        "batch_id": None if i == 1 else i,
        "resolved_at": seen if closed else None,
        "resolution": (f"discarded: producer bug {i}" if status == "discarded" else "replayed by run r1")
        if closed else None,
        "first_seen_date": (seen - dt.timedelta(days=40)).date(),
        "fingerprint": None if i % 2 else i * 7919,
    }


def _metrics(pipeline: str) -> list[dict[str, Any]]:
    rows = []
    for i in range(24):
        at = dt.datetime(2026, 10, 1, tzinfo=_UTC) + dt.timedelta(hours=7 * i, microseconds=i)
        for metric, value in (("records-in", 100.0 + i), ("records-quarantined", float(i % 5)),
                              ("total-record-failures", float(i))):
            rows.append({"pipeline": pipeline, "run_id": f"run-{i % 3}", "batch_id": i, "recorded_at": at,
                         "metric": metric, "stage": None, "topic": None if i == 3 else "orders",
                         "value": value, "run_kind": None if i % 2 else "run"})
    # breaches of both kinds (fractions: Spark's cast truncates), at odd instants, and replays and discards
    for i in range(8):
        rows.append({"pipeline": pipeline, "run_id": None if i == 7 else f"run-b{i % 5}",
                     "batch_id": None if i == 2 else i, "recorded_at": None if i == 6 else _ODD[i % len(_ODD)],
                     "metric": "tolerance-breaches", "stage": None if i % 2 else "check_order", "topic": None,
                     "value": 0.0 if i == 4 else i + 0.75, "run_kind": (None, "run", "replay", "discard")[i % 4]})
        rows.append({"pipeline": pipeline, "run_id": f"run-r{i % 3}", "batch_id": 0,
                     "recorded_at": _ODD[3] + dt.timedelta(seconds=i), "metric": "records-in", "stage": None,
                     "topic": "orders", "value": 5.0 + i, "run_kind": ("replay", "discard")[i % 2]})
    return rows


def write_tables(spark: Any, folder: Path, *, empty: bool = False, replayed: bool = True) -> dict[str, str]:
    """Write a quarantine and a metrics table under ``folder``; their paths by role.

    Args:
        spark: a local Spark session with Delta.
        folder: where ``quarantine/`` and ``metrics/`` go.
        empty: write both tables with their schemas and no rows.
        replayed: some rows are ``replayed``; without, those are ``discarded`` (a replay's dry run
            runs the stages, and refuses replayed rows without the target they went to).
    """
    statuses = ("open", "open", "open", "replayed" if replayed else "discarded", "discarded")
    quarantine_rows = [] if empty else (
        [_row(i, PIPELINE, statuses[i % len(statuses)]) for i in range(40)]
        + [_row(i, "other_pipeline", "open") for i in range(100, 103)]
    )
    metrics_rows = [] if empty else _metrics(PIPELINE) + _metrics("other_pipeline")[:6]
    paths = {"quarantine": str(folder / "quarantine"), "metrics": str(folder / "metrics")}
    quarantine = spark.createDataFrame(quarantine_rows, QUARANTINE_SCHEMA)
    quarantine = quarantine.withColumn("headers", F.expr(_HEADERS_WITH_BAD_KEY))
    quarantine.write.format("delta").save(paths["quarantine"])
    spark.createDataFrame(metrics_rows, METRICS_SCHEMA).write.format("delta").save(paths["metrics"])
    return paths
