"""What a run tells the outside world: batch reports and the listeners that receive them.

The runner builds one :class:`BatchReport` per batch (micro-batch in streaming,
the whole input in batch mode) from metrics observed in the data pass, and
fans it out to a list of :class:`RunListener` s: the Delta metrics table, MLflow,
alerts. A disabled feature is a listener that does nothing, not an ``if enabled:``
in the runner. The failed records themselves go to the error reporters, not to the
listeners (:mod:`quarantine.errorhandling.reporter`: the DLQ topic, the error-context log).

Listener contract: listeners must not raise for outages of what they write to
(MLflow down, a slow server); they buffer or drop with a warning. A listener
exception that does escape is logged by the runner and never fails the data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from quarantine.columns import SOURCE_STAGE, RunKind
from quarantine.errorhandling.breach import Breach
from quarantine.metrics.cells import BatchMetrics, MetricNames

__all__ = [
    "BatchReport",
    "Listeners",
    "RunInfo",
    "RunListener",
    "RunStatus",
    "RunSummary",
    "SaysInSummary",
    "fan_out",
]


class RunStatus(StrEnum):
    """How a run ended (MLflow's ``status`` tag uses these values)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class RunInfo:
    """One run of a pipeline (a batch job, or one run of a streaming query).

    Attributes:
        pipeline: the pipeline's name.
        run_id: this run's id (also written to the quarantine table's ``run_id``).
        source: human name of the source (topics or path).
        config: the redacted config (safe to log as params).
        started_at: when the run started (UTC).
        kind: what the run does (:class:`~quarantine.columns.RunKind`: a pipeline run, a replay, a discard).
    """

    pipeline: str
    run_id: str
    source: str
    config: Mapping[str, Any]
    started_at: dt.datetime
    kind: RunKind = RunKind.RUN


@dataclass(frozen=True)
class BatchReport:
    """Counts for one batch, all observed in the same pass as the data.

    Attributes:
        run: the run this batch belongs to.
        batch_id: the micro-batch id (0 for a batch run).
        records_in: source records in the batch.
        records_ok: records this batch's own commit wrote to the target (Delta's operation
            metrics for a batch run's MERGE).
        records_quarantined: records written to the quarantine table.
        already_in_target: records that passed but were in the target already when this
            batch's MERGE committed (another writer settled them first, or an earlier run
            crashed before closing their quarantine rows); in no count above but records_in.
        reopened: of records_in, those open in quarantine from an earlier run, run again (a
            batch run or a replay; records an earlier run settled are not read again).
        quarantined_by_stage: quarantined records per failing stage.
        quarantined_by_topic: quarantined records per source topic.
        quarantined_by_expectation: quarantined records per failing expectation.
        schema_drift: per stage, the undeclared fields records held and how many records
            held each (:func:`quarantine.metrics.observed.schema_drift`); the records with any are
            the ``schema-drift-records`` metric.
        metrics: Kafka-named error metrics for this batch
            (``total-record-failures``, ``total-records-skipped``…).
        breaches: tolerance breaches seen in this batch.
        untranslated_expectations: expectations validated by GX only (not per row).
        sample_messages: a few quarantined records (stage, error_class, message;
            key/value only when ``errors.log.include.messages``) for MLflow artifacts.
        stale_stages: stages that failed records in a way a refresh of the stage may mend
            (:meth:`~quarantine.stage.Stage.refreshes`: a registry ``avro`` or ``protobuf``
            stage's schema ids not listed yet); a stream refreshes them before its next micro-batch.
        finished_at: when the batch's writes became durable.
        field_notes: what became of fields on their way to the target: columns the target gained
            (``target.schema_evolution: add_columns``), fields a stage produces that do not reach it
            (:func:`quarantine.lineage.lost_fields`); each a line of the run's summary.
    """

    run: RunInfo
    batch_id: int
    records_in: int
    records_ok: int
    records_quarantined: int
    already_in_target: int = 0
    reopened: int = 0
    quarantined_by_stage: Mapping[str, int] = field(default_factory=dict)
    quarantined_by_topic: Mapping[str, int] = field(default_factory=dict)
    quarantined_by_expectation: Mapping[str, int] = field(default_factory=dict)
    schema_drift: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    breaches: tuple[Breach, ...] = ()
    untranslated_expectations: tuple[str, ...] = ()
    sample_messages: tuple[Mapping[str, Any], ...] = ()
    finished_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    stale_stages: tuple[str, ...] = ()
    field_notes: tuple[str, ...] = ()


class RunListener(Protocol):
    """Receives a run's lifecycle. Implementations: metrics table, MLflow, logs."""

    def on_run_start(self, run: RunInfo) -> None:
        """Called once before the first batch."""

    def on_batch(self, report: BatchReport) -> None:
        """Called after each batch's writes are durable (and before offsets commit)."""

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Called once when the run ends, with the error that ended it, if any."""


@runtime_checkable
class SaysInSummary(Protocol):
    """A listener with something to say in the run's summary (alert deliveries: :mod:`quarantine.alerts`)."""

    def summary_lines(self) -> Sequence[str]:
        """Lines for the run's summary, once the run ended (none: nothing to say). Never raises."""


def fan_out(listeners: list[RunListener], method: str, *args: Any) -> list[BaseException]:
    """Call ``method`` on every listener; collect (never raise) their exceptions."""
    problems: list[BaseException] = []
    for listener in listeners:
        try:
            getattr(listener, method)(*args)
        except Exception as exc:  # a listener must never fail the data path
            problems.append(exc)
    return problems


class Listeners:
    """A run's listeners, each on a thread of its own, each seeing its events in order.

    Contract: every listener gets the run's events (run start, each batch, run end)
    in the order they happened, from one thread of its own; different listeners
    handle an event at the same time, so a batch waits for the slowest listener,
    not for their sum. :meth:`start` does not wait: a run's start (an MLflow run
    created, a metrics table checked) overlaps the first batch's Spark work.
    :meth:`call` waits until every listener has handled every event so far, so a
    batch's report is delivered before the batch returns (before a stream commits
    its offsets), and a run's end before the run returns. Exceptions are
    collected, never raised (:func:`fan_out`). Not thread safe: one caller.
    """

    def __init__(self, listeners: Sequence[RunListener]) -> None:
        self._listeners = tuple(listeners)
        self._pools: tuple[ThreadPoolExecutor, ...] = ()
        self._pending: list[Future[list[BaseException]]] = []

    def start(self, method: str, *args: Any) -> None:
        """Send ``method(*args)`` to every listener; do not wait."""
        if not self._pools:
            self._pools = tuple(
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="quarantine-listener")
                for _ in self._listeners
            )
        self._pending += [
            pool.submit(fan_out, [listener], method, *args)
            for pool, listener in zip(self._pools, self._listeners, strict=True)
        ]

    def call(self, method: str, *args: Any) -> list[BaseException]:
        """Send ``method(*args)`` to every listener and wait for every event sent so far.

        Returns:
            The exceptions listeners raised since the last :meth:`call`.
        """
        self.start(method, *args)
        pending, self._pending = self._pending, []
        wait(pending)
        return [problem for f in pending for problem in f.result()]

    def summary_lines(self) -> tuple[str, ...]:
        """What the listeners have to say in the run's summary (:class:`SaysInSummary`), in their order."""
        lines: list[str] = []
        for listener in self._listeners:
            if isinstance(listener, SaysInSummary):
                try:
                    lines.extend(listener.summary_lines())
                except Exception:  # a listener must never fail the data path
                    continue
        return tuple(lines)

    def close(self) -> None:
        """Wait for what was sent, then end the listeners' threads."""
        for pool in self._pools:
            pool.shutdown(wait=True)
        self._pools = ()


@dataclass(frozen=True)
class RunSummary:
    """What a run did, for the CLI and notebooks.

    Attributes:
        run: the run.
        batches: the batch reports, in order.
        status: how the run ended.
        notes: what the listeners said for the summary (:class:`SaysInSummary`: alert deliveries).
    """

    run: RunInfo
    batches: tuple[BatchReport, ...]
    status: RunStatus
    notes: tuple[str, ...] = ()

    @property
    def records_in(self) -> int:
        return sum(b.records_in for b in self.batches)

    @property
    def records_ok(self) -> int:
        return sum(b.records_ok for b in self.batches)

    @property
    def records_quarantined(self) -> int:
        return sum(b.records_quarantined for b in self.batches)

    @property
    def already_in_target(self) -> int:
        return sum(b.already_in_target for b in self.batches)

    @property
    def reopened(self) -> int:
        return sum(b.reopened for b in self.batches)

    def quarantined_by_stage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.batches:
            for k, v in b.quarantined_by_stage.items():
                out[k] = out.get(k, 0) + v
        return out

    def render(self) -> str:
        """A short human summary: records in, ok, quarantined by stage."""
        lines = [
            f"pipeline {self.run.pipeline}  run {self.run.run_id}  status {self.status.value}",
            f"  records in           {self.records_in:>12,}",
        ]
        if self.reopened:  # a re-run: its records in are not the source's
            lines += [
                f"    new                {self.records_in - self.reopened:>12,}",
                f"    open, run again    {self.reopened:>12,}   (open in quarantine since an earlier run; records "
                "settled by earlier runs (in the target, replayed or discarded) are not read again)",
            ]
        lines += [
            f"  ok -> target         {self.records_ok:>12,}",
            f"  quarantined          {self.records_quarantined:>12,}",
        ]
        if self.already_in_target:
            lines.append(
                f"  already in target    {self.already_in_target:>12,}   (passed, but another writer or an "
                "earlier run had written them: not written again)"
            )
        by_stage = self.quarantined_by_stage()
        for stage, n in by_stage.items():
            lines.append(f"    at {stage:<17} {n:>12,}")
        if by_stage.get(SOURCE_STAGE):
            lines.append(
                f"  warning: {by_stage[SOURCE_STAGE]:,} record(s) have coordinates that other content holds "
                "(a recreated topic, a rewritten source?): quarantined at stage source as CoordinatesReused "
                "or ConflictingDuplicate, each with its own row; errors.coordinates.reused says what to do"
            )
        lines += self._drift_lines()
        lines += [f"  {note}" for note in dict.fromkeys(n for b in self.batches for n in b.field_notes)]
        untranslated = sorted({u for b in self.batches for u in b.untranslated_expectations})
        if untranslated:
            lines.append("  expectations validated by GX only (not per row): " + ", ".join(untranslated))
        for b in self.batches:
            for br in b.breaches:
                lines.append(f"  breach [{br.action.value}] {br.name}: {br.message}")
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    def _drift_lines(self) -> list[str]:
        """``schema drift at <stage>: N record(s) with undeclared fields: a (n), b (m)``, per stage."""
        records: dict[str, float] = {}
        fields: dict[str, dict[str, int]] = {}
        for b in self.batches:
            for stage, n in BatchMetrics.from_report(b.metrics).by_stage(MetricNames.SCHEMA_DRIFT_RECORDS).items():
                records[stage] = records.get(stage, 0.0) + n
            for stage, seen in b.schema_drift.items():
                mine = fields.setdefault(stage, {})
                for name, n in seen.items():
                    mine[name] = mine.get(name, 0) + n
        return [
            f"  schema drift at {stage}: {int(n):,} record(s) with undeclared fields: "
            + ", ".join(f"{name} ({k:,})" for name, k in sorted(fields.get(stage, {}).items()))
            for stage, n in records.items()
            if n
        ]
