"""One exception root for everything quarantine raises.

Messages say what was expected and what was found, and name the config key,
stage or table involved, so a data engineer can fix the cause from the message.
"""

from __future__ import annotations

from quarantine.redaction import redact, redact_text

__all__ = [
    "ConfigError",
    "ExpectationBreachError",
    "HandlerError",
    "QuarantineError",
    "QuarantineWriteError",
    "RetriesExhaustedError",
    "SourceError",
    "StageDefinitionError",
    "ToleranceExceededError",
]


class QuarantineError(Exception):
    """Root of every exception raised by this package."""


class ConfigError(QuarantineError):
    """A config key is unknown, a value is not allowed, or settings contradict.

    Raised when the config is loaded, before any data is read or written. The
    message shows the value redacted (a value under a secret-looking key, a
    password in a URI or a YAML snippet is ``[redacted]``); ``value`` keeps it as given.
    """

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        shown = redact(value, key)
        super().__init__(f"config key '{key}': got {shown!r}; expected {redact_text(allowed)}")


class StageDefinitionError(QuarantineError):
    """A stage is declared wrongly (unknown type, missing input, bad option)."""


class SourceError(QuarantineError):
    """The source does not have the shape of Spark's Kafka source, or is the quarantine table."""


class ToleranceExceededError(QuarantineError):
    """The run saw more errors than the configured tolerance allows.

    Raised after the batch's quarantine rows are durable and before its good rows
    and offsets are committed.
    """

    def __init__(self, message: str, *, limit: str = "", count: int = 0, window: str = "") -> None:
        self.limit = limit
        self.count = count
        self.window = window
        super().__init__(message)


class RetriesExhaustedError(QuarantineError):
    """A retriable operation kept failing until its retry budget ran out."""

    def __init__(self, operation: str, attempts: int, last: BaseException) -> None:
        self.operation = operation
        self.attempts = attempts
        self.last = last
        super().__init__(
            f"{operation}: still failing after {attempts} attempt(s); last error "
            f"{type(last).__name__}: {last}"
        )


class HandlerError(QuarantineError):
    """A handler raised or returned something other than a HandlerResponse."""


class QuarantineWriteError(QuarantineError):
    """Writing the quarantine table failed after retries; the batch is not committed."""


class ExpectationBreachError(ToleranceExceededError):
    """A GX expectation with ``on_breach: fail`` failed on a batch.

    Raised after the batch's quarantine rows are durable and before its good
    rows and offsets are committed. ``breaches`` holds the
    :class:`quarantine.report.Breach` es (with GX's result JSON) for listeners.
    """

    def __init__(self, message: str, *, breaches: tuple[object, ...] = (), count: int = 0) -> None:
        self.breaches = breaches
        super().__init__(message, limit="expectation on_breach=fail", count=count, window="batch")
