"""Retry with exponential backoff and jitter under a budget; then tolerance decides.

The shape is Kafka Connect's ``RetryWithToleranceOperator``: one place decides
whether a failed operation is retried, tolerated or fails the run. There are
three outcomes to executing an operation:

1. it succeeds (possibly after retries): :class:`RetryOutcome` with ``value``;
2. it fails for good and the failure is tolerated (``errors.tolerance=all``):
   :class:`RetryOutcome` with ``error`` — the caller must quarantine the record
   (it is never silently dropped, unlike Kafka's KAFKA-18073);
3. it fails for good and is not tolerated: :class:`~quarantine.errors.RetriesExhaustedError`
   is raised (the original exception is its ``__cause__``).

Writes (the quarantine MERGE, the target write, the metrics table) use
:meth:`RetryWithToleranceOperator.call`, which never tolerates: a write that
still fails after its retries fails the batch, and offsets are not committed.
A table write that must fail the run in words goes through :func:`retried_write`.

Backoff (KIP-1278's formula, with a symmetric jitter)::

    base(n)  = initial * multiplier ^ min(n, n_cap)     # n = retries so far, 0-based
    capped   = min(base(n), max_delay)
    delay    = min(capped * (1 + jitter * (2u - 1)), max_delay)    # u ∈ [0, 1)
    sleep    = min(delay, deadline - now)                # never past the budget

``n_cap`` is the first exponent at which ``base`` reaches ``max_delay``, so the
exponent never overflows however many attempts are made. ``errors.retry.timeout``
is the total budget per operation: ``0`` means one attempt and no retries,
``-1`` retry for ever. As in Connect, an attempt is made after the last sleep
even if it ends exactly at the deadline; no sleep starts after the deadline —
except that a retriable failure is always retried until ``min_attempts`` were
made. Writes set it (:data:`WRITE_MIN_ATTEMPTS`): a Delta commit conflict is
only detected when the write commits, so a write slower than the whole budget
(a big MERGE on a loaded cluster) would otherwise never be retried, and the
slowest writes are the ones most likely to conflict.

Which failures are retriable is the policy's :class:`~quarantine.errorhandling.retriable.RetriableClassifier`
(:mod:`quarantine.errorhandling.retriable`: Delta's commit conflicts, configured names, a predicate).

The clock and the random source are injected, so tests check exact backoff
sequences with a fake clock. Instances are immutable and thread safe as long
as the injected clock and random source are.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar

from quarantine.errorhandling.retriable import RetriableClassifier, is_table_creation_race
from quarantine.errorhandling.settings import ErrorsConfig, Tolerance
from quarantine.errors import RetriesExhaustedError, TableWriteError, describe_write_failure

__all__ = [
    "SYSTEM_CLOCK",
    "WRITE_MIN_ATTEMPTS",
    "WRITE_RETRY_TIMEOUT_MS",
    "Clock",
    "RetryOutcome",
    "RetryPolicy",
    "RetryWithToleranceOperator",
    "SystemClock",
    "retried_write",
    "stop_retries",
]

T = TypeVar("T")

#: The retry budget of table writes when ``errors.retry.timeout`` is 0 (see
#: :meth:`RetryWithToleranceOperator.for_writes`).
WRITE_RETRY_TIMEOUT_MS = 120_000

#: Attempts a table write always gets for a retriable failure, whatever the budget
#: left (a slow write's commit conflict is still retried).
WRITE_MIN_ATTEMPTS = 4


class Clock(Protocol):
    """Monotonic time and sleep, in seconds (injected so tests never really sleep)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``."""


class SystemClock:
    """The real clock: :func:`time.monotonic` and :func:`time.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()

#: Set when the process is stopping: every operator sharing it gives up instead of retrying.
_STOPPING = threading.Event()


def stop_retries(event: threading.Event | None = None) -> None:
    """Make retries give up: the next failure (or the current backoff) ends the retrying.

    What Kafka Connect does when a task is stopped (its operator's ``triggerStop``):
    an ``errors.retry.timeout: -1`` (retry forever) operation stops retrying, its
    last failure is raised as :class:`RetriesExhaustedError` ("stopped"), and the
    batch fails before committing. The CLI calls this on SIGTERM; a notebook may call
    it from another thread. ``event``: an operator's own ``stop`` event (default:
    the process-wide one every operator uses unless given another).
    """
    (event or _STOPPING).set()


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often to retry; built from :class:`ErrorsConfig`.

    Attributes:
        timeout_ms: total budget per operation; 0 no retries, -1 for ever.
        initial_backoff_ms: the first delay.
        multiplier: growth per retry (≥ 1).
        max_delay_ms: the largest single delay.
        jitter: each delay is scaled by a factor in ``[1 - jitter, 1 + jitter]``.
        retriable: which failures are retried.
        min_attempts: a retriable failure is retried until this many attempts were
            made, even past the budget (never when ``timeout_ms`` is 0).
    """

    timeout_ms: int = 0
    initial_backoff_ms: int = 300
    multiplier: float = 2.0
    max_delay_ms: int = 60_000
    jitter: float = 0.2
    retriable: RetriableClassifier = field(default_factory=RetriableClassifier)
    min_attempts: int = 1

    def __post_init__(self) -> None:
        # ErrorsConfig already validated these; a policy built by hand is checked too.
        if self.timeout_ms < -1:
            raise ValueError(f"timeout_ms: expected 0, -1 or a budget > 0, found {self.timeout_ms}")
        if not 0 <= self.initial_backoff_ms <= self.max_delay_ms:
            raise ValueError(
                f"backoff: expected 0 ≤ initial ({self.initial_backoff_ms}) "
                f"≤ max ({self.max_delay_ms})"
            )
        if self.multiplier < 1.0:
            raise ValueError(f"multiplier: expected ≥ 1, found {self.multiplier}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter: expected a factor in [0, 1], found {self.jitter}")
        if self.min_attempts < 1:
            raise ValueError(f"min_attempts: expected ≥ 1, found {self.min_attempts}")

    @classmethod
    def from_config(
        cls, errors: ErrorsConfig, predicate: Callable[[BaseException], bool] | None = None
    ) -> RetryPolicy:
        """The policy of the ``errors.retry.*`` keys (plus an optional retriable predicate)."""
        return cls(
            timeout_ms=errors.retry_timeout_ms,
            initial_backoff_ms=errors.retry_initial_backoff_ms,
            multiplier=errors.retry_backoff_multiplier,
            max_delay_ms=errors.retry_delay_max_ms,
            jitter=errors.retry_jitter_factor,
            retriable=RetriableClassifier.of(errors.retry_retriable, predicate),
        )

    @property
    def exponent_cap(self) -> int:
        """The largest exponent ever used: the first at which the delay reaches the max."""
        if self.multiplier <= 1.0 or self.initial_backoff_ms <= 0:
            return 0
        if self.max_delay_ms <= self.initial_backoff_ms:
            return 0
        ratio = self.max_delay_ms / self.initial_backoff_ms
        return math.ceil(math.log(ratio) / math.log(self.multiplier))

    def delay_ms(self, retry: int, u: float) -> float:
        """The delay before retry number ``retry`` (0-based), for a uniform draw ``u`` in [0, 1).

        Pure: no clock, no budget (see :meth:`RetryWithToleranceOperator.execute`).
        """
        n = min(max(retry, 0), self.exponent_cap)
        capped = min(self.initial_backoff_ms * self.multiplier**n, float(self.max_delay_ms))
        return min(capped * (1.0 + self.jitter * (2.0 * u - 1.0)), float(self.max_delay_ms))

    @property
    def retries_enabled(self) -> bool:
        return self.timeout_ms != 0


@dataclass(frozen=True)
class RetryOutcome(Generic[T]):
    """What executing an operation came to (when it did not raise).

    Exactly one of ``value`` (success) and ``error`` (a tolerated failure the
    caller must quarantine) is meaningful; ``failed`` tells which.

    Attributes:
        value: the operation's result (None when it failed).
        error: the last exception of a tolerated failure, else None.
        attempts: how many times the operation ran (≥ 1).
        retriable: whether the last failure was retriable (False on success).
        slept_ms: total backoff slept, in milliseconds.
    """

    value: T | None
    error: BaseException | None
    attempts: int
    retriable: bool = False
    slept_ms: float = 0.0

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass(frozen=True)
class RetryWithToleranceOperator:
    """Executes operations, retrying retriable failures; tolerance decides what is left.

    Attributes:
        policy: budget, backoff and what is retriable.
        tolerance: ``all`` turns a final failure into a tolerated outcome
            (to quarantine); ``none`` raises it.
        clock: monotonic time and sleep (injected).
        rng: a uniform random source in [0, 1) for the jitter (injected).
        on_retry: called before each backoff sleep with
            ``(operation name, retry number from 1, the exception, delay ms)``
            (metrics: ``total-retries``; logs).
    """

    policy: RetryPolicy
    tolerance: Tolerance = Tolerance.NONE
    clock: Clock = SYSTEM_CLOCK
    rng: Callable[[], float] = random.random
    on_retry: Callable[[str, int, BaseException, float], None] | None = None
    stop: threading.Event = _STOPPING

    @classmethod
    def from_config(
        cls,
        errors: ErrorsConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: Callable[[], float] = random.random,
        predicate: Callable[[BaseException], bool] | None = None,
        on_retry: Callable[[str, int, BaseException, float], None] | None = None,
    ) -> RetryWithToleranceOperator:
        """The operator for a pipeline's ``errors.*`` config."""
        policy = RetryPolicy.from_config(errors, predicate)
        return cls(policy, errors.tolerance, clock, rng, on_retry)

    @classmethod
    def for_writes(
        cls,
        errors: ErrorsConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: Callable[[], float] = random.random,
        on_retry: Callable[[str, int, BaseException, float], None] | None = None,
    ) -> RetryWithToleranceOperator:
        """The operator for the batch's table writes (quarantine, target, metrics).

        Same backoff keys, but ``errors.retry.timeout=0`` (no retries of records,
        the default) still gives writes :data:`WRITE_RETRY_TIMEOUT_MS` for Delta
        commit conflicts: re-running an idempotent write is always safe, and two
        pipelines sharing one quarantine table must both succeed. Losing the race
        to create a table is retriable too (:func:`~quarantine.errorhandling.retriable.is_table_creation_race`). A
        retriable failure gets :data:`WRITE_MIN_ATTEMPTS` attempts even when one
        slow attempt used up the budget. Writes never tolerate a final failure
        (use :meth:`call`).
        """
        policy = RetryPolicy.from_config(errors, is_table_creation_race)
        if policy.timeout_ms == 0:
            policy = replace(policy, timeout_ms=WRITE_RETRY_TIMEOUT_MS)
        policy = replace(policy, min_attempts=max(policy.min_attempts, WRITE_MIN_ATTEMPTS))
        return cls(policy, Tolerance.NONE, clock, rng, on_retry)

    def execute(self, operation: Callable[[], T], *, name: str = "operation") -> RetryOutcome[T]:
        """Run ``operation``, retrying retriable failures within the budget.

        Returns:
            A success, or — under ``errors.tolerance=all`` — a tolerated failure
            whose ``error`` the caller must quarantine.

        Raises:
            RetriesExhaustedError: the operation failed for good and tolerance is
                ``none`` (the last exception is chained as ``__cause__``).
        """
        outcome = self._attempt(operation, name)
        if outcome.failed and self.tolerance is not Tolerance.ALL:
            assert outcome.error is not None
            raise RetriesExhaustedError(self._named(name), outcome.attempts, outcome.error) from outcome.error
        return outcome

    def call(self, operation: Callable[[], T], *, name: str = "operation") -> tuple[T, int]:
        """Run a write: retry retriable failures, never tolerate a final one.

        Returns:
            ``(result, attempts)``.

        Raises:
            RetriesExhaustedError: still failing after the budget (or not retriable);
                the last exception is chained as ``__cause__``.
        """
        outcome = self._attempt(operation, name)
        if outcome.failed:
            assert outcome.error is not None
            raise RetriesExhaustedError(self._named(name), outcome.attempts, outcome.error) from outcome.error
        return outcome.value, outcome.attempts  # type: ignore[return-value]

    def _named(self, name: str) -> str:
        return f"{name} (stopped: retries end when the job stops)" if self.stop.is_set() else name

    def _attempt(self, operation: Callable[[], T], name: str) -> RetryOutcome[T]:
        p = self.policy
        start = self.clock.monotonic()
        deadline = None if p.timeout_ms < 0 else start + p.timeout_ms / 1000.0
        attempts = 0
        slept = 0.0
        while True:
            attempts += 1
            try:
                value = operation()
            except Exception as exc:
                retriable = p.retriable(exc)
                now = self.clock.monotonic()
                out_of_budget = (
                    deadline is not None and now >= deadline and attempts >= p.min_attempts
                )
                if not retriable or not p.retries_enabled or out_of_budget or self.stop.is_set():
                    return RetryOutcome(None, exc, attempts, retriable, slept)
                delay = p.delay_ms(attempts - 1, self.rng())
                if deadline is not None and now < deadline:
                    delay = min(delay, (deadline - now) * 1000.0)
                if self.on_retry is not None:
                    self.on_retry(name, attempts, exc, delay)
                if self.clock is SYSTEM_CLOCK:
                    self.stop.wait(delay / 1000.0)  # a stop ends the backoff at once
                else:
                    self.clock.sleep(delay / 1000.0)
                slept += delay
                if self.stop.is_set():
                    return RetryOutcome(None, exc, attempts, retriable, slept)
                continue
            return RetryOutcome(value, None, attempts, False, slept)


def retried_write(
    retry: RetryWithToleranceOperator, action: str, table: str, batch_id: int, write: Callable[[], None],
    *, failure: type[TableWriteError] = TableWriteError,
) -> int:
    """Run a table write (safe to re-run) under the write operator ``retry``: every table write's one way.

    Returns the attempts made. A write that still fails raises ``failure``
    (:class:`~quarantine.errors.QuarantineWriteError` for the quarantine table) whose message
    names ``action``, ``table``, ``batch_id``, Delta's/Spark's reason in one line and what to
    do (:func:`~quarantine.errors.describe_write_failure`); the Java stack stays on ``__cause__``.
    """
    try:
        _, attempts = retry.call(write, name=f"{action} into {table}")
    except RetriesExhaustedError as exc:
        raise failure(
            describe_write_failure(exc.last, action=action, table=table, batch_id=batch_id, attempts=exc.attempts),
            attempts=exc.attempts,
        ) from exc.last
    return attempts
