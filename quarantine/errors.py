"""One exception root for everything quarantine raises.

Messages say what was expected and what was found, and name the config key,
stage or table involved, so a data engineer can fix the cause from the message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from quarantine.redaction import redact, redact_text

__all__ = [
    "ConditionFailedError",
    "ConfigError",
    "ConfigFileError",
    "CoordinatesReusedError",
    "DeltaRsUnreadableError",
    "ExpectationBreachError",
    "HandlerError",
    "InconsistentBatchError",
    "KeyUnavailableError",
    "MissingDependencyError",
    "MissingTableError",
    "QuarantineError",
    "QuarantineWriteError",
    "RetriesExhaustedError",
    "SchemaMismatchError",
    "SourceError",
    "StageDefinitionError",
    "StorageFault",
    "TableWriteError",
    "TablesDisagreeError",
    "ToleranceExceededError",
    "describe_failure",
    "describe_write_failure",
    "failure_reason",
    "message_of",
    "storage_fault",
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


class ConfigFileError(ConfigError):
    """The config file itself cannot be used: it is missing, not YAML, or not a mapping.

    Said of the file (``config file 'conf/p.yml' is not valid YAML: line 3, column 1: …``),
    not of a config key; a :class:`ConfigError`, so the command line exits 2 as for any
    bad config. YAML's message is redacted as any config value is (it may quote a line).
    """

    def __init__(self, path: str, problem: str) -> None:
        self.key = "--conf"
        self.value = path
        self.allowed = problem
        QuarantineError.__init__(self, f"config file {path!r} {redact_text(problem)}")


class MissingDependencyError(QuarantineError):
    """An optional dependency a command needs is not installed; the message ends with the
    exact ``pip install`` line (an extra of ``spark-quarantine``). The command line exits 3.

    Attributes:
        extra: the extra that installs it (``report``, ``connect``, ``local``).
    """

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(f"{message}: pip install 'spark-quarantine[{extra}]'")
        self.extra = extra


class MissingTableError(QuarantineError):
    """A table a command reads does not exist yet, or the config names none: one message for every
    command and engine (a read, a replay's selection, a report's figure, the views).

    Attributes:
        role: ``quarantine``, ``metrics`` or ``target``.
        table: the table the config names (None: it names none).
    """

    #: Each role's config key.
    KEYS: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"quarantine": "errors.deadletterqueue.table.name", "metrics": "metrics.table", "target": "target.table"})

    def __init__(self, role: str, table: str | None) -> None:
        self.role = role
        self.table = table
        key = self.KEYS[role]
        super().__init__(f"no {role} table: the config has no {key}" if table is None else
                         f"no {role} table at {table} yet ({key}); a pipeline run creates it on its first batch")


class DeltaRsUnreadableError(QuarantineError):
    """delta-rs cannot read a path-named table the JVM-free read path was to read (a table
    feature it does not support, bytes its Arrow reader refuses): the command answers on Spark
    instead, after one line saying this message (:mod:`quarantine.ops.duck`)."""


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


class ConditionFailedError(QuarantineError):
    """A ``fail_on`` condition held once the batch's writes were committed (:mod:`quarantine.errorhandling.fail_on`).

    Unlike a tolerance breach, nothing is held back: the target, the quarantine table and the
    metrics are written; the run only ends as failed (the command's exit code 4).
    ``conditions`` holds each condition met, in one sentence naming its key.
    """

    def __init__(self, conditions: Sequence[str]) -> None:
        self.conditions = tuple(conditions)
        super().__init__("; ".join(self.conditions) + " (the run's writes are committed)")


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


class KeyUnavailableError(QuarantineError):
    """Rows a command must read in the clear are encrypted under a key it cannot read here; nothing
    was written (``errors.deadletterqueue.encryption.*``: the message names the key and why)."""


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


def describe_failure(exc: BaseException, tables: Mapping[str, str] | None = None) -> str:
    """Spark's/Delta's failure in one line: ``[CONDITION] message``, no Java stack.

    A Py4J error's text is a Java stack; the most specific ``[CONDITION] message``
    in it (the cause, not a wrapping ``INTERNAL_ERROR``) is what a person needs. A
    storage fault (:func:`storage_fault`) is said in words instead: which table, which
    path, what is wrong with it.

    Args:
        exc: the failure, as Spark, Delta or Py4J raised it.
        tables: the run's tables by role (``target``, ``quarantine``, ``metrics`` → name
            or path), to say which table a faulty path belongs to.
    """
    fault = storage_fault(exc, tables)
    return redact_text(fault.describe() if fault is not None else _describe(exc))


#: Roles a table plays in a run, in the words the messages use.
_ROLES = ("target", "quarantine", "metrics")
#: ``<path> (Permission denied)``: Java's ``FileOutputStream``/``FileInputStream`` on a file it may
#: not open (``Operation not permitted``: an immutable folder, a mount's policy); Java NIO's
#: ``AccessDeniedException: <path>``; HDFS's ``Permission denied: user=…, access=WRITE, inode="<path>"``.
_DENIED = (
    re.compile(r"((?:file:)?/[^\s()\"']+)\s+\((?:Permission denied|Operation not permitted)\)"),
    re.compile(r"AccessDeniedException:\s*((?:file:)?/[^\s\"']+)"),
    re.compile(r"Permission denied:.*?inode=\"([^\"]+)\""),
)
#: A Delta commit file: ``<table>/_delta_log/<20-digit version>.json``.
_COMMIT_FILE = re.compile(r"((?:file:)?/[^\s\"']*?)/_delta_log/(\d{20})\.json\b")
#: Failures that say a file's content cannot be read (torn, truncated, corrupt), not that it is missing.
_DAMAGED = ("FAILED_READ_FILE", "ChecksumException", "JsonParseException", "JsonEOFException",
            "MALFORMED_RECORD_IN_PARSING", "Unexpected end-of-input", "Malformed")
#: ``Caused by: a.b.SomeException: message`` (or a cause's ``toString()``): the message.
_CAUSE_LINE = re.compile(r"^(?:Caused by:\s*|:\s*)?[\w.$]+(?:Exception|Error):\s*(.+)$", re.MULTILINE)
#: A write's traces in a Java stack: a file opened for writing, a commit's temporary file.
_WRITING = ("FileOutputStream", "RawLocalFileSystem.create", "LocalFileSystem.create", ".create(", "mkdirs",
            "access=WRITE", ".tmp", "Writer")


@dataclass(frozen=True)
class StorageFault:
    """A fault of the storage under a table, not of a record: no retry or re-run mends it.

    Attributes:
        kind: ``permission`` (the principal may not open the path) or ``damaged`` (a
            commit file's content cannot be read).
        path: the file or folder the JVM named, without a ``file:`` scheme.
        role: which of the run's tables it belongs to (``target``, ``quarantine``,
            ``metrics``), empty when the path is none of theirs.
        table: that table as the config names it (its path, else its name), or the
            folder holding ``_delta_log`` for a commit file.
        writing: whether the path was being written (else read).
        version: a damaged commit file's table version.
        cause: the deepest reason the JVM gave for a damaged file (first line).
    """

    kind: str
    path: str
    role: str = ""
    table: str = ""
    writing: bool = True
    version: int = -1
    cause: str = ""

    def describe(self) -> str:
        """The fault in one line of words, with what to do."""
        which = f"{self.role} table" if self.role else "table"
        if self.kind == "permission":
            verb = "writing" if self.writing else "reading"
            where = f"table {self.role} at {self.path}" if self.role else f"{self.path}"
            return f"permission denied {verb} {where}"
        reason = f": {self.cause}" if self.cause else ""
        return (f"the commit file {self.path} of the {which} at {self.table} (version {self.version}) is "
                f"damaged{reason} — a commit file is never rewritten: restore it from a backup or the "
                "storage's versioning")


def _texts(exc: BaseException) -> Iterator[str]:
    """Every message in ``exc``'s chain: the Python ``__cause__`` chain, and under each the
    Java cause chain of a Py4J or captured Spark error (``getCause()``, each ``toString()``)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield str(cur)
        java = getattr(cur, "java_exception", None) or getattr(cur, "_origin", None)
        depth = 0
        try:
            while java is not None and depth < 16:
                yield str(java.toString())
                java = java.getCause()
                depth += 1
        except Exception:  # Py4J gone or not a JVM object: the message text above is all there is
            pass
        cur = cur.__cause__


def _local(path: str) -> str:
    """``file:///a/b``, ``file:/a/b`` → ``/a/b``; other paths as given."""
    return re.sub(r"^file:/+", "/", path)


def _role(path: str, tables: Mapping[str, str]) -> tuple[str, str]:
    """The role and configured name of the table whose folder holds ``path``, else ``("", "")``."""
    for role in _ROLES:
        table = tables.get(role) or ""
        folder = _local(table).rstrip("/")
        if folder.startswith("/") and (path == folder or path.startswith(folder + "/")):
            return role, table
    return "", ""


def storage_fault(exc: BaseException, tables: Mapping[str, str] | None = None) -> StorageFault | None:
    """The storage fault behind ``exc``, read from its Python and Java cause chains; None when it is another failure.

    A permission fault is a path the JVM was refused (``(Permission denied)``, ``(Operation
    not permitted)``, ``AccessDeniedException``, HDFS's ``Permission denied: … inode=``); a
    damaged commit is a ``_delta_log/<version>.json`` that could not be read as such
    (``FAILED_READ_FILE``, a checksum or JSON parse error). Both are permanent: retrying the
    write cannot mend them (:class:`quarantine.errorhandling.retriable.RetriableClassifier`).

    Args:
        exc: the failure.
        tables: the run's tables by role (``target``, ``quarantine``, ``metrics``); with one
            entry, a path under no table's folder is that table's (a catalog table's location).
    """
    tables = dict(tables or {})
    texts = list(_texts(exc))
    text = "\n".join(texts)
    for pattern in _DENIED:
        m = pattern.search(text)
        if m:
            path = _local(m.group(1))
            role, table = _role(path, tables)
            if not role and len(tables) == 1:
                ((role, table),) = tables.items()
            writing = any(w in text for w in _WRITING)
            return StorageFault("permission", path, role, table, writing=writing)
    m = _COMMIT_FILE.search(text)
    if m and any(d in text for d in _DAMAGED):
        path, folder = _local(m.group(0)), _local(m.group(1))
        role, table = _role(path, tables)
        if not role and len(tables) == 1:
            ((role, _),) = tables.items()
        causes = _CAUSE_LINE.findall(text)  # the deepest Java cause is the last one named
        cause = causes[-1].strip() if causes else ""
        return StorageFault("damaged", path, role, folder, version=int(m.group(2)), cause=cause[:300])
    return None


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


def failure_reason(exc: BaseException, tables: Mapping[str, str] | None = None) -> str:
    """What a failed run failed with, in the one line the ``quarantine`` command prints after
    ``quarantine: run failed:`` (and an alert's run_failed message says).

    Our own errors as ``<Class>: <message>``; Spark's, Delta's and Py4J's as
    :func:`describe_failure` says them (a storage fault in words, without a class name).
    """
    if isinstance(exc, QuarantineError):
        return f"{type(exc).__name__}: {exc}"
    kind = "" if storage_fault(exc, tables) is not None else f"{type(exc).__name__}: "
    return f"{kind}{describe_failure(exc, tables)}"


def describe_write_failure(exc: BaseException, *, action: str, table: str, batch_id: int, attempts: int = 1) -> str:
    """One message for a failed table write: which table, which batch, why, and what to do.

    Spark and Delta raise their failures as ``AnalysisException``, Py4J errors
    with a Java stack, or ``INTERNAL_ERROR``; this keeps their condition and first
    line (the stack stays on ``__cause__``) and adds the table, the batch and a
    remedy chosen by the condition.
    """
    role = action.split(" ", 1)[0]
    reason = describe_failure(exc, {role: table} if role in _ROLES else None)
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
