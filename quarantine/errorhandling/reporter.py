"""Where a batch's failed records are reported besides the quarantine table: one interface, a list of them.

Kafka Connect's ``ErrorReporter``: the plan's reporters (:meth:`Plan.error_reporters
<quarantine.batch.plan.Plan.error_reporters>`: the DLQ topic if one is configured, then the
error-context log) are called in order by :func:`report_errors`, once the quarantine table,
the system of record, holds the records (a run's batches, the errant record reporter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pyspark.sql import DataFrame

from quarantine.columns import ERROR

__all__ = ["ErrorReporter", "FailedRecords", "Reported", "report_errors"]


@dataclass(frozen=True)
class FailedRecords:
    """A batch's failed records as the reporters see them, after the quarantine write.

    Attributes:
        failed: rows with the Kafka source columns and the error struct ``error`` (rows whose
            ``error`` is NULL may be among them; they are not reported).
        rows: their quarantine rows as written (error redacted, encrypted if configured).
        pipeline: the pipeline's name.
        run_id: the run writing them.
        batch_id: the micro-batch writing them.
        error: the error struct column of ``failed``.
        logged_kinds: the error kinds to write error-context lines for (the policy's decision:
            ``errors.log.enable``, a ``log_and_continue`` handler, a kind that fails the run);
            empty: none.
        total: the failed records of ``logged_kinds``.
    """

    failed: DataFrame
    rows: DataFrame
    pipeline: str
    run_id: str
    batch_id: int
    error: str = ERROR
    logged_kinds: frozenset[str] = frozenset()
    total: int = 0


@dataclass(frozen=True)
class Reported:
    """What reporting a batch did, for its metrics (:func:`report_errors` sums the reporters').

    Attributes:
        logged: records the error-context log wrote a line for (``total-errors-logged``).
        produce_attempts: DLQ topic produce attempts (in ``deadletterqueue-produce-requests``).
        produce_failures: those that failed (in ``deadletterqueue-produce-failures``).
    """

    logged: int = 0
    produce_attempts: int = 0
    produce_failures: int = 0

    def __add__(self, other: Reported) -> Reported:
        return Reported(
            self.logged + other.logged,
            self.produce_attempts + other.produce_attempts,
            self.produce_failures + other.produce_failures,
        )


class ErrorReporter(Protocol):
    """Reports a batch's failed records somewhere besides the quarantine table."""

    def report(self, failed: FailedRecords) -> Reported:
        """Report ``failed``; what was done. An outage of where it reports to is a warning, not raised."""


def report_errors(reporters: Sequence[ErrorReporter], failed: FailedRecords) -> Reported:
    """Call each of ``reporters`` on ``failed``, in order; what they did, summed."""
    done = Reported()
    for reporter in reporters:
        done += reporter.report(failed)
    return done
