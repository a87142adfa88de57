"""Write retries under concurrency: slow attempts, and table-property changes by another writer.

A table write's commit conflict is retried even when one slow attempt used the whole budget.

Delta detects a conflict only when the write commits, so the slowest writes (a
big MERGE on a loaded cluster) are the likeliest to conflict — and, measured
from the start, the likeliest to have no budget left for a retry. Seen with two
batch runs of one pipeline at once (tests/integration/test_concurrent_writers.py):
"still failing after 1 attempt(s); last error ... ConcurrentAppendException".

A write that lost to a concurrent ``SET TBLPROPERTIES`` is retried; one that lost
to a schema change is not. Seen in the soak (``scripts/soak_kafka.py --metrics-conflict``):
the metrics appends racing a property change were dropped after one attempt.
"""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentAppendException

from quarantine.config import ErrorsConfig
from quarantine.errorhandling.retriable import is_table_property_change
from quarantine.errorhandling.retry import (
    WRITE_MIN_ATTEMPTS,
    RetryPolicy,
    RetryWithToleranceOperator,
)
from quarantine.errors import RetriesExhaustedError
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


class Py4JJavaError(Exception):
    """Stands in for an unconverted Py4J error (only its message is read)."""


def _metadata_conflict(operation: str) -> Py4JJavaError:
    # the message of a metrics append that lost to a concurrent commit (the soak's pipeline log)
    return Py4JJavaError(
        "An error occurred while calling o1640.save.\n"
        ": io.delta.exceptions.MetadataChangedException: [DELTA_METADATA_CHANGED] MetadataChangedException: "
        "The metadata of the Delta table has been changed by a concurrent update. Please try the operation again.\n"
        'Conflicting commit: {"timestamp":1795423964075,"operation":"' + operation + '","operationParameters":'
        '{"properties":"{\\"quarantine.soak.tick\\":\\"30\\"}"},"readVersion":32,"isolationLevel":"Serializable",'
        '"isBlindAppend":true,"operationMetrics":{}}\n'
        "Refer to https://docs.delta.io/latest/concurrency-control.html for more details.\n"
        "\tat org.apache.spark.sql.delta.DeltaErrorsBase.metadataChangedException(DeltaErrors.scala:2436)"
    )


def test_a_write_that_lost_to_a_table_property_change_is_retried() -> None:
    clock = FakeClock()
    op = RetryWithToleranceOperator.for_writes(_errors(), clock=clock, rng=_const(0.5))
    assert is_table_property_change(_metadata_conflict("SET TBLPROPERTIES"))
    assert op.policy.retriable(_metadata_conflict("SET TBLPROPERTIES"))
    assert op.policy.retriable(_metadata_conflict("UNSET TBLPROPERTIES"))


@pytest.mark.parametrize("operation", ["ADD COLUMNS", "CHANGE COLUMN", "REPLACE TABLE AS SELECT", "WRITE"])
def test_a_write_that_lost_to_a_schema_or_table_change_is_not_retried(operation: str) -> None:
    op = RetryWithToleranceOperator.for_writes(_errors(), clock=FakeClock(), rng=_const(0.5))
    assert not is_table_property_change(_metadata_conflict(operation))
    assert not op.policy.retriable(_metadata_conflict(operation))
    # a bare metadata conflict (no conflicting commit named) stays not retriable
    assert not op.policy.retriable(Py4JJavaError(": io.delta.exceptions.MetadataChangedException: changed"))


@pytest.mark.parametrize(
    "text",
    [
        # the loser found a _delta_log without a first commit yet
        "[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table ('`delta`.`/t/q`'). "
        "The associated location ('/t/q') is not empty and also not a Delta table.",
        # the loser's create saw the winner's table, while its own cached snapshot still did not
        "[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view `delta`.`/t/q` because it already exists.",
    ],
)
def test_losing_the_race_to_create_a_table_is_retried_however_delta_says_it(text: str) -> None:
    from quarantine.errorhandling.retriable import is_table_creation_race

    cause = RuntimeError(text)
    wrapped = RuntimeError("quarantine MERGE into /t/q failed")
    wrapped.__cause__ = cause
    assert is_table_creation_race(cause) and is_table_creation_race(wrapped)
    assert not is_table_creation_race(RuntimeError("[DELTA_TABLE_NOT_FOUND] /t/q"))
