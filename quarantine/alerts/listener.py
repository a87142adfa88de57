"""The alert listener: tells each channel of the run's events, once per event and window, never failing the run.

:class:`AlertListener` is a :class:`~quarantine.listeners.events.RunListener` like the
metrics table's and MLflow's: it hears each batch's report and the run's end, finds the
events in them (:mod:`quarantine.alerts.events`) and sends each to the channels that hear
it (:mod:`quarantine.alerts.channels`). Without channels the listener is :class:`NoAlerts`.

When (one message per event and run, not per micro-batch):

* after a batch: its breaches (``breach``) and the topics over the error rate
  (``error_rate``); in a stream, the stuck records too, looked for at most once per
  ``alerts.rate_limit`` (one ``stuck_records`` query over the quarantine table);
* at the run's end: the error limit that ended it (``breach``), the failure
  (``run_failed``, with the line the command prints) and, but for a stream that looked
  within the window, the stuck records (``stuck``).

The rate limit: a channel is sent at most one message per event in ``alerts.rate_limit``
(counted from the first attempt, delivered or not); the occurrences in between are
counted, told in the next message the channel is sent of that event ("3 earlier breach
alert(s) … were not sent"), in the run's summary and the metrics table (``alerts-held``).
A batch run has one batch: one message per event. A stream breaching every micro-batch
sends one per window. The windows live in the listener, so a restarted stream starts
anew.

Delivery: a round (one batch's or the run end's messages) gives each channel
``alerts.timeout_s`` for all its messages, retries included, with the write retry policy's
backoff (``errors.retry.*``: initial backoff, multiplier, jitter, max delay) under that budget;
what is retried is :func:`~quarantine.alerts.channels.retriable`'s. Channels are delivered
to at once, so a round takes at most the budget. A message still failing is given up: a
warning line, one line in the run's summary, and the round's ``alerts-undelivered`` row in
the metrics table. The listener never raises (the listener contract): a channel that is
down never fails the run nor delays it past the budget.

Secrets: every text an alert carries, every line logged or put in the summary is redacted
with the run's secrets (the config's and the channels' resolved URLs and passwords); a
channel is named by its config name, never its URL.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from quarantine.alerts.channels import Channel, DeliveryError, build_channels, retriable
from quarantine.alerts.events import (
    Alert,
    Counts,
    StuckRecord,
    breaches,
    error_rates,
    run_failed,
    stuck,
    tolerance_breach,
)
from quarantine.columns import RunKind
from quarantine.config.alerts import AlertEvent, AlertsConfig
from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import SYSTEM_CLOCK, Clock, RetryPolicy, RetryWithToleranceOperator
from quarantine.errors import RetriesExhaustedError, failure_reason
from quarantine.listeners.events import BatchReport, RunInfo, RunListener, RunStatus
from quarantine.metrics.cells import MetricNames
from quarantine.redaction import redact_text
from quarantine.secret_refs import SecretScopes

__all__ = ["AlertListener", "NoAlerts", "RecordRows", "StuckQuery", "alert_listener"]

log = logging.getLogger("quarantine.alerts")

#: ``(pipeline, hours, failures, limit) -> (how many, the first `limit` of them)``: the stuck records.
StuckQuery = Callable[[str, int, int, int], tuple[int, list[StuckRecord]]]
#: Appends a run's own rows to the metrics table (``MetricsTableListener.append_run_rows``).
RecordRows = Callable[[RunInfo, Sequence[tuple[MetricNames, float]]], None]

#: Stuck records an alert lists (the rest are counted).
STUCK_LISTED = 5


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class NoAlerts:
    """The listener used without ``alerts.channels``: does nothing."""

    def on_run_start(self, run: RunInfo) -> None:
        """Nothing to tell."""

    def on_batch(self, report: BatchReport) -> None:
        """Nothing to tell."""

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing to tell."""


@dataclass(frozen=True)
class _Outcome:
    """One message's fate: sent, or not delivered and why."""

    channel: str
    event: AlertEvent
    problem: str | None = None


class AlertListener:
    """Sends a run's events to its channels (see the module for when, how often and how).

    Args:
        settings: the ``alerts:`` section.
        channels: the channels (:func:`~quarantine.alerts.channels.build_channels`).
        secrets: every secret to redact (the config's and the channels' resolved ones).
        conf: the config file, for the commands a message says to run next (None: not known).
        streaming: whether the run is a stream (stuck records are then looked for after batches).
        retry: the write retry policy (``errors.retry.*``): its backoff, under ``alerts.timeout_s``.
        stuck_query: finds the stuck records; None: ``stuck`` is never told.
        record: appends the run's ``alerts-*`` rows to the metrics table.
        clock: monotonic time and sleep (windows, budgets, backoff).
        now: the wall clock (an alert's time at the run's end).
    """

    def __init__(
        self,
        settings: AlertsConfig,
        channels: Sequence[Channel],
        *,
        secrets: Sequence[str] = (),
        conf: str | None = None,
        streaming: bool = False,
        retry: RetryPolicy | None = None,
        stuck_query: StuckQuery | None = None,
        record: RecordRows | None = None,
        clock: Clock = SYSTEM_CLOCK,
        now: Callable[[], dt.datetime] = _utcnow,
    ) -> None:
        self.settings = settings
        self.channels = tuple(channels)
        self.secrets = tuple(secrets)
        self.conf = conf
        self.streaming = streaming
        self.retry = retry or RetryPolicy()
        self.stuck_query = stuck_query
        self.record = record
        self.clock = clock
        self.now = now
        self._hears = frozenset(e for c in self.channels for e in c.events)
        self._reset()

    def _reset(self) -> None:
        self._counts = Counts()
        self._last_batch: int | None = None
        self._last_sent: dict[tuple[str, AlertEvent], float] = {}
        self._held: dict[tuple[str, AlertEvent], int] = {}
        self._stuck_looked_at: float | None = None
        self._outcomes: list[_Outcome] = []
        self._held_total = 0

    # ------------------------------------------------------------------ the listener contract

    def on_run_start(self, run: RunInfo) -> None:
        """A new run: its windows and counts start empty."""
        self._reset()

    def on_batch(self, report: BatchReport) -> None:
        """Tell the batch's breaches and error rates (a stream's stuck records, once per window)."""
        run = report.run
        self._counts += Counts.of(report)
        self._last_batch = report.batch_id
        found = [breaches(report, self.conf)]
        if run.kind is RunKind.RUN:
            s = self.settings
            found.append(error_rates(
                report, percent=s.error_rate_percent, min_records=s.error_rate_min_records, conf=self.conf,
            ))
            if self.streaming and self._stuck_window_open():
                found.append(self._stuck(run, report.finished_at))
        self._deliver(run, [a for a in found if a is not None])

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Tell the error limit that ended the run, its failure, and the stuck records."""
        at = self.now()
        found = [tolerance_breach(run, error, at, self.conf)]
        if status is RunStatus.FAILED:
            reason = failure_reason(error) if error is not None else "the run failed"
            counts = self._counts if self._last_batch is not None else None
            found.append(run_failed(run, redact_text(reason, self.secrets), counts, self._last_batch, at, self.conf))
        if run.kind is RunKind.RUN and (not self.streaming or self._stuck_window_open()):
            found.append(self._stuck(run, at))
        self._deliver(run, [a for a in found if a is not None])

    def summary_lines(self) -> list[str]:
        """One line for the run's summary: what was sent, what was not and why, what was held back."""
        if not self._outcomes and not self._held_total:
            return []
        sent = [o for o in self._outcomes if o.problem is None]
        failed = [o for o in self._outcomes if o.problem is not None]
        parts = [f"{len(sent)} sent" + (f" ({_by_channel(sent)})" if sent else "")]
        if failed:
            parts.append(
                f"{len(failed)} not delivered ("
                + "; ".join(f"{o.channel} {o.event.value}: {o.problem}" for o in failed)
                + "; the run went on; metrics: alerts-undelivered)"
            )
        if self._held_total:
            parts.append(f"{self._held_total} held back by alerts.rate_limit ({self.settings.rate_limit})")
        return [redact_text("alerts: " + ", ".join(parts), self.secrets)]

    # ------------------------------------------------------------------ stuck records

    def _stuck_window_open(self) -> bool:
        if AlertEvent.STUCK not in self._hears or self.stuck_query is None:
            return False
        looked = self._stuck_looked_at
        return looked is None or self.clock.monotonic() - looked >= self.settings.rate_limit_s

    def _stuck(self, run: RunInfo, at: dt.datetime) -> Alert | None:
        if AlertEvent.STUCK not in self._hears or self.stuck_query is None:
            return None
        self._stuck_looked_at = self.clock.monotonic()
        s = self.settings
        try:
            total, rows = self.stuck_query(run.pipeline, s.stuck_hours, s.stuck_failures, STUCK_LISTED)
        except Exception as exc:  # the listener contract: the query failing is said, not raised
            log.warning("alerts: stuck records not looked for: %s", redact_text(failure_reason(exc), self.secrets))
            return None
        return stuck(run, rows, total, hours=s.stuck_hours, failures=s.stuck_failures, at=at, conf=self.conf)

    # ------------------------------------------------------------------ delivery

    def _due(self, channel: Channel, alert: Alert, now: float) -> Alert | None:
        """``alert`` as this channel is to be sent it now, or None: held back by the rate limit."""
        key = (channel.name, alert.event)
        last = self._last_sent.get(key)
        if last is not None and now - last < self.settings.rate_limit_s:
            self._held[key] = self._held.get(key, 0) + 1
            self._held_total += 1
            return None
        self._last_sent[key] = now
        return alert.holding(self._held.pop(key, 0))

    def _deliver(self, run: RunInfo, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        now = self.clock.monotonic()
        held_before = self._held_total
        queues = []
        for channel in self.channels:
            due = [d for a in alerts if a.event in channel.events if (d := self._due(channel, a, now)) is not None]
            if due:
                queues.append((channel, due))
        outcomes: list[_Outcome] = []
        if queues:
            with ThreadPoolExecutor(max_workers=len(queues), thread_name_prefix="quarantine-alert") as pool:
                for found in pool.map(lambda q: self._send_all(*q), queues):
                    outcomes += found
        self._outcomes += outcomes
        rows = [
            (MetricNames.ALERTS_SENT, sum(o.problem is None for o in outcomes)),
            (MetricNames.ALERTS_UNDELIVERED, sum(o.problem is not None for o in outcomes)),
            (MetricNames.ALERTS_HELD, self._held_total - held_before),
        ]
        kept = [(m, float(v)) for m, v in rows if v]
        if kept and self.record is not None:
            try:
                self.record(run, kept)
            except Exception as exc:  # the listener contract
                log.warning("alerts: metric rows not written: %s", redact_text(failure_reason(exc), self.secrets))

    def _send_all(self, channel: Channel, alerts: Sequence[Alert]) -> list[_Outcome]:
        """Send ``alerts`` to ``channel`` in order, all within one budget; after a message given up,
        the rest of the round is not tried (the channel is down)."""
        budget = self.settings.timeout_s
        start = self.clock.monotonic()
        deadline = start + budget
        out: list[_Outcome] = []
        problem: str | None = None
        for alert in alerts:
            if problem is None:
                problem = self._send(channel, alert, deadline, start)
                out.append(_Outcome(channel.name, alert.event, problem))
                if problem is not None:
                    log.warning("alert %s not delivered to %s: %s", alert.event.value, channel.describe(), problem)
            else:
                out.append(_Outcome(channel.name, alert.event, "not tried: the channel failed earlier in the round"))
        return out

    def _send(self, channel: Channel, alert: Alert, deadline: float, start: float) -> str | None:
        """One message, retried under what is left of the round's budget; None when delivered, else why not."""
        left_ms = (deadline - self.clock.monotonic()) * 1000.0
        if left_ms <= 0:
            return f"not tried: alerts.timeout_s ({self.settings.timeout_s:g} s) spent"
        policy = replace(
            self.retry, timeout_ms=max(1, int(left_ms)), min_attempts=1,
            retriable=RetriableClassifier.of((), retriable, include_delta=False),
        )
        operator = RetryWithToleranceOperator(policy, clock=self.clock, rng=random.random)
        tried = 0
        last: BaseException | None = None

        def attempt() -> None:
            nonlocal tried, last
            left = deadline - self.clock.monotonic()
            if left <= 0:  # the budget is spent: the last failure stands, no attempt is made
                raise last or TimeoutError(f"alerts.timeout_s ({self.settings.timeout_s:g} s) spent")
            tried += 1
            try:
                channel.send(alert, left)
            except Exception as exc:
                last = exc
                raise

        try:
            operator.call(attempt, name=f"alert to {channel.describe()}")
        except RetriesExhaustedError as exc:
            spent = self.clock.monotonic() - start
            return redact_text(f"{_said(last or exc.last)} after {tried} attempt(s) in {spent:.1f} s", self.secrets)
        return None


def _said(exc: BaseException) -> str:
    """A delivery failure in a few words, never a URL: ``HTTP 500``, ``ConnectionRefusedError``."""
    if isinstance(exc, DeliveryError):
        return exc.said
    if isinstance(exc, TimeoutError):
        return f"timed out ({type(exc).__name__})"
    return type(exc).__name__


def _by_channel(outcomes: Sequence[_Outcome]) -> str:
    """``oncall: breach, error_rate x2; mail: run_failed``."""
    channels: dict[str, Counter[str]] = {}
    for o in outcomes:
        channels.setdefault(o.channel, Counter())[o.event.value] += 1
    return "; ".join(
        f"{c}: " + ", ".join(e if n == 1 else f"{e} x{n}" for e, n in events.items()) for c, events in channels.items()
    )


def alert_listener(
    settings: AlertsConfig,
    *,
    secrets: Sequence[str],
    conf: str | None,
    streaming: bool,
    retry: RetryPolicy,
    stuck_query: StuckQuery | None,
    record: RecordRows | None,
    scopes: SecretScopes | None = None,
) -> RunListener:
    """The listener ``settings`` ask for: :class:`NoAlerts` without channels, else an :class:`AlertListener`
    whose channels' secret references are resolved now (``scopes``; default the Databricks SDK's).

    Raises:
        ConfigError: a secret reference could not be resolved (before anything is read).
    """
    if not settings.channels:
        return NoAlerts()
    channels, every = build_channels(settings, secrets, scopes)
    return AlertListener(
        settings, channels, secrets=every, conf=conf, streaming=streaming, retry=retry,
        stuck_query=stuck_query, record=record,
    )
