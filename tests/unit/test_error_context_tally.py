"""The terminal's summary of error-context lines (``quarantine`` without ``--verbose``).

Each line :class:`~quarantine.listeners.error_log.ErrorContextLogger` writes is counted
by :class:`~quarantine.listeners.error_log.ErrorContextTally` instead of being shown; the
summary says how many, by stage and error class, and where every failed record is.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest

from quarantine.command_logging import ErrorContextTally
from quarantine.listeners.error_log import SAMPLE_PER_BATCH, ErrorContextLogger


def _rows(classes: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {"stage": stage, "kind": "deserialize", "error_class": cls, "message": "bad", "attempts": 1,
         "topic": "orders", "partition": 0, "offset": i}
        for i, (stage, cls) in enumerate(classes)
    ]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.shown.append(record.getMessage())


def test_error_context_lines_are_counted_by_stage_and_class_not_shown_and_other_lines_pass() -> None:
    logger = logging.getLogger("quarantine.errors.test_tally")
    logger.propagate = False
    logger.setLevel(logging.INFO)  # as the CLI sets "quarantine"
    handler, tally = _Collect(), ErrorContextTally()
    handler.addFilter(tally)
    logger.addHandler(handler)
    try:
        log = ErrorContextLogger(include_configs=True, logger=logger)
        sampled = [("decode", "InvalidUtf8")] * 2 + [("parse", "MalformedJson")] * (SAMPLE_PER_BATCH - 2)
        log.log_batch(_rows(sampled), pipeline="p", run_id="r", batch_id=0, total=105)
        log.log_batch(_rows([("parse", "SchemaMismatch")]), pipeline="p", run_id="r", batch_id=1)
        logger.warning("a line of its own")
    finally:
        logger.removeHandler(handler)
    assert handler.shown == ["a line of its own"]
    assert (tally.logged, tally.not_logged) == (SAMPLE_PER_BATCH + 1, 105 - SAMPLE_PER_BATCH)
    assert tally.summary("conf/x.yml") == [
        f"error context: {SAMPLE_PER_BATCH + 1} of 106 failed records logged on quarantine.errors "
        "(--verbose shows each line), by stage and error class:",
        "  decode: InvalidUtf8 2",
        f"  parse: MalformedJson {SAMPLE_PER_BATCH - 2}, SchemaMismatch 1",
        "  every failed record is in the quarantine table: quarantine inspect --conf conf/x.yml",
    ]


def test_nothing_counted_summarises_to_no_lines() -> None:
    assert ErrorContextTally().summary("conf/x.yml") == []


_NOTEBOOK = """
import logging
from quarantine.listeners.error_log import ErrorContextLogger
rows = [{"stage": "parse", "kind": "deserialize", "error_class": "JSONDecodeError", "message": "bad",
         "attempts": 1, "topic": "orders", "partition": 0, "offset": i} for i in range(25)]
ErrorContextLogger().log_batch(rows[:20], pipeline="p", run_id="r", batch_id=0, total=25)
logging.getLogger("quarantine").warning("a line the notebook shows")
"""


def test_a_notebook_with_pythons_default_logging_shows_no_error_context_lines() -> None:
    """Issue 54, point 5: a notebook (the Python API, no logging set up) printed each sampled
    record's context line where the CLI shows one summary; the lines are INFO, which Python's
    default (WARNING) leaves out, while a WARNING of the library still shows."""
    shown = subprocess.run([sys.executable, "-c", _NOTEBOOK], capture_output=True, text=True, check=True).stderr
    assert "error context" not in shown, shown
    assert "a line the notebook shows" in shown


def test_error_context_lines_are_info_so_the_cli_counts_them_and_verbose_shows_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """INFO: the CLI's "quarantine" logger is at INFO, so its tally counts them and --verbose shows them."""
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        ErrorContextLogger().log_batch(_rows([("parse", "E")]), pipeline="p", run_id="r", batch_id=0, total=3)
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.INFO]
