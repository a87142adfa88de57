"""A table write's commit conflict is retried even when one slow attempt used the whole budget.

Delta detects a conflict only when the write commits, so the slowest writes (a
big MERGE on a loaded cluster) are the likeliest to conflict — and, measured
from the start, the likeliest to have no budget left for a retry. Seen with two
batch runs of one pipeline at once (tests/integration/test_concurrent_writers.py):
"still failing after 1 attempt(s); last error ... ConcurrentAppendException".
"""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentAppendException

from quarantine.config import ErrorsConfig
from quarantine.errors import RetriesExhaustedError
from quarantine.retry import WRITE_MIN_ATTEMPTS, RetryPolicy, RetryWithToleranceOperator
from tests.unit.test_retry import FakeClock, _const


class SlowConflicts:
    """Each attempt takes ``attempt_s`` on the clock; the first ``failures`` end in a conflict."""

    def __init__(self, clock: FakeClock, attempt_s: float, failures: int) -> None:
        self.clock = clock
        self.attempt_s = attempt_s
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        self.clock.now += self.attempt_s
        if self.calls <= self.failures:
            raise ConcurrentAppendException("a concurrent MERGE added data")
        return "committed"


def _errors(**keys: object) -> ErrorsConfig:
    return ErrorsConfig.from_mapping({"deadletterqueue.table.name": "/tmp/q", **keys})


def test_a_write_slower_than_the_budget_is_still_retried_after_a_conflict() -> None:
    clock = FakeClock()
    op = RetryWithToleranceOperator.for_writes(_errors(), clock=clock, rng=_const(0.5))
    write = SlowConflicts(clock, attempt_s=150.0, failures=1)  # budget: 120 s
    assert op.call(write, name="quarantine MERGE") == ("committed", 2)
    assert clock.sleeps_ms() == [300]  # the full first backoff, not cut to the (spent) budget


def test_past_the_budget_a_write_stops_after_the_minimum_attempts() -> None:
    clock = FakeClock()
    op = RetryWithToleranceOperator.for_writes(_errors(), clock=clock, rng=_const(0.5))
    write = SlowConflicts(clock, attempt_s=150.0, failures=99)
    with pytest.raises(RetriesExhaustedError, match=rf"{WRITE_MIN_ATTEMPTS} attempt\(s\)"):
        op.call(write, name="quarantine MERGE")
    assert write.calls == WRITE_MIN_ATTEMPTS


def test_within_the_budget_writes_retry_as_before_and_records_are_unchanged() -> None:
    clock = FakeClock()
    op = RetryWithToleranceOperator.for_writes(_errors(), clock=clock, rng=_const(0.5))
    assert op.call(SlowConflicts(clock, attempt_s=1.0, failures=5), name="merge") == ("committed", 6)
    # record-level retries keep Connect's semantics: one attempt when retries are off
    assert RetryPolicy.from_config(_errors()).min_attempts == 1
    with pytest.raises(ValueError, match="min_attempts"):
        RetryPolicy(min_attempts=0)
