"""What a command prints to the log: its own lines, other projects' only with ``--verbose``."""

from __future__ import annotations

import logging
import os

from quarantine.errorhandling.breach import BREACH_ATTR
from quarantine.listeners.error_log import ErrorContextTally
from quarantine.spark.session import LOG_LEVEL_ENV

__all__ = ["HOLDS", "SummaryHolds", "configure_logging"]


#: Loggers whose INFO lines are other projects' chatter: WARNING unless ``--verbose``.
_THIRD_PARTY = ("py4j", "urllib3", "alembic", "mlflow", "great_expectations", "pyspark", "httpx", "git")


def _other_projects_info(record: logging.LogRecord) -> bool:
    """Drops other projects' records below WARNING (a library may set its own logger to INFO: GX does)."""
    return record.name == "quarantine" or record.name.startswith("quarantine.") or record.levelno >= logging.WARNING


class SummaryHolds(logging.Filter):
    """A handler's filter: while :attr:`breaches` is set, a tolerance breach's line (one carrying
    :data:`~quarantine.errorhandling.breach.BREACH_ATTR`) is held off the terminal.

    A batch ``run`` sets it: its summary, printed seconds later, lists every breach, and the
    line printed twice read as two breaches. A stream's ``run`` leaves it unset: its summary
    comes when the stream stops, so each breach is shown as it happens.
    """

    def __init__(self) -> None:
        super().__init__()
        self.breaches = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.breaches and getattr(record, BREACH_ATTR, None) is not None)


#: The one filter of the command's own handlers that :func:`configure_logging` installs.
HOLDS = SummaryHolds()


def configure_logging(verbose: bool) -> ErrorContextTally | None:
    """A command prints its own lines only, unless ``verbose`` (README: The command line).

    Without ``verbose``: Python log lines of the ``quarantine.*`` loggers from INFO, other
    projects' from WARNING; the local JVM's at FATAL only (``$QUARANTINE_SPARK_LOG_LEVEL``,
    read from the JVM's start: :data:`quarantine.spark.session.LOG_CONFIG`): Spark's ERROR
    lines carry Java stacks of a failure the command ends with in one line; error-context
    lines counted, not shown, for the summary the command ends with. With ``verbose``:
    other projects' INFO lines, Spark's WARN lines, each error-context line. Called
    before Spark or MLflow start (each reads its variable once); a variable the user set stands.

    Returns:
        The tally of error-context lines kept off the terminal; None with ``verbose``, or
        when the root logger already has handlers (a host's logging stands).
    """
    # Spark's ERROR lines carry Java stacks (a task's, the job's abort) for a failure the command
    # ends with in one line (quarantine.errors.describe_failure): off unless --verbose
    os.environ.setdefault(LOG_LEVEL_ENV, "WARN" if verbose else "FATAL")
    os.environ.setdefault("MLFLOW_CONFIGURE_LOGGING", "false")  # else MLflow prints INFO lines with its own handler
    root = logging.getLogger()
    ours = not root.handlers
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("quarantine").setLevel(logging.INFO)
    for name in _THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    if verbose or not ours:
        return None
    tally = ErrorContextTally()
    for handler in root.handlers:
        handler.addFilter(_other_projects_info)
        handler.addFilter(tally)
        handler.addFilter(HOLDS)
    return tally
