"""Spark analysis errors raised without PySpark's query-context log line.

PySpark logs each analysis error with its query context before raising it (the
``SQLQueryContextLogger`` / ``DataFrameQueryContextLogger`` loggers: one JSON line on
stderr holding the whole Java stack, some 12 KB). Where quarantine analyses what a config
asks for and reports a failure itself, in one line naming the key, that log line is noise:
:func:`unlogged_analysis` turns those two loggers off for the duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

__all__ = ["QUERY_CONTEXT_LOGGERS", "unlogged_analysis"]

#: The loggers PySpark logs an analysis error's query context to.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextmanager
def unlogged_analysis() -> Iterator[None]:
    """Within this block, analysis errors are raised without being logged by PySpark first."""
    # PySpark's own class: a plain logging.Logger of that name would break its logger.exception(..., errorClass=)
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(n) for n in QUERY_CONTEXT_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before, strict=True):
            lg.disabled = was
