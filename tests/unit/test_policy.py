"""The error policy: one verdict for a batch's errors, by scope (run, sink, replay)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from quarantine.columns import ErrorKind
from quarantine.config import ErrorsConfig
from quarantine.errorhandling.handlers import ErrorHandlers
from quarantine.errorhandling.policy import ErrorPolicy, Scope
from quarantine.errorhandling.tolerance import MemoryWindowStore, ToleranceGuard
from quarantine.errors import ToleranceExceededError

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _policy(**kw: Any) -> ErrorPolicy:
    cfg = ErrorsConfig.from_mapping({"deadletterqueue.table.name": "/tmp/q", **kw})
    store = MemoryWindowStore() if cfg.tolerance_rate_limit >= 0 else None
    return ErrorPolicy(cfg, "orders", ErrorHandlers.from_config(cfg), window_store=store)


#: one run per policy; the policy is kept alive with its guard so that its id is never reused
_GUARDS: dict[int, tuple[ErrorPolicy, ToleranceGuard]] = {}


def _verdict(policy: ErrorPolicy, scope: Scope, n: int, kind: ErrorKind = ErrorKind.TRANSFORM,
             batch_id: int = 0) -> None:
    decision = policy.decide({kind: n}, run_id="r1", batch_id=batch_id)
    _, guard = _GUARDS.setdefault(id(policy), (policy, policy.tolerance("r1")))
    policy.enforce(decision, scope=scope, errors=n, now=T0, batch_id=batch_id, tolerance=guard)


def test_tolerance_none_fails_a_run_and_a_sink_on_the_first_error() -> None:
    for scope in (Scope.RUN, Scope.SINK):
        with pytest.raises(ToleranceExceededError) as info:
            _verdict(_policy(tolerance="none"), scope, 1)
        assert info.value.limit == "errors.tolerance" and info.value.count == 1


def test_a_replay_is_never_failed_by_handlers_tolerance_or_limits() -> None:
    policy = _policy(tolerance="none", **{"handler.transform": "fail", "tolerance.limit": 0})
    _verdict(policy, Scope.REPLAY, 5)


def test_a_fail_handler_fails_the_run_and_names_its_key() -> None:
    with pytest.raises(ToleranceExceededError) as info:
        _verdict(_policy(tolerance="all", **{"handler.sink": "fail"}), Scope.SINK, 2, ErrorKind.SINK)
    assert info.value.limit == "errors.handler.sink" and info.value.count == 2


def test_an_explicit_continue_handler_exempts_its_errors_from_tolerance_none() -> None:
    _verdict(_policy(tolerance="none", **{"handler.sink": "continue"}), Scope.SINK, 3, ErrorKind.SINK)


def test_the_runs_count_limit_applies_to_a_run_not_to_reported_sink_records() -> None:
    policy = _policy(tolerance="all", **{"tolerance.limit": 2})
    _verdict(policy, Scope.SINK, 5, ErrorKind.SINK)  # a sink's rejects are not the run's count
    _verdict(policy, Scope.RUN, 2, batch_id=1)
    with pytest.raises(ToleranceExceededError) as info:
        _verdict(policy, Scope.RUN, 1, batch_id=2)
    assert info.value.limit == "errors.tolerance.limit" and info.value.count == 3


def test_a_new_run_starts_a_new_count() -> None:
    """The policy holds no run state: each run's guard counts that run's errors only."""
    policy = _policy(tolerance="all", **{"tolerance.limit": 2})
    a, b = policy.tolerance("a"), policy.tolerance("b")
    policy.enforce(policy.decide({ErrorKind.TRANSFORM: 2}, run_id="a", batch_id=0),
                   scope=Scope.RUN, errors=2, now=T0, batch_id=0, tolerance=a)
    policy.enforce(policy.decide({ErrorKind.TRANSFORM: 2}, run_id="b", batch_id=0),
                   scope=Scope.RUN, errors=2, now=T0, batch_id=0, tolerance=b)
    with pytest.raises(ToleranceExceededError):
        policy.enforce(policy.decide({ErrorKind.TRANSFORM: 1}, run_id="a", batch_id=1),
                       scope=Scope.RUN, errors=1, now=T0, batch_id=1, tolerance=a)


def test_a_runs_batch_without_its_guard_is_a_programming_error() -> None:
    policy = _policy(tolerance="all")
    with pytest.raises(ValueError, match="tolerance guard"):
        policy.enforce(policy.decide({ErrorKind.TRANSFORM: 1}, run_id="a", batch_id=0),
                       scope=Scope.RUN, errors=1, now=T0, batch_id=0)



@pytest.mark.parametrize(
    ("settings", "scope", "may_stop"),
    [
        ({"tolerance": "all"}, Scope.RUN, False),
        ({"tolerance": "all", "handler.transform": "continue", "handler.deserialize": "log_and_continue"},
         Scope.RUN, False),
        ({"tolerance": "none"}, Scope.RUN, True),  # Kafka's default
        ({"tolerance": "none"}, Scope.SINK, True),
        ({"tolerance": "none"}, Scope.REPLAY, False),
        ({"tolerance": "all", "tolerance.limit": "1000000"}, Scope.RUN, True),
        ({"tolerance": "all", "tolerance.limit": "1000000"}, Scope.SINK, False),  # limits count a run's reads
        ({"tolerance": "all", "tolerance.rate.limit": "5"}, Scope.RUN, True),
        ({"tolerance": "all", "handler.transform": "fail"}, Scope.RUN, True),
        ({"tolerance": "all", "handler.transform": "fail"}, Scope.SINK, True),
        ({"tolerance": "all", "tolerance.limit": "0", "handler.transform": "fail"}, Scope.REPLAY, False),
    ],
)
def test_may_stop_is_false_exactly_where_no_count_of_errors_fails_the_batch(
    settings: dict[str, str], scope: Scope, may_stop: bool
) -> None:
    """The runner writes a batch before it counts it only when may_stop is False (quarantine.batch.run)."""
    assert _policy(**settings).may_stop(scope) is may_stop
    if may_stop:
        with pytest.raises(ToleranceExceededError):
            _verdict(_policy(**settings), scope, 10**7)
    else:
        _verdict(_policy(**settings), scope, 10**7)  # returns, whatever the count


def test_a_custom_handler_may_stop_a_batch_whatever_it_answers_today() -> None:
    """Its answer depends on the batch (and it may raise), so it is asked before anything is written."""
    policy = _policy(**{"tolerance": "all", "handler.transform": "tests.canary.CanaryHandler"})
    assert policy.may_stop(Scope.RUN) and policy.may_stop(Scope.SINK)
    assert not policy.may_stop(Scope.REPLAY)
