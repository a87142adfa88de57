"""Per-kind handlers: built-ins, custom ones by dotted path, and fatal misbehaving handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from quarantine.columns import ErrorKind
from quarantine.config import ErrorsConfig
from quarantine.errorhandling.handlers import (
    ErrorHandlers,
    HandlerContext,
    HandlerResponse,
    counts_by_kind,
    load_handler,
)
from quarantine.errors import ConfigError, HandlerError, ToleranceExceededError

HERE = __name__
SECRET = "s3cr3t-Pa55"


class FailOverTen:
    """Fails only when a batch has more than ten errors of the kind; remembers contexts."""

    seen: list[HandlerContext] = []  # noqa: RUF012 (a test probe)

    def handle(self, context: HandlerContext) -> HandlerResponse:
        FailOverTen.seen.append(context)
        return HandlerResponse.FAIL if context.errors > 10 else HandlerResponse.LOG_AND_CONTINUE


class ReturnsNothing:
    def handle(self, context: HandlerContext) -> Any:
        return None


class ReturnsString:
    def handle(self, context: HandlerContext) -> Any:
        return "continue"


class Raises:
    def handle(self, context: HandlerContext) -> HandlerResponse:
        raise RuntimeError(f"lookup failed with password={SECRET}")


class NeedsArgs:
    def __init__(self, x: int) -> None:
        self.x = x

    def handle(self, context: HandlerContext) -> HandlerResponse:
        return HandlerResponse.CONTINUE


class NoHandle:
    pass


def _cfg(**kw: Any) -> ErrorsConfig:
    raw: dict[str, Any] = {"deadletterqueue.table.name": "/tmp/q"}
    raw.update(kw)
    return ErrorsConfig.from_mapping(raw)


def _decide(handlers: ErrorHandlers, counts: dict[ErrorKind, int], batch_id: int = 3) -> Any:
    return handlers.decide(counts, pipeline="orders", run_id="r1", batch_id=batch_id)


@pytest.mark.parametrize(
    ("spec", "response"),
    [
        ("continue", HandlerResponse.CONTINUE),
        ("fail", HandlerResponse.FAIL),
        ("log_and_continue", HandlerResponse.LOG_AND_CONTINUE),
    ],
)
def test_builtin_handlers(spec: str, response: HandlerResponse) -> None:
    ctx = HandlerContext("p", "r", 0, ErrorKind.DESERIALIZE, 1)
    assert load_handler(spec).handle(ctx) is response


def test_explicit_fail_fails_the_batch_naming_the_handler_key() -> None:
    handlers = ErrorHandlers.from_config(
        _cfg(tolerance="all", **{"handler.deserialize": "fail"})
    )
    decision = _decide(handlers, {ErrorKind.DESERIALIZE: 2, ErrorKind.TRANSFORM: 5})
    assert decision.failed_kinds == (ErrorKind.DESERIALIZE,)
    with pytest.raises(ToleranceExceededError) as info:
        decision.raise_for_failure()
    assert info.value.limit == "errors.handler.deserialize"
    assert info.value.count == 2 and info.value.window == "batch 3"


def test_explicit_continue_is_handled_even_under_tolerance_none() -> None:
    handlers = ErrorHandlers.from_config(_cfg(**{"handler.deserialize": "log_and_continue"}))
    decision = _decide(handlers, {ErrorKind.DESERIALIZE: 4, ErrorKind.VALIDATE: 1})
    decision.raise_for_failure()
    assert decision.handled_errors == 4  # validate defers to errors.tolerance
    assert decision.logged_kinds == frozenset({ErrorKind.DESERIALIZE})


def test_default_logs_every_kind_when_log_enable() -> None:
    handlers = ErrorHandlers.from_config(_cfg(tolerance="all", **{"log.enable": True}))
    decision = _decide(handlers, {ErrorKind.TRANSFORM: 1, ErrorKind.VALIDATE: 2})
    assert decision.logged_kinds == frozenset({ErrorKind.TRANSFORM, ErrorKind.VALIDATE})
    assert decision.handled_errors == 0


def test_kinds_without_errors_are_not_asked() -> None:
    FailOverTen.seen.clear()
    handlers = ErrorHandlers.from_config(_cfg(**{"handler.transform": f"{HERE}.FailOverTen"}))
    decision = _decide(handlers, {ErrorKind.TRANSFORM: 0})
    assert decision.responses == {}
    assert FailOverTen.seen == []


def test_custom_handler_by_dotted_path_sees_counts_and_decides() -> None:
    FailOverTen.seen.clear()
    handlers = ErrorHandlers.from_config(_cfg(**{"handler.transform": f"{HERE}.FailOverTen"}))
    ok = handlers.decide(
        {ErrorKind.TRANSFORM: 10, ErrorKind.DESERIALIZE: 1}, pipeline="orders", run_id="r1",
        batch_id=0, by_stage={"parse": 1, "enrich": 7, "score": 3},
        stage_kinds={
            "parse": ErrorKind.DESERIALIZE, "enrich": ErrorKind.TRANSFORM,
            "score": ErrorKind.TRANSFORM,
        },
    )
    assert ok.responses[ErrorKind.TRANSFORM] is HandlerResponse.LOG_AND_CONTINUE
    ctx = FailOverTen.seen[-1]
    assert (ctx.kind, ctx.errors, ctx.batch_errors) == (ErrorKind.TRANSFORM, 10, 11)
    assert ctx.errors_by_stage == {"enrich": 7, "score": 3}
    bad = _decide(handlers, {ErrorKind.TRANSFORM: 11})
    with pytest.raises(ToleranceExceededError, match=r"errors\.handler\.transform"):
        bad.raise_for_failure()


def test_handler_returning_nothing_is_fatal_with_a_clear_message() -> None:
    handlers = ErrorHandlers.from_config(_cfg(**{"handler.validate": f"{HERE}.ReturnsNothing"}))
    with pytest.raises(HandlerError) as info:
        _decide(handlers, {ErrorKind.VALIDATE: 2})
    msg = str(info.value)
    assert "errors.handler.validate" in msg and "ReturnsNothing" in msg
    assert "returned None" in msg and "expected a HandlerResponse" in msg


def test_handler_returning_a_plain_string_is_fatal() -> None:
    handlers = ErrorHandlers.from_config(_cfg(**{"handler.validate": f"{HERE}.ReturnsString"}))
    with pytest.raises(HandlerError, match=r"returned 'continue' \(str\)"):
        _decide(handlers, {ErrorKind.VALIDATE: 2})


def test_handler_that_raises_is_fatal_and_its_message_is_redacted() -> None:
    handlers = ErrorHandlers.from_config(
        _cfg(**{"handler.sink": f"{HERE}.Raises"}), secrets=(SECRET,)
    )
    with pytest.raises(HandlerError) as info:
        _decide(handlers, {ErrorKind.SINK: 1})
    msg = str(info.value)
    assert "raised RuntimeError" in msg and "errors.handler.sink" in msg
    assert SECRET not in msg and "[redacted]" in msg
    assert info.value.__cause__ is None  # the raw (secret-bearing) exception is not chained


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_such_module_xyz.Handler", "cannot import"),
        (f"{HERE}.Missing", "cannot import"),
        (f"{HERE}.NeedsArgs", "constructible without arguments"),
        (f"{HERE}.NoHandle", "no handle method"),
    ],
)
def test_unloadable_custom_handlers_fail_at_load_naming_the_key(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        ErrorHandlers.from_config(_cfg(**{"handler.transform": spec}))
    assert info.value.key == "errors.handler.transform"
    assert info.value.value == spec
    assert fragment in str(info.value)


def test_counts_by_kind_folds_stage_counts() -> None:
    @dataclass
    class S:
        name: str
        kind: ErrorKind

    t = ErrorKind.TRANSFORM
    stages = [S("a", ErrorKind.DESERIALIZE), S("b", t), S("c", t)]
    got = counts_by_kind(stages, {"a": 1, "b": 2, "c": 3, "expectation:x": 9})
    assert got == {ErrorKind.DESERIALIZE: 1, ErrorKind.TRANSFORM: 5}
