"""Per-kind error handlers: continue, fail, or log and continue (Kafka Streams' shape).

Kafka Streams asks a handler about each failed record (``LogAndContinue``,
``LogAndFail``, KIP-161/KIP-1033). Here the data path stays vectorised: a
handler is asked once per batch per error kind that had errors, with the
kind's observed count, and its answer applies to all of that kind's records
in the batch:

* ``continue`` — the records stay in the quarantine table; the run goes on.
* ``log_and_continue`` — the same, plus an error-context log line for a bounded
  sample of the records (:mod:`quarantine.listeners.error_log`).
* ``fail`` — the run fails after the batch's quarantine rows are durable;
  the batch's good rows and offsets are not committed.

Records are quarantined whatever the handler says: a handler decides whether
the run goes on, never whether a record is kept.

Configuration: ``errors.handler.<kind>`` (``deserialize``, ``transform``,
``validate``, ``expectation``, ``sink``) is ``continue`` | ``fail`` |
``log_and_continue`` or the dotted path of a class (``pkg.module.Class``) whose
no-argument instances have ``handle(context: HandlerContext) -> HandlerResponse``.
A kind without an explicit handler defers to ``errors.tolerance`` (the
:class:`~quarantine.errorhandling.tolerance.ToleranceGuard` decides) and is logged when
``errors.log.enable`` is on. An explicit ``continue`` / ``log_and_continue``
tolerates its kind even under ``errors.tolerance=none``; the count and rate
limits still count those errors.

A custom handler that raises, or returns anything but a :class:`HandlerResponse`
(``None`` included), is a fatal :class:`~quarantine.errors.HandlerError`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from quarantine.columns import ErrorKind
from quarantine.errorhandling.settings import ErrorsConfig, HandlerResponse
from quarantine.errors import ConfigError, HandlerError, ToleranceExceededError
from quarantine.redaction import redact_text

__all__ = [
    "BUILTIN_HANDLERS",
    "BatchDecision",
    "ContinueHandler",
    "ErrorHandler",
    "ErrorHandlers",
    "FailHandler",
    "HandlerContext",
    "HandlerResponse",
    "LogAndContinueHandler",
    "counts_by_kind",
    "load_handler",
]


@dataclass(frozen=True)
class HandlerContext:
    """What a handler sees: one error kind's failures in one batch.

    Attributes:
        pipeline: the pipeline's name.
        run_id: the run.
        batch_id: the micro-batch.
        kind: the error kind being decided.
        errors: records of this kind that failed in the batch (> 0).
        errors_by_stage: the same count split by failing stage.
        batch_errors: all failed records of the batch, every kind.
    """

    pipeline: str
    run_id: str
    batch_id: int
    kind: ErrorKind
    errors: int
    errors_by_stage: Mapping[str, int] = field(default_factory=dict)
    batch_errors: int = 0


class ErrorHandler(Protocol):
    """A handler: one decision per batch per kind with errors."""

    def handle(self, context: HandlerContext) -> HandlerResponse:
        """Decide what the run does about ``context.errors`` failures of ``context.kind``."""


class ContinueHandler:
    """Keep going (the records are quarantined)."""

    def handle(self, context: HandlerContext) -> HandlerResponse:
        return HandlerResponse.CONTINUE


class LogAndContinueHandler:
    """Log the errors' context, keep going (Kafka Streams' ``LogAndContinueExceptionHandler``)."""

    def handle(self, context: HandlerContext) -> HandlerResponse:
        return HandlerResponse.LOG_AND_CONTINUE


class FailHandler:
    """Fail the run after the records are quarantined (``LogAndFailExceptionHandler``)."""

    def handle(self, context: HandlerContext) -> HandlerResponse:
        return HandlerResponse.FAIL


#: The handlers named in config by their response.
BUILTIN_HANDLERS: Mapping[str, type[ContinueHandler | LogAndContinueHandler | FailHandler]] = {
    HandlerResponse.CONTINUE.value: ContinueHandler,
    HandlerResponse.LOG_AND_CONTINUE.value: LogAndContinueHandler,
    HandlerResponse.FAIL.value: FailHandler,
}


def load_handler(spec: str, key: str = "errors.handler") -> ErrorHandler:
    """A built-in handler by name, or a custom one by dotted path (``pkg.mod.Class``).

    Raises:
        ConfigError: naming ``key``, when the path cannot be imported, is not a
            class or object with a ``handle`` method, or cannot be instantiated.
    """
    if spec in BUILTIN_HANDLERS:
        return BUILTIN_HANDLERS[spec]()
    allowed = "continue | fail | log_and_continue | the dotted path of a class with handle(context)"
    module_name, sep, attr = spec.replace(":", ".").rpartition(".")
    if not sep or not module_name or not attr:
        raise ConfigError(key, spec, allowed)
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(key, spec, f"{allowed} (cannot import it: {exc})") from None
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise ConfigError(
                key, spec, f"a handler class constructible without arguments ({exc})"
            ) from None
    if not callable(getattr(target, "handle", None)):
        raise ConfigError(key, spec, f"{allowed} (it has no handle method)")
    handler: ErrorHandler = target
    return handler


class _StageLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> ErrorKind: ...


def counts_by_kind(
    stages: Iterable[_StageLike], by_stage: Mapping[str, int]
) -> dict[ErrorKind, int]:
    """Failed records per kind, from the per-stage counts the data pass observed.

    Counts of names that are not stages (e.g. an expectation hook's) are ignored.
    """
    out: dict[ErrorKind, int] = {}
    for s in stages:
        n = int(by_stage.get(s.name, 0))
        if n:
            out[s.kind] = out.get(s.kind, 0) + n
    return out


@dataclass(frozen=True)
class BatchDecision:
    """The handlers' answers for one batch.

    Attributes:
        batch_id: the micro-batch.
        responses: the response per kind that had errors.
        counts: errors per kind.
        explicit: kinds whose response came from an explicit ``errors.handler.<kind>``.
    """

    batch_id: int
    responses: Mapping[ErrorKind, HandlerResponse]
    counts: Mapping[ErrorKind, int]
    explicit: frozenset[ErrorKind] = frozenset()

    @property
    def failed_kinds(self) -> tuple[ErrorKind, ...]:
        return tuple(k for k, r in self.responses.items() if not r.continues)

    @property
    def logged_kinds(self) -> frozenset[ErrorKind]:
        """Kinds whose records get error-context log lines."""
        return frozenset(k for k, r in self.responses.items() if r.logs)

    @property
    def handled_errors(self) -> int:
        """Errors an explicit handler chose to continue (exempt from ``errors.tolerance=none``)."""
        return sum(
            self.counts[k] for k, r in self.responses.items() if r.continues and k in self.explicit
        )

    def raise_for_failure(self) -> None:
        """Raise if a handler said ``fail`` for any kind.

        Raises:
            ToleranceExceededError: ``limit`` is ``errors.handler.<kind>``.
        """
        failed = self.failed_kinds
        if not failed:
            return
        kind = failed[0]
        count = sum(self.counts[k] for k in failed)
        kinds = ", ".join(f"{k.value} ({self.counts[k]})" for k in failed)
        raise ToleranceExceededError(
            f"errors.handler.{kind.value}=fail: {kinds} record(s) failed in batch "
            f"{self.batch_id}; they are in the quarantine table; the batch's good rows and "
            "offsets were not committed",
            limit=f"errors.handler.{kind.value}", count=count, window=f"batch {self.batch_id}",
        )


@dataclass(frozen=True)
class ErrorHandlers:
    """The handler of every error kind, loaded and validated when built.

    Attributes:
        explicit: handlers configured with ``errors.handler.<kind>``.
        specs: the configured names/paths (for messages).
        default: the response of kinds without an explicit handler.
        secrets: values scrubbed from handler error messages.
    """

    explicit: Mapping[ErrorKind, ErrorHandler]
    specs: Mapping[ErrorKind, str]
    default: HandlerResponse = HandlerResponse.CONTINUE
    secrets: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, errors: ErrorsConfig, secrets: tuple[str, ...] = ()) -> ErrorHandlers:
        """Load ``errors.handler.*``; the default logs when ``errors.log.enable``.

        Raises:
            ConfigError: a handler cannot be loaded (naming ``errors.handler.<kind>``).
        """
        explicit: dict[ErrorKind, ErrorHandler] = {}
        specs: dict[ErrorKind, str] = {}
        for kind_name, spec in errors.handlers.items():
            key = f"errors.handler.{kind_name}"
            try:
                kind = ErrorKind(kind_name)
            except ValueError:
                allowed = " | ".join(k.value for k in ErrorKind)
                raise ConfigError(key, spec, f"a handler for one of the kinds {allowed}") from None
            explicit[kind] = load_handler(spec, key)
            specs[kind] = spec
        default = (
            HandlerResponse.LOG_AND_CONTINUE if errors.log_enable else HandlerResponse.CONTINUE
        )
        return cls(explicit, specs, default, secrets)

    @property
    def may_fail(self) -> bool:
        """Whether some handler could answer ``fail`` (or raise): any explicit one but the built-in continues."""
        return any(not isinstance(h, (ContinueHandler, LogAndContinueHandler)) for h in self.explicit.values())

    def decide(
        self,
        counts: Mapping[ErrorKind, int],
        *,
        pipeline: str,
        run_id: str,
        batch_id: int,
        by_stage: Mapping[str, int] | None = None,
        stage_kinds: Mapping[str, ErrorKind] | None = None,
    ) -> BatchDecision:
        """Ask each kind's handler about the batch's errors of that kind.

        Args:
            counts: failed records per kind (kinds with 0 are skipped).
            pipeline: the pipeline's name.
            run_id: the run.
            batch_id: the micro-batch.
            by_stage: failed records per stage (passed on to handlers).
            stage_kinds: each stage's kind (to split ``by_stage`` per kind).

        Raises:
            HandlerError: a custom handler raised or returned something other
                than a :class:`HandlerResponse`.
        """
        total = sum(counts.values())
        responses: dict[ErrorKind, HandlerResponse] = {}
        for kind, n in counts.items():
            if n <= 0:
                continue
            handler = self.explicit.get(kind)
            if handler is None:
                responses[kind] = self.default
                continue
            stages = {
                s: c for s, c in (by_stage or {}).items()
                if c and (stage_kinds or {}).get(s) is kind
            }
            ctx = HandlerContext(pipeline, run_id, batch_id, kind, n, stages, total)
            responses[kind] = self._ask(handler, kind, ctx)
        explicit = frozenset(k for k in responses if k in self.explicit)
        return BatchDecision(batch_id, responses, dict(counts), explicit)

    def _ask(self, handler: ErrorHandler, kind: ErrorKind, ctx: HandlerContext) -> HandlerResponse:
        where = f"errors.handler.{kind.value} ({self.specs.get(kind, type(handler).__name__)})"
        try:
            response = handler.handle(ctx)
        except Exception as exc:
            msg = self._scrub(f"{type(exc).__name__}: {exc}")
            raise HandlerError(
                f"{where} raised {msg} while handling {ctx.errors} {kind.value} error(s) in batch "
                f"{ctx.batch_id}; expected it to return a HandlerResponse "
                "(continue | fail | log_and_continue). The run stops; the records are quarantined."
            ) from None
        if not isinstance(response, HandlerResponse):
            found = self._scrub(repr(response))
            raise HandlerError(
                f"{where} returned {found} ({type(response).__name__}) for {ctx.errors} "
                f"{kind.value} error(s) in batch {ctx.batch_id}; expected a HandlerResponse "
                "(continue | fail | log_and_continue). The run stops; the records are quarantined."
            )
        return response

    def _scrub(self, text: str) -> str:
        out = redact_text(text, self.secrets)
        return out if len(out) <= 500 else out[:500] + "…"

