"""Tolerance, handlers and error-context logging in the runner, on real Delta tables.

Every breach happens after the batch's failed records are durable in the
quarantine table and before the target write.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.errorhandling.handlers import HandlerContext, HandlerResponse
from quarantine.errorhandling.tolerance import window_state_table
from quarantine.errors import ConfigError, HandlerError, ToleranceExceededError
from quarantine.pipeline import Pipeline
from quarantine.tables import table_exists
from tests.helpers import kafka_df

SCHEMA = "order_id STRING, amount DOUBLE"
GOOD = [b'{"order_id":"a","amount":1.5}', b'{"order_id":"b","amount":2}']
BAD_UTF8 = b"\xff\xfe"
BAD_JSON = b'{"order_id":"c"'
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
HERE = __name__


class ReturnsNothing:
    def handle(self, context: HandlerContext) -> Any:
        return None


class FailOnTwo:
    def handle(self, context: HandlerContext) -> HandlerResponse:
        return HandlerResponse.FAIL if context.errors >= 2 else HandlerResponse.CONTINUE


def _pipeline(spark: Any, d: Path, **errors: Any) -> Pipeline:
    raw = {
        "pipeline": "orders_tol",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": SCHEMA, "required": ["order_id"]}},
        ],
    }
    pipe = Pipeline.from_config(parse_config(raw), spark, listeners=[])
    pipe.clock = lambda: T0
    return pipe


def _count(spark: Any, path: Path) -> int:
    return spark.read.format("delta").load(str(path)).count() if table_exists(spark, str(path)) else 0


def _offsets(spark: Any, path: Path, col: str = "offset") -> set[int]:
    if not table_exists(spark, str(path)):
        return set()
    return {r[0] for r in spark.read.format("delta").load(str(path)).select(col).collect()}


def test_none_fails_on_the_first_error_after_the_record_is_quarantined(
    spark: Any, table_dir: Path
) -> None:
    pipe = _pipeline(spark, table_dir)  # errors.tolerance defaults to none
    run = pipe.start_run()
    batch = kafka_df(spark, [GOOD[0], BAD_JSON, GOOD[1]])
    with pytest.raises(ToleranceExceededError) as info:
        run.process_batch(batch, 0)
    assert info.value.limit == "errors.tolerance" and info.value.count == 1
    assert _offsets(spark, table_dir / "quarantine") == {1}
    assert not table_exists(spark, str(table_dir / "target"))  # good rows not committed


def test_all_skips_and_counts(spark: Any, table_dir: Path) -> None:
    pipe = _pipeline(spark, table_dir, tolerance="all")
    run = pipe.start_run()
    report = run.process_batch(kafka_df(spark, [GOOD[0], BAD_UTF8, BAD_JSON, GOOD[1]]), 0)
    assert (report.records_in, report.records_ok, report.records_quarantined) == (4, 2, 2)
    assert report.metrics["total-records-skipped"] == 2
    assert _offsets(spark, table_dir / "quarantine") == {1, 2}
    assert _offsets(spark, table_dir / "target", "_source_offset") == {0, 3}


def test_run_limit_trips_exactly_at_n_plus_one_and_the_breaching_batch_is_not_committed(
    spark: Any, table_dir: Path
) -> None:
    pipe = _pipeline(spark, table_dir, tolerance="all", **{"tolerance.limit": 2})
    run = pipe.start_run()
    for b in range(2):
        run.process_batch(kafka_df(spark, [GOOD[0], BAD_JSON], start_offset=10 * b), b)
    with pytest.raises(ToleranceExceededError) as info:
        run.process_batch(kafka_df(spark, [GOOD[0], BAD_JSON], start_offset=20), 2)
    assert (info.value.limit, info.value.count) == ("errors.tolerance.limit", 3)
    assert _offsets(spark, table_dir / "quarantine") == {1, 11, 21}
    assert _offsets(spark, table_dir / "target", "_source_offset") == {0, 10}


def test_rate_window_survives_a_restart_and_rolls(spark: Any, table_dir: Path) -> None:
    kw = {"tolerance": "all", "tolerance.rate.limit": 3, "tolerance.rate.duration": "hour"}
    first = _pipeline(spark, table_dir, **kw)
    first_run = first.start_run()
    first_run.process_batch(kafka_df(spark, [BAD_JSON, BAD_UTF8]), 0)
    state = window_state_table(str(table_dir / "quarantine"))
    assert table_exists(spark, state)

    restarted = _pipeline(spark, table_dir, **kw)  # a new run: a fresh run count, same window
    restarted_run = restarted.start_run()
    assert restarted_run.run_id != first_run.run_id
    restarted.clock = lambda: T0 + dt.timedelta(minutes=59)
    with pytest.raises(ToleranceExceededError) as info:
        restarted_run.process_batch(kafka_df(spark, [BAD_JSON, GOOD[0], BAD_JSON], start_offset=100), 0)
    assert info.value.limit == "errors.tolerance.rate.limit" and info.value.count == 4
    assert "hour [2026-01-01T12:00:00Z, 2026-01-01T13:00:00Z)" in str(info.value)
    assert _offsets(spark, table_dir / "quarantine") == {0, 1, 100, 102}

    later = _pipeline(spark, table_dir, **kw)
    later_run = later.start_run()
    later.clock = lambda: T0 + dt.timedelta(hours=1)
    later_run.process_batch(kafka_df(spark, [BAD_JSON, BAD_JSON, GOOD[0]], start_offset=200), 0)
    assert 202 in _offsets(spark, table_dir / "target", "_source_offset")


def test_handler_fail_for_a_kind_fails_after_quarantine(spark: Any, table_dir: Path) -> None:
    pipe = _pipeline(spark, table_dir, tolerance="all", **{"handler.deserialize": "fail"})
    run = pipe.start_run()
    # a transform/validate-free batch with only json errors passes: kind 'deserialize'
    # belongs to decode_utf8 and json alike, so check the kinds the stages report
    kinds = {s.name: s.kind.value for s in pipe.stages}
    with pytest.raises(ToleranceExceededError) as info:
        run.process_batch(kafka_df(spark, [GOOD[0], BAD_UTF8]), 0)
    assert info.value.limit == f"errors.handler.{kinds['decode']}"
    assert _offsets(spark, table_dir / "quarantine") == {1}
    assert not table_exists(spark, str(table_dir / "target"))


def test_a_fail_handler_logs_why_even_with_error_logging_off(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = _pipeline(spark, table_dir, tolerance="all", **{"handler.deserialize": "fail", "log.enable": False})
    run = pipe.start_run()
    with caplog.at_level(logging.INFO, logger="quarantine.errors"), pytest.raises(ToleranceExceededError):
        run.process_batch(kafka_df(spark, [GOOD[0], BAD_UTF8]), 0)
    lines = [r.getMessage() for r in caplog.records if r.name == "quarantine.errors"]
    assert any("offset=1" in ln and "stage=decode" in ln for ln in lines), lines


def test_explicit_continue_handler_tolerates_its_kind_under_tolerance_none(
    spark: Any, table_dir: Path
) -> None:
    probe = _pipeline(spark, table_dir)
    kind = {s.name: s.kind.value for s in probe.stages}["decode"]
    pipe = _pipeline(spark, table_dir, **{f"handler.{kind}": "continue"})
    run = pipe.start_run()
    report = run.process_batch(kafka_df(spark, [GOOD[0], BAD_UTF8]), 0)
    assert report.records_quarantined == 1 and report.records_ok == 1


def test_custom_handler_decides_from_the_batch_count(spark: Any, table_dir: Path) -> None:
    kind = {s.name: s.kind.value for s in _pipeline(spark, table_dir).stages}["parse"]
    pipe = _pipeline(spark, table_dir, tolerance="all", **{f"handler.{kind}": f"{HERE}.FailOnTwo"})
    run = pipe.start_run()
    run.process_batch(kafka_df(spark, [BAD_JSON, GOOD[0]]), 0)
    with pytest.raises(ToleranceExceededError, match=f"errors.handler.{kind}"):
        run.process_batch(kafka_df(spark, [BAD_JSON, BAD_JSON], start_offset=10), 1)
    assert _offsets(spark, table_dir / "quarantine") == {0, 10, 11}


def test_handler_returning_nothing_is_fatal_and_records_are_still_quarantined(
    spark: Any, table_dir: Path
) -> None:
    kind = {s.name: s.kind.value for s in _pipeline(spark, table_dir).stages}["parse"]
    pipe = _pipeline(
        spark, table_dir, tolerance="all", **{f"handler.{kind}": f"{HERE}.ReturnsNothing"}
    )
    run = pipe.start_run()
    with pytest.raises(HandlerError, match="returned None"):
        run.process_batch(kafka_df(spark, [BAD_JSON, GOOD[0]]), 0)
    assert _offsets(spark, table_dir / "quarantine") == {0}
    assert not table_exists(spark, str(table_dir / "target"))


def test_bad_handler_path_fails_when_the_pipeline_is_built(spark: Any, table_dir: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _pipeline(spark, table_dir, **{"handler.transform": "nowhere_module.Handler"})
    assert info.value.key == "errors.handler.transform"


def test_log_enable_logs_a_bounded_sample_with_context_and_no_payload(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = _pipeline(spark, table_dir, tolerance="all", **{"log.enable": True})
    run = pipe.start_run()
    values = [BAD_JSON] * 25 + [GOOD[0]]
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        report = run.process_batch(kafka_df(spark, values, topic="orders-eu", partition=3), 0)
    lines = [r.getMessage() for r in caplog.records if r.name == "quarantine.errors"]
    record_lines = [ln for ln in lines if "stage=" in ln]
    assert len(record_lines) == 20
    assert all("topic=orders-eu partition=3" in ln and "stage=parse" in ln for ln in record_lines)
    assert not any("value=" in ln for ln in lines)
    assert any("5 more failed record(s) not logged" in ln for ln in lines)
    assert report.metrics["total-errors-logged"] == 20
