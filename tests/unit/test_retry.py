"""Retry with backoff and jitter under a budget, with a fake clock (no real sleeping)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest

from quarantine.config import ErrorsConfig, Tolerance
from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import (
    WRITE_RETRY_TIMEOUT_MS,
    RetryPolicy,
    RetryWithToleranceOperator,
)
from quarantine.errors import RetriesExhaustedError


class FakeClock:
    """A monotonic clock that only moves when slept on; records every sleep."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"negative sleep {seconds}"
        self.sleeps.append(seconds)
        self.now += seconds

    def sleeps_ms(self) -> list[float]:
        return [round(s * 1000.0, 6) for s in self.sleeps]


class Flaky:
    """Fails ``failures`` times with ``exc_type`` then returns ``value``."""

    def __init__(self, failures: int, exc_type: type[Exception], value: str = "ok") -> None:
        self.failures = failures
        self.exc_type = exc_type
        self.value = value
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc_type(f"failure {self.calls}")
        return self.value


class ConcurrentAppendException(Exception):  # noqa: N818 (Delta's name)
    """Same simple name as Delta's: retriable by default."""


class MetadataChangedException(Exception):  # noqa: N818 (Delta's name)
    """Same simple name as Delta's: never retriable."""


class BoomError(Exception):
    pass


def _const(u: float) -> Callable[[], float]:
    return lambda: u


def _seq(values: list[float]) -> Callable[[], float]:
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def _op(
    clock: FakeClock,
    *,
    timeout: int = -1,
    initial: int = 100,
    mult: float = 2.0,
    max_ms: int = 1000,
    jitter: float = 0.0,
    tolerance: Tolerance = Tolerance.NONE,
    rng: Callable[[], float] | None = None,
    names: tuple[str, ...] = (),
) -> RetryWithToleranceOperator:
    policy = RetryPolicy(
        timeout_ms=timeout, initial_backoff_ms=initial, multiplier=mult, max_delay_ms=max_ms,
        jitter=jitter, retriable=RetriableClassifier.of(names),
    )
    return RetryWithToleranceOperator(policy, tolerance, clock, rng or _const(0.5))


def test_exact_exponential_backoff_sequence_without_jitter() -> None:
    clock = FakeClock()
    op = _op(clock, initial=100, mult=2.0, max_ms=1000)
    out = op.execute(Flaky(6, ConcurrentAppendException), name="merge")
    assert out.value == "ok" and not out.failed
    assert out.attempts == 7
    assert clock.sleeps_ms() == [100, 200, 400, 800, 1000, 1000]
    assert out.slept_ms == pytest.approx(3500)


def test_jitter_scales_each_delay_within_factor_and_is_capped_at_max() -> None:
    clock = FakeClock()
    # u=0 -> x0.8, u=1 -> x1.2 (capped at max), u=0.75 -> x1.1
    draws = _seq([0.0, 0.75, 0.999999, 0.0])
    op = _op(clock, initial=100, mult=3.0, max_ms=1000, jitter=0.2, rng=draws)
    op.execute(Flaky(4, ConcurrentAppendException))
    assert clock.sleeps_ms() == pytest.approx([80.0, 330.0, 1000.0, 800.0], abs=1e-3)


def test_exponent_is_capped_so_thousands_of_attempts_never_overflow() -> None:
    policy = RetryPolicy(
        timeout_ms=-1, initial_backoff_ms=1, multiplier=10.0, max_delay_ms=60_000, jitter=0.0
    )
    assert policy.exponent_cap == math.ceil(math.log10(60_000))
    assert policy.delay_ms(10_000, 0.5) == 60_000
    assert policy.delay_ms(10**9, 0.5) == 60_000
    clock = FakeClock()
    op = RetryWithToleranceOperator(policy, Tolerance.NONE, clock, _const(0.5))
    out = op.execute(Flaky(2000, ConcurrentAppendException))
    assert out.attempts == 2001
    assert max(clock.sleeps) == 60.0


def test_multiplier_one_gives_constant_delay() -> None:
    clock = FakeClock()
    _op(clock, initial=250, mult=1.0, max_ms=1000).execute(Flaky(3, ConcurrentAppendException))
    assert clock.sleeps_ms() == [250, 250, 250]


def test_never_sleeps_past_the_budget_and_attempts_once_more_at_the_deadline() -> None:
    clock = FakeClock(start=50.0)
    op = _op(clock, timeout=1000, initial=300, mult=2.0, max_ms=10_000)
    with pytest.raises(RetriesExhaustedError) as info:
        op.execute(Flaky(100, ConcurrentAppendException), name="quarantine merge")
    # 300 + 600 = 900 ms; the next 1200 ms is cut to the 100 ms left; then one last attempt
    assert clock.sleeps_ms() == pytest.approx([300.0, 600.0, 100.0])
    assert clock.now - 50.0 == pytest.approx(1.0)
    assert info.value.attempts == 4
    assert "quarantine merge" in str(info.value) and "4 attempt" in str(info.value)
    assert isinstance(info.value.__cause__, ConcurrentAppendException)


def test_timeout_zero_means_a_single_attempt() -> None:
    clock = FakeClock()
    flaky = Flaky(1, ConcurrentAppendException)
    with pytest.raises(RetriesExhaustedError):
        _op(clock, timeout=0).execute(flaky)
    assert flaky.calls == 1
    assert clock.sleeps == []


def test_non_retriable_failure_is_not_retried() -> None:
    clock = FakeClock()
    flaky = Flaky(1, BoomError)
    with pytest.raises(RetriesExhaustedError) as info:
        _op(clock).execute(flaky)
    assert flaky.calls == 1 and clock.sleeps == []
    assert info.value.attempts == 1


def test_delta_metadata_and_protocol_changes_are_never_retriable_even_if_listed() -> None:
    classify = RetriableClassifier.of(["MetadataChangedException", "Exception"])
    assert not classify(MetadataChangedException("schema changed"))
    assert classify(ConcurrentAppendException("files added"))


def test_delta_python_exceptions_classified() -> None:
    from delta.exceptions import (
        ConcurrentAppendException as DeltaAppend,
    )
    from delta.exceptions import (
        ConcurrentDeleteDeleteException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        ConcurrentWriteException,
        MetadataChangedException,
        ProtocolChangedException,
    )

    classify = RetriableClassifier.of([])
    for retriable in (
        DeltaAppend, ConcurrentDeleteReadException, ConcurrentDeleteDeleteException,
        ConcurrentTransactionException, ConcurrentWriteException,
    ):
        assert classify(retriable("conflict")), retriable.__name__
    for fatal in (MetadataChangedException, ProtocolChangedException):
        assert not classify(fatal("changed")), fatal.__name__


def test_configured_names_match_dotted_simple_and_cause_chain() -> None:
    classify = RetriableClassifier.of(["TimeoutError", f"{__name__}.BoomError"])
    assert classify(TimeoutError("slow"))
    assert classify(BoomError("x"))
    try:
        try:
            raise TimeoutError("inner")
        except TimeoutError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert classify(outer)
    assert not classify(ValueError("no"))


def test_predicate_makes_failures_retriable() -> None:
    clock = FakeClock()
    policy = RetryPolicy(
        timeout_ms=-1, initial_backoff_ms=10, max_delay_ms=100, jitter=0.0,
        retriable=RetriableClassifier.of([], lambda e: "try again" in str(e)),
    )
    calls = {"n": 0}

    def op() -> int:
        calls["n"] += 1
        if calls["n"] < 3:
            raise BoomError("please try again")
        return 42

    out = RetryWithToleranceOperator(policy, Tolerance.NONE, clock, _const(0.5)).execute(op)
    assert out.value == 42 and out.attempts == 3
    assert clock.sleeps_ms() == [10, 20]


def test_exhausted_retries_with_tolerance_all_return_the_error_to_quarantine_not_drop() -> None:
    clock = FakeClock()
    op = _op(clock, timeout=500, initial=100, tolerance=Tolerance.ALL)
    out = op.execute(Flaky(100, ConcurrentAppendException))
    assert out.failed and out.value is None
    assert isinstance(out.error, ConcurrentAppendException)
    assert out.retriable is True
    assert out.attempts == 4  # 100 + 200 + 200 (cut) = 500 ms, then the last attempt
    assert clock.sleeps_ms() == pytest.approx([100.0, 200.0, 200.0])


def test_exhausted_retries_with_tolerance_none_fail() -> None:
    with pytest.raises(RetriesExhaustedError):
        op = _op(FakeClock(), timeout=200, tolerance=Tolerance.NONE)
        op.execute(Flaky(100, ConcurrentAppendException))


def test_writes_never_tolerate_a_final_failure() -> None:
    op = _op(FakeClock(), timeout=200, tolerance=Tolerance.ALL)
    with pytest.raises(RetriesExhaustedError) as info:
        op.call(Flaky(100, ConcurrentAppendException), name="quarantine write")
    assert info.value.operation == "quarantine write"
    value, attempts = op.call(Flaky(2, ConcurrentAppendException), name="quarantine write")
    assert (value, attempts) == ("ok", 3)


def test_on_retry_sees_each_retry_with_its_delay() -> None:
    seen: list[tuple[str, int, str, float]] = []
    policy = RetryPolicy(
        timeout_ms=-1, initial_backoff_ms=5, multiplier=2.0, max_delay_ms=100, jitter=0.0
    )
    op = RetryWithToleranceOperator(
        policy, Tolerance.NONE, FakeClock(), _const(0.5),
        on_retry=lambda name, n, exc, d: seen.append((name, n, str(exc), d)),
    )
    op.execute(Flaky(2, ConcurrentAppendException), name="w")
    assert seen == [("w", 1, "failure 1", 5.0), ("w", 2, "failure 2", 10.0)]


def test_policy_from_config_takes_every_retry_key() -> None:
    cfg = ErrorsConfig.from_mapping(
        {
            "deadletterqueue.table.name": "/tmp/q",
            "retry.timeout": 30000,
            "retry.initial.backoff.ms": 50,
            "retry.backoff.multiplier": 1.5,
            "retry.delay.max.ms": 2000,
            "retry.jitter.factor": 0.1,
            "retry.retriable.exceptions": ["TimeoutError"],
        }
    )
    policy = RetryPolicy.from_config(cfg)
    got = (
        policy.timeout_ms, policy.initial_backoff_ms, policy.multiplier,
        policy.max_delay_ms, policy.jitter,
    )
    assert got == (30000, 50, 1.5, 2000, 0.1)
    assert policy.retriable(TimeoutError()) and policy.retriable(ConcurrentAppendException())
    assert not policy.retriable(ValueError())


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"initial_backoff_ms": 10, "max_delay_ms": 5}, "initial"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"timeout_ms": -2}, "timeout_ms"),
    ],
)
def test_hand_built_policy_is_validated(kwargs: dict[str, float], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_writes_retry_delta_conflicts_even_when_record_retries_are_off() -> None:
    cfg = ErrorsConfig.from_mapping({"deadletterqueue.table.name": "/tmp/q", "tolerance": "all"})
    assert cfg.retry_timeout_ms == 0
    clock = FakeClock()
    op = RetryWithToleranceOperator.for_writes(cfg, clock=clock, rng=_const(0.5))
    assert op.policy.timeout_ms == WRITE_RETRY_TIMEOUT_MS
    assert op.tolerance is Tolerance.NONE
    assert op.call(Flaky(3, ConcurrentAppendException), name="merge") == ("ok", 4)
    assert clock.sleeps_ms() == [300, 600, 1200]
    budget = ErrorsConfig.from_mapping({"deadletterqueue.table.name": "/tmp/q", "retry.timeout": 5})
    assert RetryWithToleranceOperator.for_writes(budget).policy.timeout_ms == 5


def test_unconverted_py4j_delta_conflicts_are_classified_from_the_java_class() -> None:
    classify = RetriableClassifier.of([])
    append = BoomError(
        "An error occurred while calling o2061.execute.\n"
        ": io.delta.exceptions.ConcurrentAppendException: [DELTA_CONCURRENT_APPEND.WITHOUT_HINT] "
        "Transaction conflict detected.\n\tat io.delta.exceptions.ConcurrentAppendException$.apply"
    )
    assert classify(append)
    metadata = BoomError(
        "An error occurred while calling o7.execute.\n"
        ": io.delta.exceptions.MetadataChangedException: [DELTA_METADATA_CHANGED] changed"
    )
    assert not classify(metadata)
    caused = BoomError(
        "An error occurred while calling o9.save.\n: org.apache.spark.SparkException: job failed\n"
        "Caused by: io.delta.exceptions.ConcurrentTransactionException: same txn"
    )
    assert classify(caused)
    assert not classify(BoomError("the word ConcurrentAppendException inside a sentence"))


def test_writes_retry_losing_the_table_creation_race() -> None:
    cfg = ErrorsConfig.from_mapping({"deadletterqueue.table.name": "/tmp/q"})
    op = RetryWithToleranceOperator.for_writes(cfg, clock=FakeClock(), rng=_const(0.5))
    race = BoomError(
        "[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table ... is not empty"
    )
    assert op.policy.retriable(race)
    assert not RetryPolicy.from_config(cfg).retriable(race)  # records: not a write concern


def test_infinite_retry_stops_when_the_job_is_stopped() -> None:
    """``errors.retry.timeout: -1`` retries until stopped (Kafka: until the task stops), not forever."""
    import threading
    import time

    from quarantine.errorhandling.retry import stop_retries

    policy = RetryPolicy.from_config(ErrorsConfig(dlq_table_name="q", retry_timeout_ms=-1, retry_delay_max_ms=50,
                                                  retry_initial_backoff_ms=10))
    stop = threading.Event()
    op = RetryWithToleranceOperator(policy, stop=stop)
    timer = threading.Timer(0.3, stop_retries, kwargs={"event": stop})
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="stopped"):
        op.call(Flaky(10**9, ConcurrentAppendException), name="write")
    assert time.monotonic() - t0 < 5


def test_a_max_delay_below_the_default_initial_backoff_is_accepted_as_kafka_does() -> None:
    from quarantine.config import parse_config

    raw = {
        "pipeline": "p", "source": {"format": "delta", "path": "/d/s"}, "target": {"table": "/d/t"},
        "errors": {"deadletterqueue.table.name": "/d/q", "retry.delay.max.ms": 100},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }
    errors = parse_config(raw).errors
    assert errors.retry_delay_max_ms == 100 and errors.retry_initial_backoff_ms == 100
    delays = [RetryPolicy.from_config(errors).delay_ms(i, 0.5) for i in range(5)]
    assert max(delays) <= 100


def test_an_exception_without_a_message_is_never_stored_as_the_text_none() -> None:
    from quarantine.errors import message_of

    assert message_of(ValueError(None)) == "ValueError raised with no message"
    assert message_of(ValueError()) == "ValueError raised with no message"
    assert message_of(ValueError("bad id")) == "bad id"
