"""The terminal's summary of error-context lines (``quarantine`` without ``--verbose``).

Each line :class:`~quarantine.listeners.error_log.ErrorContextLogger` writes is counted
by :class:`~quarantine.listeners.error_log.ErrorContextTally` instead of being shown; the
summary says how many, by stage and error class, and where every failed record is.
"""

from __future__ import annotations

import logging
from typing import Any

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
