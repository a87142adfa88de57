"""What a command prints to the log: its own lines, other projects' only with ``--verbose``."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter

from quarantine.log_lines import BREACH_ATTR, CONTEXT_ATTR, LOGGER_NAME, ContextLine
from quarantine.spark import LOG_LEVEL_ENV

__all__ = ["HOLDS", "ErrorContextTally", "SummaryHolds", "configure_logging"]


#: Loggers whose INFO lines are other projects' chatter: WARNING unless ``--verbose``.
_THIRD_PARTY = ("py4j", "urllib3", "alembic", "mlflow", "great_expectations", "pyspark", "httpx", "git")


def _other_projects_info(record: logging.LogRecord) -> bool:
    """Drops other projects' records below WARNING (a library may set its own logger to INFO: GX does)."""
    return record.name == "quarantine" or record.name.startswith("quarantine.") or record.levelno >= logging.WARNING


class ErrorContextTally(logging.Filter):
    """A handler's filter: counts error-context lines instead of letting them through; the rest passes.

    What the ``quarantine`` command's terminal shows instead of each line, unless
    ``--verbose``: :meth:`summary`. Instances are thread safe
    (a stream's batches log from its own thread).
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._by_stage: dict[str, Counter[str]] = {}
        self.logged = 0
        self.not_logged = 0

    def filter(self, record: logging.LogRecord) -> bool:
        """False (count it) for a line carrying a :class:`ContextLine`; True for any other."""
        about = getattr(record, CONTEXT_ATTR, None)
        if not isinstance(about, ContextLine):
            return True
        with self._lock:
            self.not_logged += about.not_logged
            if about.stage is not None:
                self.logged += 1
                self._by_stage.setdefault(about.stage, Counter())[about.error_class or "?"] += 1
        return False

    def summary(self, conf: str | None) -> list[str]:
        """The lines that stand for the counted ones; none when nothing was counted.

        Args:
            conf: the command's ``--conf``, for the ``quarantine inspect`` command shown.
        """
        with self._lock:
            if not self.logged and not self.not_logged:
                return []
            total = self.logged + self.not_logged
            lines = [f"error context: {self.logged} of {total} failed records logged on {LOGGER_NAME} "
                     "(--verbose shows each line), by stage and error class:"]
            for stage, classes in self._by_stage.items():
                lines.append(f"  {stage}: " + ", ".join(f"{c} {n}" for c, n in classes.most_common()))
        where = f"quarantine inspect --conf {conf}" if conf else "quarantine inspect"
        lines.append(f"  every failed record is in the quarantine table: {where}")
        return lines


class SummaryHolds(logging.Filter):
    """A handler's filter: while :attr:`breaches` is set, a tolerance breach's line (one carrying
    :data:`~quarantine.log_lines.BREACH_ATTR`) is held off the terminal.

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
