"""What a run has to tell its alert channels: each :class:`Alert`, found in its reports (pure).

Four events (:class:`~quarantine.config.alerts.AlertEvent`), each found by one function of
what the run already knows, so that nothing is read again to find them but the stuck
records (the SQL library's ``stuck_records``, run by the listener):

* :func:`breaches`: a batch's aggregate-expectation breaches (``warn`` and ``fail``), and
  :func:`tolerance_breach`: the error limit that ended a run (``errors.tolerance*``);
* :func:`error_rates`: the topics whose quarantined share of a batch is over the threshold;
* :func:`stuck`: the stuck records the query found;
* :func:`run_failed`: a run that ended failed, with the one line the command line prints.

An :class:`Alert` holds the words a person reads, and nothing of a record (no key, value,
header or error message: a message may quote a payload); how each channel shapes it is
:mod:`quarantine.alerts.messages`'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from quarantine.columns import RunKind
from quarantine.config.alerts import AlertEvent
from quarantine.errorhandling.breach import Breach
from quarantine.errorhandling.fail_on import topic_rates
from quarantine.errors import ExpectationBreachError, ToleranceExceededError
from quarantine.listeners.events import BatchReport, RunInfo
from quarantine.metrics.cells import BatchMetrics, MetricNames

__all__ = [
    "Alert",
    "Counts",
    "StuckRecord",
    "breaches",
    "error_rates",
    "inspect_command",
    "run_failed",
    "stuck",
    "tolerance_breach",
]


@dataclass(frozen=True)
class Counts:
    """What the batch (or the run) did: records in, written to the target, quarantined."""

    records_in: int = 0
    records_ok: int = 0
    records_quarantined: int = 0

    @classmethod
    def of(cls, report: BatchReport) -> Counts:
        return cls(report.records_in, report.records_ok, report.records_quarantined)

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.records_in + other.records_in,
            self.records_ok + other.records_ok,
            self.records_quarantined + other.records_quarantined,
        )

    def text(self) -> str:
        """``10,000 in, 9,650 ok -> target, 350 quarantined``."""
        return (
            f"{self.records_in:,} in, {self.records_ok:,} ok -> target, {self.records_quarantined:,} quarantined"
        )


@dataclass(frozen=True)
class Alert:
    """One event of one run, in the words a person reads in the channel.

    Attributes:
        event: which event.
        pipeline: the pipeline's name.
        run: the run's id.
        kind: what the run does (run, replay, discard).
        at: when it happened (UTC).
        headline: what happened, in one line (``breach [warn] expect_…: …``).
        details: more lines: each breach, each topic, each stuck record.
        counts: the batch's (or, for a failed run, the run's so far) records.
        batch_id: the micro-batch it happened in (None: the run's end).
        next: the command to run next (``quarantine inspect --conf …``).
        held: earlier occurrences of the event this channel was not sent (the rate limit),
            told in this message; set by the listener per channel.
    """

    event: AlertEvent
    pipeline: str
    run: str
    kind: RunKind
    at: dt.datetime
    headline: str
    details: tuple[str, ...] = ()
    counts: Counts | None = None
    batch_id: int | None = None
    next: str = ""
    held: int = field(default=0, compare=False)

    def holding(self, held: int) -> Alert:
        """This alert, telling ``held`` earlier occurrences that were not sent."""
        return replace(self, held=held)


@dataclass(frozen=True)
class StuckRecord:
    """One row of the ``stuck_records`` query, as an alert tells it (no message: it may quote a payload)."""

    topic: str
    partition: int
    offset: int
    stage: str
    error_class: str
    error_count: int
    open_hours: float


def inspect_command(conf: str | None, *options: str) -> str:
    """``quarantine inspect --conf <conf> <options>`` (``<your config>`` when the file is not known)."""
    return " ".join(["quarantine inspect", "--conf", conf or "<your config>", *options])


def _since(run: RunInfo) -> str:
    return f"--since {run.started_at.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M')}"


def _breach_line(breach: Breach) -> str:
    return f"[{breach.action.value}] {breach.name}: {breach.message}"


def breaches(report: BatchReport, conf: str | None) -> Alert | None:
    """The batch's aggregate-expectation breaches (every ``on_breach`` action), or None without any."""
    found = report.breaches
    if not found:
        return None
    actions = sorted({b.action.value for b in found})
    headline = (
        f"breach [{', '.join(actions)}] {found[0].name}" if len(found) == 1
        else f"{len(found)} breaches [{', '.join(actions)}]: " + ", ".join(b.name for b in found)
    )
    stages = sorted(report.quarantined_by_expectation) or sorted(report.quarantined_by_stage)
    options = (f"--stage {stages[0]}",) if len(stages) == 1 else (_since(report.run),)
    return Alert(
        AlertEvent.BREACH, report.run.pipeline, report.run.run_id, report.run.kind, report.finished_at,
        headline, tuple(_breach_line(b) for b in found), Counts.of(report), report.batch_id,
        inspect_command(conf, *options),
    )


def tolerance_breach(run: RunInfo, error: BaseException | None, at: dt.datetime, conf: str | None) -> Alert | None:
    """The error limit that ended the run (``errors.tolerance``, ``…limit``, ``…rate.limit``), or None.

    A breach of an expectation with ``on_breach: fail`` is not one: its batch's report carries it
    (:func:`breaches`).
    """
    if not isinstance(error, ToleranceExceededError) or isinstance(error, ExpectationBreachError):
        return None
    name = error.limit or "errors.tolerance"
    return Alert(
        AlertEvent.BREACH, run.pipeline, run.run_id, run.kind, at, f"breach [fail] {name}",
        (f"[fail] {name}: {error}",), None, None, inspect_command(conf, _since(run)),
    )


def error_rates(report: BatchReport, *, percent: float, min_records: int, conf: str | None) -> Alert | None:
    """The topics whose quarantined records are more than ``percent`` % of the batch's records of
    them (topics with fewer than ``min_records`` are not judged), or None."""
    metrics = BatchMetrics.from_report(report.metrics)
    over = [
        r for r in topic_rates(
            metrics.by_topic(MetricNames.RECORDS_IN), metrics.by_topic(MetricNames.RECORDS_QUARANTINED),
            min_records=min_records,
        )
        if r.percent > percent
    ]
    if not over:
        return None
    headline = (
        f"error rate {over[0].percent:.1f}% on topic {over[0].topic}" if len(over) == 1
        else f"error rate over {percent:g}% on {len(over)} topics: " + ", ".join(r.topic for r in over)
    )
    details = tuple(
        f"topic {r.topic}: {r.quarantined:,} of {r.records_in:,} records quarantined ({r.percent:.1f}%, "
        f"alerts.error_rate_percent {percent:g})"
        for r in over
    )
    return Alert(
        AlertEvent.ERROR_RATE, report.run.pipeline, report.run.run_id, report.run.kind, report.finished_at,
        headline, details, Counts.of(report), report.batch_id, inspect_command(conf, _since(report.run)),
    )


def stuck(
    run: RunInfo, records: Sequence[StuckRecord], total: int, *, hours: int, failures: int, at: dt.datetime,
    conf: str | None,
) -> Alert | None:
    """``total`` stuck records (open at least ``hours`` hours, or failed more than ``failures``
    times), the first of them listed; None when there are none."""
    if total <= 0:
        return None
    details = tuple(
        f"{r.topic}[{r.partition}]@{r.offset}: {r.stage} {r.error_class}, failed {r.error_count}x, "
        f"open {r.open_hours:g} h"
        for r in records
    )
    if total > len(records):
        details += (f"… and {total - len(records):,} more",)
    sql = (
        f"quarantine sql stuck_records --conf {conf or '<your config>'} "
        f"--param hours={hours} --param failures={failures}"
    )
    return Alert(
        AlertEvent.STUCK, run.pipeline, run.run_id, run.kind, at,
        f"{total:,} stuck record(s): open {hours} h or more, or failed more than {failures} times",
        details, None, None, sql,
    )


def run_failed(
    run: RunInfo, reason: str, counts: Counts | None, last_batch: int | None, at: dt.datetime, conf: str | None
) -> Alert:
    """The run failed with ``reason`` (the line the command line prints after ``run failed:``); ``counts``:
    its batches' so far (None before its first)."""
    return Alert(
        AlertEvent.RUN_FAILED, run.pipeline, run.run_id, run.kind, at, f"{run.kind.value} failed",
        (reason,), counts, last_batch, inspect_command(conf, _since(run)),
    )

