"""Tolerance none/all, the run limit and the rate limit: exact trip points and rolling windows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from quarantine.config import ErrorsConfig, RateDuration
from quarantine.errorhandling.tolerance import (
    MemoryWindowStore,
    ToleranceGuard,
    window_bounds,
    window_state_table,
)
from quarantine.errors import ToleranceExceededError

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
PER_MINUTE_3 = {"tolerance": "all", "tolerance.rate.limit": 3, "tolerance.rate.duration": "minute"}


def _cfg(**kw: Any) -> ErrorsConfig:
    raw = {"deadletterqueue.table.name": "/tmp/q"}
    raw.update({k: v for k, v in kw.items()})
    return ErrorsConfig.from_mapping(raw)


def _guard(store: MemoryWindowStore | None = None, run_id: str = "r1", **kw: Any) -> ToleranceGuard:
    return ToleranceGuard(_cfg(**kw), pipeline="orders", run_id=run_id, store=store)


def test_none_fails_on_the_first_error_naming_key_count_and_batch() -> None:
    guard = _guard()
    guard.check(0, T0, batch_id=0)
    with pytest.raises(ToleranceExceededError) as info:
        guard.check(1, T0, batch_id=1)
    err = info.value
    assert (err.limit, err.count, err.window) == ("errors.tolerance", 1, "batch 1")
    assert "errors.tolerance=none" in str(err) and "/tmp/q" in str(err)


def test_none_lets_errors_continued_by_an_explicit_handler_through() -> None:
    guard = _guard()
    guard.check(3, T0, handled_errors=3)
    with pytest.raises(ToleranceExceededError):
        guard.check(4, T0, batch_id=1, handled_errors=3)


def test_all_skips_and_counts() -> None:
    guard = _guard(tolerance="all")
    for b in range(5):
        guard.check(10, T0, batch_id=b)
    assert guard.run_errors == 50


@pytest.mark.parametrize("limit", [0, 1, 5])
def test_limit_trips_exactly_at_n_plus_one(limit: int) -> None:
    guard = _guard(tolerance="all", **{"tolerance.limit": limit})
    for b in range(limit):
        guard.check(1, T0, batch_id=b)
    assert guard.run_errors == limit
    with pytest.raises(ToleranceExceededError) as info:
        guard.check(1, T0, batch_id=limit)
    assert info.value.limit == "errors.tolerance.limit"
    assert info.value.count == limit + 1
    assert info.value.window == "run r1"


def test_limit_counts_a_rechecked_batch_once() -> None:
    guard = _guard(tolerance="all", **{"tolerance.limit": 3})
    guard.check(2, T0, batch_id=7)
    guard.check(2, T0, batch_id=7)
    assert guard.run_errors == 2


def test_limit_applies_across_batches_when_one_batch_jumps_past_it() -> None:
    guard = _guard(tolerance="all", **{"tolerance.limit": 10})
    guard.check(9, T0, batch_id=0)
    with pytest.raises(ToleranceExceededError) as info:
        guard.check(5, T0, batch_id=1)
    assert info.value.count == 14


def test_rate_limit_trips_exactly_at_n_plus_one_within_a_window() -> None:
    store = MemoryWindowStore()
    guard = _guard(store, **PER_MINUTE_3)
    guard.check(1, T0, batch_id=0)
    guard.check(2, T0 + dt.timedelta(seconds=30), batch_id=1)
    with pytest.raises(ToleranceExceededError) as info:
        guard.check(1, T0 + dt.timedelta(seconds=59), batch_id=2)
    err = info.value
    assert err.limit == "errors.tolerance.rate.limit" and err.count == 4
    assert err.window == "minute [2026-01-01T12:00:00Z, 2026-01-01T12:01:00Z)"


def test_rate_window_rolls() -> None:
    store = MemoryWindowStore()
    guard = _guard(store, **PER_MINUTE_3)
    guard.check(3, T0 + dt.timedelta(seconds=50), batch_id=0)
    guard.check(3, T0 + dt.timedelta(seconds=61), batch_id=1)  # next minute: a fresh window
    guard.check(3, T0 + dt.timedelta(minutes=5), batch_id=2)
    with pytest.raises(ToleranceExceededError):
        guard.check(1, T0 + dt.timedelta(minutes=5, seconds=1), batch_id=3)


def test_rate_window_survives_a_restart_through_the_store() -> None:
    store = MemoryWindowStore()
    kw = {"tolerance": "all", "tolerance.rate.limit": 5, "tolerance.rate.duration": "hour"}
    first = _guard(store, run_id="run-a", **kw)
    first.check(4, T0, batch_id=0)
    restarted = _guard(store, run_id="run-b", **kw)  # a new process: the run count starts at 0
    with pytest.raises(ToleranceExceededError) as info:
        restarted.check(2, T0 + dt.timedelta(minutes=30), batch_id=0)
    assert info.value.count == 6
    assert restarted.run_errors == 2


def test_a_replayed_micro_batch_is_counted_once_in_the_window() -> None:
    store = MemoryWindowStore()
    kw = {"tolerance": "all", "tolerance.rate.limit": 5}
    _guard(store, run_id="query-1", **kw).check(3, T0, batch_id=4)
    # crash before offsets commit; the restarted query (same id) replays batch 4
    _guard(store, run_id="query-1", **kw).check(3, T0, batch_id=4)
    assert store.errors_in("orders", 60, int(T0.timestamp())) == 3


def test_rate_limit_without_a_store_is_refused() -> None:
    with pytest.raises(ValueError, match="WindowStore"):
        _guard(None, tolerance="all", **{"tolerance.rate.limit": 1})


@pytest.mark.parametrize(
    ("duration", "at", "start", "end"),
    [
        (RateDuration.MINUTE, "2026-03-04T05:06:07", "2026-03-04T05:06:00", "2026-03-04T05:07:00"),
        (RateDuration.HOUR, "2026-03-04T05:06:07", "2026-03-04T05:00:00", "2026-03-04T06:00:00"),
        (RateDuration.DAY, "2026-03-04T23:59:59", "2026-03-04T00:00:00", "2026-03-05T00:00:00"),
    ],
)
def test_windows_are_utc_aligned(duration: RateDuration, at: str, start: str, end: str) -> None:
    s, e = window_bounds(dt.datetime.fromisoformat(at), duration)
    assert s == dt.datetime.fromisoformat(start).replace(tzinfo=dt.UTC)
    assert e == dt.datetime.fromisoformat(end).replace(tzinfo=dt.UTC)


def test_window_state_table_sits_next_to_the_quarantine_table() -> None:
    assert window_state_table("/data/q/") == "/data/q_tolerance"
    assert window_state_table("main.ops.quarantine") == "main.ops.quarantine_tolerance"
