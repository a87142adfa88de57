"""One exception root for everything quarantine raises.

Messages say what was expected and what was found, and name the config key,
stage or table involved, so a data engineer can fix the cause from the message.
"""

from __future__ import annotations

import re

from quarantine.redaction import redact, redact_text

__all__ = [
    "ConfigError",
    "CoordinatesReusedError",
    "ExpectationBreachError",
    "HandlerError",
    "InconsistentBatchError",
    "MissingDependencyError",
    "QuarantineError",
    "QuarantineWriteError",
    "RetriesExhaustedError",
    "SchemaMismatchError",
    "SourceError",
    "StageDefinitionError",
    "TableWriteError",
    "TablesDisagreeError",
    "ToleranceExceededError",
    "describe_failure",
    "describe_write_failure",
    "message_of",
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


class MissingDependencyError(QuarantineError):
    """An optional dependency a command needs is not installed; the message ends with the
    exact ``pip install`` line (an extra of ``spark-quarantine``). The command line exits 3.

    Attributes:
        extra: the extra that installs it (``report``, ``connect``, ``local``).
    """

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(f"{message}: pip install 'spark-quarantine[{extra}]'")
        self.extra = extra


class StageDefinitionError(QuarantineError):
    """A stage is declared wrongly (unknown type, missing input, bad option)."""


class SourceError(QuarantineError):
    """The source does not have the shape of Spark's Kafka source, or is the quarantine table."""


class CoordinatesReusedError(SourceError):
    """A record's coordinates are held by an earlier record with other content, and
    ``errors.coordinates.reused`` is ``fail``: raised before anything is written."""


class SchemaMismatchError(QuarantineError):
    """The pipeline's output does not fit the target table's schema (a field retyped, or a new
    field under ``target.schema_evolution: fail``): raised before any write of the run.

    The message is one line naming the table, the column (a nested field by its dotted path),
    the table's type, the pipeline's type and what to do.
    """


class TablesDisagreeError(QuarantineError):
    """The target and the quarantine table tell different stories (a target deleted or rebuilt
    while the quarantine table says records were replayed into it): raised before any write."""


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


class InconsistentBatchError(QuarantineError):
    """A batch run twice (target pass, then quarantine pass) failed different records.

    Raised before the quarantine write, so no record is in both tables; records
    that failed only the first time are in neither, and the batch is not
    committed: a re-run (or the stream's restart) runs them again.
    """


class TableWriteError(QuarantineError):
    """Writing a Delta table (target, quarantine, metrics) failed; the batch is not committed.

    ``attempts`` is how many times the write was tried (the retry policy's attempts).
    """

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        self.attempts = attempts
        super().__init__(message)


class QuarantineWriteError(TableWriteError):
    """Writing the quarantine table failed after retries; the batch is not committed."""


class ExpectationBreachError(ToleranceExceededError):
    """A GX expectation with ``on_breach: fail`` failed on a batch.

    Raised after the batch's quarantine rows are durable and before its good
    rows and offsets are committed. ``breaches`` holds the
    :class:`quarantine.listeners.events.Breach` es (with GX's result JSON) for listeners.
    """

    def __init__(self, message: str, *, breaches: tuple[object, ...] = (), count: int = 0) -> None:
        self.breaches = breaches
        super().__init__(message, limit="expectation on_breach=fail", count=count, window="batch")


#: Spark/Delta error conditions and what a data engineer should do about them.
_ADVICE: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("DELTA_FAILED_TO_MERGE_FIELDS", "DELTA_MERGE_INCOMPATIBLE", "INCOMPATIBLE_DATA_FOR_TABLE",
         "DELTA_SCHEMA_CHANGED", "CANNOT_UP_CAST", "DATATYPE_MISMATCH", "DELTA_COLUMN_NOT_FOUND",
         "CAST_INVALID_INPUT", "UNRESOLVED_COLUMN", "DELTA_MISSING_COLUMN", "INCOMPATIBLE_COLUMN_TYPE",
         "DELTA_FAILED_TO_MERGE", "MERGE_SCHEMA"),
        "the rows do not fit the table's schema: the stages' output changed (a field's type or name) "
        "since the table was created. Migrate the table (ALTER TABLE, or write to a new table) or "
        "change the stage back",
    ),
    (
        ("Concurrent", "DELTA_CONCURRENT", "ProtocolChanged", "MetadataChanged"),
        "another writer changed the table at the same time, beyond errors.retry.timeout; re-run: "
        "committed batches are not written twice",
    ),
    (
        ("PERMISSION", "INSUFFICIENT_PERMISSIONS", "AccessDenied", "403", "Forbidden"),
        "the principal running the job may not write this table: grant MODIFY (Unity Catalog) or "
        "storage write access",
    ),
    (
        ("PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE"),
        "the table, its schema/catalog or its storage path does not exist or is not a Delta table: "
        "check the name in the config",
    ),
)


def _condition(exc: BaseException) -> str:
    get = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        found = get() if callable(get) else None
    except Exception:  # a Py4J error without a JVM behind it any more
        found = None
    return str(found or "")


def _first_line(exc: BaseException) -> str:
    """The reason without a Java stack: the first meaningful line, cut to 500 characters."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback", "py4j")):
            return line[:500]
    return type(exc).__name__


#: ``[ERROR_CONDITION] message`` as Spark and Delta write it, also inside a Java stack.
_BRACKETED = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]\s*([^\n]*)")
#: Conditions that only say "something went wrong inside"; the cause below them says what.
_VAGUE = frozenset({"INTERNAL_ERROR", "INTERNAL_ERROR_BROADCAST", "FAILED_EXECUTE_UDF", "TASK_WRITE_FAILED"})


def describe_failure(exc: BaseException) -> str:
    """Spark's/Delta's failure in one line: ``[CONDITION] message``, no Java stack.

    A Py4J error's text is a Java stack; the most specific ``[CONDITION] message``
    in it (the cause, not a wrapping ``INTERNAL_ERROR``) is what a person needs.
    """
    return redact_text(_describe(exc))


def _describe(exc: BaseException) -> str:
    condition = _condition(exc)
    text = str(exc)
    found = [(c, m) for c, m in _BRACKETED.findall(text) if c not in _VAGUE]
    if condition and condition not in _VAGUE:
        reason = _first_line(exc)
        return reason if condition in reason else f"[{condition}] {reason}"
    if found:
        c, m = found[0]
        return f"[{c}] {m.split(' SQLSTATE')[0].strip()[:500]}"
    reason = _first_line(exc)
    return f"[{condition}] {reason}" if condition and condition not in reason else reason


def describe_write_failure(exc: BaseException, *, action: str, table: str, batch_id: int, attempts: int = 1) -> str:
    """One message for a failed table write: which table, which batch, why, and what to do.

    Spark and Delta raise their failures as ``AnalysisException``, Py4J errors
    with a Java stack, or ``INTERNAL_ERROR``; this keeps their condition and first
    line (the stack stays on ``__cause__``) and adds the table, the batch and a
    remedy chosen by the condition.
    """
    reason = describe_failure(exc)
    haystack = f"{_condition(exc)} {type(exc).__name__} {reason}"
    advice = next(
        (text for needles, text in _ADVICE if any(n.lower() in haystack.lower() for n in needles)),
        "the batch was not committed (its offsets are not either): fix the cause and re-run; "
        "nothing committed is written twice",
    )
    tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
    return f"{action} into {table} failed in batch {batch_id}{tries}: {reason} — {advice}"


def message_of(exc: BaseException) -> str:
    """An exception's message for the error struct: its text, never the word ``None``.

    ``str(ValueError(None))`` is ``'None'``; an exception raised without a message
    (or with ``None``) reads ``"<Class> raised with no message"`` instead.
    """
    if not exc.args or exc.args == (None,):
        return f"{type(exc).__name__} raised with no message"
    return str(exc) or f"{type(exc).__name__} raised with no message"
