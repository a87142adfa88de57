"""Every date and time bucket the library derives is UTC's, whatever the session's time zone.

Issue 34, defect 4: with ``spark.sql.session.timeZone`` at ``Etc/GMT+12`` (UTC-12), records
first seen at 2026-11-27 10:05 UTC carried ``first_seen_date`` 2026-11-26, so
``replay --where "first_seen_date = '2026-11-27'"`` selected none of them. 10:05 UTC is the
previous day at UTC-12 and the next day at UTC+14 (``Etc/GMT-14``): each zone shifts it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.ops.reads import Reads
from quarantine.ops.spark_reads import SparkEngine
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import preview_replay, replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sql import run_query
from tests.helpers import kafka_rows, orders_config

#: Seen and resolved at these instants: each of the zones below puts them on another day.
FIRST_SEEN = dt.datetime(2026, 11, 27, 10, 5, tzinfo=dt.UTC)
RESOLVED = dt.datetime(2026, 11, 27, 10, 30, tzinfo=dt.UTC)
DAY = dt.date(2026, 11, 27)
#: 2026-11-27T00:00:00Z, the UTC day's start, in epoch seconds.
DAY_START = int(dt.datetime(2026, 11, 27, tzinfo=dt.UTC).timestamp())
ZONES = ("Etc/GMT+12", "Etc/GMT-14")  # UTC-12 and UTC+14
RECORDS = 20


@pytest.fixture(scope="module", params=ZONES)
def zone(spark: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """The session's time zone set to one on either side of UTC, and restored after."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", request.param)
    try:
        yield str(request.param)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def _config(d: Path, *, required: list[str]) -> Any:
    cfg = orders_config(d)
    cfg["metrics"] = {"table": str(d / "metrics")}
    cfg["stages"][1]["options"]["required"] = required
    return parse_config(cfg)


def _pipeline(spark: Any, d: Path, at: dt.datetime, *, required: list[str]) -> Pipeline:
    return replace(Pipeline.from_config(_config(d, required=required), spark), clock=lambda: at)


@pytest.fixture(scope="module")
def seen(spark: Any, zone: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 records quarantined (no order_id) at :data:`FIRST_SEEN`, under ``zone`` (one run per
    zone: the tests below read it; the last one replays them)."""
    table_dir = tmp_path_factory.mktemp("utc_dates")
    rows = kafka_rows([b'{"amount": %d}' % i for i in range(RECORDS)])
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(table_dir / "source"))
    summary = _pipeline(spark, table_dir, FIRST_SEEN, required=["order_id"]).run()
    assert summary.records_quarantined == RECORDS
    return table_dir


def test_first_seen_date_is_the_utc_date_of_first_seen_at_in_any_session_time_zone(spark: Any, seen: Path) -> None:
    quarantine = spark.read.format("delta").load(str(seen / "quarantine"))
    dates = {(r["first_seen_date"], r["at"]) for r in quarantine.select(
        "first_seen_date", F.unix_seconds("first_seen_at").alias("at")).collect()}
    assert dates == {(DAY, int(FIRST_SEEN.timestamp()))}


@pytest.mark.parametrize("bucket", ["hour", "day", "week", "month"])
def test_error_rate_periods_start_on_utc_boundaries(spark: Any, seen: Path, bucket: str) -> None:
    tables = {"quarantine": str(seen / "quarantine"), "metrics": str(seen / "metrics")}
    rows = run_query(spark, "error_rate", {"bucket": bucket}, tables).select(
        F.unix_seconds("period").alias("start"), "failures", "topic_records_in").collect()
    start = {
        "hour": int(FIRST_SEEN.replace(minute=0).timestamp()),
        "day": DAY_START,
        "week": int(dt.datetime(2026, 11, 23, tzinfo=dt.UTC).timestamp()),  # the Monday
        "month": int(dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp()),
    }[bucket]
    # the metrics table's records-in lands in the same period as the failures
    assert [(r["start"], r["failures"], r["topic_records_in"]) for r in rows] == [(start, RECORDS, RECORDS)]


def test_the_reports_daily_buckets_start_at_utc_midnight(spark: Any, seen: Path) -> None:
    engine = SparkEngine(spark)
    try:
        _, rows = Reads(engine, {"quarantine": str(seen / "quarantine")}).read(
            "quarantined_over_time", pipeline="orders_test", since=None, seconds=86400)
    finally:
        engine.close()
    assert [(int(bucket.timestamp()), records) for bucket, _, records in rows] == [(DAY_START, RECORDS)]


def test_replay_where_first_seen_date_selects_that_utc_day_and_resolutions_count_on_their_utc_date(
    spark: Any, seen: Path
) -> None:
    where = f"first_seen_date = '{DAY.isoformat()}'"
    pipe = _pipeline(spark, seen, RESOLVED, required=[])
    assert preview_replay(pipe, where).selected == RECORDS
    assert replay(pipe, where, now=RESOLVED).replayed == RECORDS
    rows = run_query(spark, "resolution_history", {}, {"quarantine": str(seen / "quarantine")}).collect()
    assert [(r["resolved_date"], r["status"], r["records"]) for r in rows] == [(DAY, "replayed", RECORDS)]
