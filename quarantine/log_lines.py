"""What a log line is about, for a handler that treats it apart: the ``LogRecord`` attributes.

Two kinds of line carry one: an error-context line (KIP-298's error context, written by
:class:`quarantine.listeners.error_log.ErrorContextLogger`) carries a :class:`ContextLine` as
:data:`CONTEXT_ATTR`, and a tolerance breach's line (:mod:`quarantine.expectations.validate`)
its :class:`~quarantine.errorhandling.breach.Breach` as :data:`BREACH_ATTR`. The ``quarantine``
command's terminal counts the first and holds the second (:mod:`quarantine.command_logging`).
Apart from the modules that write them, so that the command line's start imports no engine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BREACH_ATTR", "CONTEXT_ATTR", "LOGGER_NAME", "ContextLine"]

#: The attribute a breach's log line carries (``extra={BREACH_ATTR: breach}``), so that a handler can
#: tell it from other lines: the command line holds it off the terminal where its summary lists it.
BREACH_ATTR = "tolerance_breach"

#: The logger every error-context line is written to.
LOGGER_NAME = "quarantine.errors"
#: The ``LogRecord`` attribute holding each error-context line's :class:`ContextLine`.
CONTEXT_ATTR = "error_context"


@dataclass(frozen=True)
class ContextLine:
    """What one error-context log line is about, for a handler that counts lines instead of showing them.

    Every line :class:`~quarantine.listeners.error_log.ErrorContextLogger` writes carries one
    as the record's :data:`CONTEXT_ATTR` attribute (the command's terminal counts them:
    :class:`quarantine.command_logging.ErrorContextTally`).

    Attributes:
        stage: the failed record's stage; None on the config line and the "more" line.
        error_class: the failed record's error class; None likewise.
        not_logged: on the "more" line, how many failed records the batch did not log; else 0.
    """

    stage: str | None = None
    error_class: str | None = None
    not_logged: int = 0
