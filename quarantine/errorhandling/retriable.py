"""Which failures are worth retrying: Delta's commit conflicts, configured class names, a predicate.

Retriable are: the configured class names
(``errors.retry.retriable.exceptions``, simple or dotted, matched against the
exception's class hierarchy and its ``__cause__`` chain), a predicate, and by
default Delta's commit conflicts that a re-run of the same idempotent write
resolves (:data:`DELTA_RETRIABLE`). Delta's ``MetadataChangedException`` and
``ProtocolChangedException`` are not retriable: the table's schema or protocol
changed under the writer, which a person must look at — unless the conflicting
commit only set or unset table properties (an operator's ``ALTER TABLE … SET
TBLPROPERTIES`` next to a running pipeline), which changes nothing a write
means (:func:`is_table_property_change`).

A :class:`RetriableClassifier` is what :class:`quarantine.errorhandling.retry.RetryPolicy`
asks; it is immutable and thread safe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from quarantine.errors import storage_fault

__all__ = [
    "DELTA_NOT_RETRIABLE",
    "DELTA_RETRIABLE",
    "RetriableClassifier",
    "is_table_creation_race",
    "is_table_property_change",
]

#: Delta commit conflicts on append/delete/idempotent-transaction: the write is
#: re-run against the new table version (our writes are idempotent MERGEs, ``txnAppId``
#: appends, or appends of records no table holds: a failed commit wrote nothing, so a
#: re-run never writes twice).
DELTA_RETRIABLE: tuple[str, ...] = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
)

#: Delta conflicts that are never retried, even if a configured name would match
#: them (e.g. a user listing ``DeltaConcurrentModificationException``).
DELTA_NOT_RETRIABLE: tuple[str, ...] = ("MetadataChangedException", "ProtocolChangedException")


def is_table_creation_race(exc: BaseException) -> bool:
    """Whether ``exc`` is a writer losing the race to create a Delta table.

    Two writers creating one table at once: the loser finds a ``_delta_log``
    without a first commit yet (``DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION``),
    or its create sees the winner's table while its own cached snapshot did not
    (``TABLE_OR_VIEW_ALREADY_EXISTS``, seen with two drivers creating one
    quarantine table). A retry finds the table created. (A location that really
    holds non-Delta files fails the same way, and fails for good when the budget
    runs out.)
    """
    cur: BaseException | None = exc
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur)
        if "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION" in text or "TABLE_OR_VIEW_ALREADY_EXISTS" in text:
            return True
        cur = cur.__cause__
    return False


#: Delta operations that change table properties only (the ``operation`` of a commit).
_PROPERTY_OPERATIONS = ("SET TBLPROPERTIES", "UNSET TBLPROPERTIES")
_CONFLICTING_OPERATION = re.compile(r'Conflicting commit: \{.*?"operation":"([^"]+)"')


def is_table_property_change(exc: BaseException) -> bool:
    """Whether ``exc`` is a metadata conflict whose winning commit only changed table properties.

    Delta names the conflicting commit in the message (``Conflicting commit:
    {"operation":"SET TBLPROPERTIES", …}``). Re-running an idempotent write
    after a property change is safe; after any other metadata change (schema,
    partitioning, protocol) it is not retried.
    """
    cur: BaseException | None = exc
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur)
        if "MetadataChangedException" in text:
            ops = set(_CONFLICTING_OPERATION.findall(text))
            if ops and ops <= set(_PROPERTY_OPERATIONS):
                return True
        cur = cur.__cause__
    return False


# "An error occurred while calling o12.execute.\n: io.delta.exceptions.X: ..." and
# "Caused by: a.b.Y: ..." lines of a Py4J error that PySpark did not convert.
_JAVA_CLASS_LINE = re.compile(r"^(?::|Caused by:)\s*([A-Za-z_][\w.$]*)(?::|$)", re.MULTILINE)


def _add_java_name(names: set[str], name: str) -> None:
    names.add(name)
    names.add(name.rsplit(".", 1)[-1].rsplit("$", 1)[-1])


def _java_class_names(exc: BaseException) -> set[str]:
    """Class names of the JVM exception behind a Py4J / captured Spark error, if any.

    Delta's commit conflicts reach Python either converted (``delta.exceptions``)
    or as a raw ``Py4JJavaError``; the JVM class hierarchy and cause chain are
    read through Py4J, falling back to the class names printed in the message.
    """
    names: set[str] = set()
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is not None:
        try:
            depth = 0
            while java is not None and depth < 8:
                cls = java.getClass()
                while cls is not None:
                    _add_java_name(names, str(cls.getName()))
                    cls = cls.getSuperclass()
                java = java.getCause()
                depth += 1
        except Exception:  # Py4J gone or not a JVM object: use the message below
            pass
    if java is not None or not names:
        for m in _JAVA_CLASS_LINE.finditer(str(exc)):
            if "." in m.group(1):
                _add_java_name(names, m.group(1))
    return names


def _class_names(exc: BaseException) -> set[str]:
    names: set[str] = set()
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for cls in type(cur).__mro__:
            names.add(cls.__name__)
            names.add(f"{cls.__module__}.{cls.__qualname__}")
        names |= _java_class_names(cur)
        cur = cur.__cause__
    return names


@dataclass(frozen=True)
class RetriableClassifier:
    """Decides whether an exception is worth retrying.

    Attributes:
        names: class names (simple ``ConcurrentAppendException`` or dotted
            ``delta.exceptions.ConcurrentAppendException``) that are retriable
            when they appear in the exception's class hierarchy or its
            ``__cause__`` chain.
        predicate: an extra test; retriable when it returns True.
        never: class names that are not retriable (checked first), except a
            metadata conflict with a property-only change (:func:`is_table_property_change`).

    A storage fault (:func:`quarantine.errors.storage_fault`: a path the principal may not
    write, a damaged commit file) is never retriable, whatever the names say (a configured
    ``java.io.IOException`` would match it): no attempt mends it, it fails at once.
    """

    names: frozenset[str] = frozenset(DELTA_RETRIABLE)
    predicate: Callable[[BaseException], bool] | None = None
    never: frozenset[str] = frozenset(DELTA_NOT_RETRIABLE)

    def __call__(self, exc: BaseException) -> bool:
        if storage_fault(exc) is not None:
            return False
        found = _class_names(exc)
        if found & self.never:
            return is_table_property_change(exc)
        if found & self.names:
            return True
        return bool(self.predicate is not None and self.predicate(exc))

    @classmethod
    def of(
        cls,
        names: Iterable[str] = (),
        predicate: Callable[[BaseException], bool] | None = None,
        *,
        include_delta: bool = True,
    ) -> RetriableClassifier:
        """Configured names (plus Delta's commit conflicts unless ``include_delta`` is False)."""
        base = set(DELTA_RETRIABLE) if include_delta else set()
        return cls(names=frozenset(base | set(names)), predicate=predicate)
