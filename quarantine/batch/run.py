"""One run of a pipeline: its id, its counts, and the batches it processes.

A :class:`~quarantine.batch.plan.Plan` is configuration and pure DataFrame
functions; everything that belongs to one run lives here: the run's id and
:class:`~quarantine.listeners.events.RunInfo`, its metric totals, its tolerance count
(:class:`~quarantine.errorhandling.tolerance.ToleranceGuard`) and its writer. A
runner starts a run (:func:`start_run`) and hands it each batch; the
streaming runner starts one per query id (stable across restarts from the same
checkpoint), so nothing changes the pipeline under a running query but a stage the
runner refreshes between micro-batches (:func:`quarantine.runners.foreach_batch.refresh_stages`).

Order of a batch (:meth:`Run.process_batch`), and why. The stages run and the
batch is projected to what the two writes need (raw bytes kept only for failed
rows), then persisted, so every record's outcome is computed once and both
writes see the same one. Then it goes one of two ways to its two tables
(:mod:`quarantine.batch.writes`), chosen by whether the policy could stop the batch at
all: *count, decide, write*, or *write while counting*. Either way both writes
are durable, and records open in quarantine that passed are closed, before
:meth:`Run.process_batch` returns, i.e. before a stream commits the batch's
offsets. Then the listeners (metrics table, MLflow, logs) get the batch report.

A crash anywhere leaves the offsets uncommitted; the replayed batch rewrites
nothing twice (see :mod:`quarantine.sinks`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.batch.plan import Plan
from quarantine.batch.settle import floors_of, prepare, unsettled
from quarantine.batch.verdict import judging, quarantined_by_check
from quarantine.batch.write_plan import BatchFacts, Hold, write_plan
from quarantine.batch.writes import Batch, BatchMode, BatchWriter
from quarantine.columns import REOPENED, RunKind
from quarantine.errorhandling.fail_on import conditions_held
from quarantine.errorhandling.policy import Scope
from quarantine.errorhandling.tolerance import ToleranceGuard
from quarantine.errors import ConditionFailedError, ExpectationBreachError
from quarantine.lineage import lost_fields
from quarantine.listeners.events import BatchReport, Listeners, RunInfo, RunStatus
from quarantine.metrics.cells import MetricNames, RunMetrics
from quarantine.metrics.columns import stage_key
from quarantine.metrics.observed import batch_metrics, schema_drift
from quarantine.redaction import redact_text
from quarantine.sql import run_query
from quarantine.tables import table_exists

__all__ = ["Run", "start_run"]

log = logging.getLogger("quarantine")

#: the default :class:`BatchMode` of :meth:`Run.process_batch` (frozen: safe to share)
_BATCH_RUN = BatchMode.batch_run()


def _hold(split: DataFrame, streaming: bool) -> DataFrame:
    """``split`` kept as its first pass computes it, for every later read of the batch.

    A batch run's (or a replay's) batch reads the tables it writes: records already
    delivered or closed are left out (:func:`~quarantine.batch.settle.prepare`). A cache of it is
    dropped when either table commits (Spark re-caches a plan whose source changed),
    so the write that comes second, or the close of passed records, would run the
    batch again over the new tables, and a stage that is not deterministic would
    give some records no table or two (``test_a_batch_keeps_its_outcomes_whichever_
    table_commits_first``). Such a batch is local-checkpointed instead: its plan no
    longer reads the tables, and its blocks are computed once. If an executor holding
    them is lost, reading them fails the batch (before a commit, or with a re-run
    that writes nothing twice); it is never computed again.

    A micro-batch of a stream reads only its new offsets, so it is cached (cheaper:
    columnar and compressed); not one from a new checkpoint that is compared with the
    tables (:func:`~quarantine.batch.settle.unsettled`): it reads them, and is checkpointed.

    A batch run's checkpoint is on disk only (``DISK_ONLY``): a batch run reads its whole
    source at once, so its size is the source's, not a trigger's: a read streams a block
    from its file, never copies it back into the heap whole (benchmarks/README.md,
    memory).
    """
    if streaming:
        return split.persist(StorageLevel.MEMORY_AND_DISK)
    return split.localCheckpoint(eager=False, storageLevel=StorageLevel.DISK_ONLY)


def _release(held: DataFrame, streaming: bool) -> None:
    """Free what :func:`_hold` kept (Spark Connect frees a checkpoint when its frame is collected)."""
    if streaming:
        held.unpersist()
        return
    jdf = getattr(held, "_jdf", None)
    if jdf is None:
        return
    try:
        jdf.logicalPlan().rdd().unpersist(False)
    except Exception as exc:  # the blocks go when the frame is collected; never fail a batch for it
        log.warning("could not free the batch's checkpoint blocks now (freed later by Spark): %s", exc)


@dataclass
class Run:
    """One run of a pipeline (a batch run, one streaming query, a replay).

    Build with :func:`start_run`.
    Not thread safe: one batch at a time.

    Attributes:
        plan: the pipeline's plan (configuration and pure functions; no run state).
        info: the run's id, pipeline, source, redacted config and start time.
        metrics: the run's metric totals so far (errant record reporters add theirs).
        tolerance: the run's error count and rate-limit window (``errors.tolerance.*``).
        listeners: the pipeline's listeners, as this run calls them (:class:`Listeners`).
    """

    plan: Plan
    info: RunInfo
    metrics: RunMetrics
    tolerance: ToleranceGuard
    listeners: Listeners
    #: the run's writes of its batches (and their error reports)
    _writer: BatchWriter = field(init=False, repr=False)
    #: whether this run's last batch had failed records (None before its first; see process_batch)
    _last_failed: bool | None = field(default=None, init=False, repr=False)
    #: what the listeners said for the run's summary, once it ended (:meth:`end`)
    notes: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        self._writer = BatchWriter(self.plan, self.info.run_id, self.tolerance)

    @property
    def run_id(self) -> str:
        """The run's id (a streaming query's id: stable across restarts)."""
        return self.info.run_id

    def begin(self) -> None:
        """Tell the listeners the run started; they handle it while the first batch runs."""
        self.listeners.start("on_run_start", self.info)

    def end(self, status: RunStatus, error: BaseException | None = None) -> None:
        """Tell the listeners the run ended; returns once they all have handled it, with what they
        said for the summary in :attr:`notes`."""
        self._warn(self.listeners.call("on_run_end", self.info, status, error), "at the run's end")
        self.notes = self.listeners.summary_lines()
        self.listeners.close()

    def report_batch(self, report: BatchReport) -> None:
        """Send a report of work done outside :meth:`process_batch` (a discard's) to the listeners."""
        self._warn(self.listeners.call("on_batch", report), f"on batch {report.batch_id}")

    def _warn(self, problems: Sequence[BaseException], when: str) -> None:
        for problem in problems:
            log.warning("listener failed %s: %s", when, redact_text(str(problem), self.plan.config.secrets()))

    def process_batch(self, df: DataFrame, batch_id: int, mode: BatchMode = _BATCH_RUN) -> BatchReport:
        """Split one batch and write both tables from one read of it.

        Args:
            df: the batch, Kafka-shaped (or staged: :meth:`BatchMode.micro_batch`).
            batch_id: the micro-batch id (0 for a batch run).
            mode: how the batch is written: :meth:`BatchMode.batch_run` (the default),
                :meth:`BatchMode.replay` or :meth:`BatchMode.micro_batch`.

        Returns:
            The batch report (also sent to the listeners, also when the batch fails
            on tolerance: its metrics are published first, then it raises).

        Raises:
            ToleranceExceededError: after the quarantine write; the target is not written.
            TableWriteError: a write failed after its retries (``QuarantineWriteError``
                for the quarantine table, raised first when both failed); the other
                write may have committed; records open in quarantine are not closed.
            ConditionFailedError: a ``fail_on`` condition holds after the batch's writes
                committed and its report was published (:meth:`check_conditions`).
        """
        run = self.info
        now = self.plan.clock()
        streaming, overlap = mode.streaming, mode.overlap
        prepared = df if mode.staged else prepare(self.plan, df, streaming=streaming, floors=mode.floors)
        chain = self.plan.chain(prepared)
        split = prepared if mode.staged else self.plan.split_frame(prepared)
        scope = Scope.REPLAY if mode.replaying else Scope.RUN
        wp = write_plan(BatchFacts(
            streaming=streaming, replaying=mode.replaying, resumed=mode.resumed,
            overlapping=overlap is not None and not overlap.passed,
            keeps_coordinates=bool(self.plan.config.target.source_columns),
            may_stop=self.plan.policy().may_stop(scope), judging=bool(judging(chain)),
            last_failed=self._last_failed, deterministic=all(s.deterministic for s in chain),
            target_exists=streaming or mode.replaying or table_exists(self.plan.spark, self.plan.target_table),
            bounded=mode.floors is not None,
            watermark_passed=mode.watermark is not None and mode.watermark.passed,
        ))
        if wp.settle:
            # compared with the settled rows at or above the micro-batch's own lowest offsets
            split = unsettled(self.plan, split, floors_of(split if mode.staged else df))
        cached = wp.hold is Hold.CACHE
        persisted = None if wp.hold is Hold.NONE else _hold(split, cached)
        batch = Batch(
            split=persisted if persisted is not None else split, chain=chain, batch_id=batch_id, now=now,
            mode=mode, append=wp.append_quarantine, cached=persisted is not None,
            overlap=overlap if overlap is not None and not overlap.passed else None, target=wp.target,
        )
        try:
            outcome = self._writer.write(batch, count_first=wp.count_first)
        finally:
            if persisted is not None:
                _release(persisted, cached)
        self._last_failed = outcome.quarantined > 0
        counts, quarantined, verdicts, failure = outcome.counts, outcome.quarantined, outcome.verdicts, outcome.failure

        # a tolerance/handler breach is one more breach than the judging stages found (the batch's cell)
        broke = failure is not None and not isinstance(failure, ExpectationBreachError)
        metrics = batch_metrics(
            counts, stages=chain, now=now, errors_logged=outcome.reported.logged,
            dlq_attempts=outcome.dlq_attempts, topic_attempts=outcome.reported.produce_attempts,
            topic_failed_attempts=outcome.reported.produce_failures,
            breaches={**{stage: len(found) for stage, found in verdicts.judged}, None: int(broke)},
        )
        self.metrics.add(metrics)
        records_in = int(counts["records_in"])
        by_stage = {s.name: int(counts[f"stage:{s.name}"]) for s in chain}
        passed = records_in - quarantined
        # what this batch's own commit wrote: records that passed but were in the target already
        # (another writer, or an earlier run that crashed before closing them) are said apart
        written = passed if batch.inserted is None or failure is not None else min(passed, batch.inserted)
        report = BatchReport(
            run=run,
            batch_id=batch_id,
            records_in=records_in,
            records_ok=written,
            already_in_target=passed - written if failure is None else 0,
            reopened=int(counts.get(REOPENED) or 0),
            records_quarantined=quarantined,
            quarantined_by_stage={k: v for k, v in by_stage.items() if v},
            quarantined_by_topic=metrics.topic_counts(MetricNames.RECORDS_QUARANTINED),
            quarantined_by_expectation=quarantined_by_check(chain, counts),
            schema_drift=schema_drift(chain, counts),
            metrics=metrics.as_report(),
            breaches=verdicts.breaches,
            untranslated_expectations=verdicts.notes,
            finished_at=self.plan.clock(),
            stale_stages=tuple(s.name for s in chain if int(counts.get(stage_key("refresh", s.name)) or 0)),
            field_notes=self._field_notes(batch),
        )
        self._warn(self.listeners.call("on_batch", report), f"on batch {batch_id}")
        if failure is not None:
            raise failure
        self.check_conditions()
        return report

    def check_conditions(self) -> None:
        """Fail a pipeline run whose ``fail_on`` conditions hold over what it did so far.

        Judged after each batch's writes committed (:mod:`quarantine.errorhandling.fail_on`):
        the run's records per topic, and, when ``fail_on.open_records`` is set, the pipeline's
        open quarantine rows (one count over the quarantine table). Replays and discards are
        not judged.

        Raises:
            ConditionFailedError: naming each condition that holds.
        """
        fail_on = self.plan.config.fail_on
        if not fail_on.any or self.info.kind is not RunKind.RUN:
            return
        totals = self.metrics.snapshot()
        held = conditions_held(
            fail_on,
            totals.by_topic(MetricNames.RECORDS_IN),
            totals.by_topic(MetricNames.RECORDS_QUARANTINED),
            self._open_records() if fail_on.open_records is not None else None,
        )
        if held:
            raise ConditionFailedError(held)

    def _open_records(self) -> int:
        """The pipeline's open quarantine rows (the SQL library's ``open_records``, summed)."""
        plan = self.plan
        if not table_exists(plan.spark, plan.quarantine_table):
            return 0
        rows = run_query(
            plan.spark, "open_records", {"pipeline": plan.config.pipeline}, {"quarantine": plan.quarantine_table}
        ).agg(F.sum("records")).first()
        return int(rows[0] or 0) if rows is not None else 0

    def _field_notes(self, batch: Batch) -> tuple[str, ...]:
        """The summary's lines about fields: the target's new columns, the fields no stage brings to it."""
        added = (
            (f"target {self.plan.target_table}: added column(s) {', '.join(batch.added_columns)} (older rows read "
             "NULL; target.schema_evolution: add_columns)",)
            if batch.added_columns else ()
        )
        return added + tuple(lost.describe() for lost in lost_fields(self.plan.stages))


def start_run(
    plan: Plan, run_id: str | None = None, *, listeners: Listeners | None = None, kind: RunKind = RunKind.RUN
) -> Run:
    """A new run of ``plan``: its id (a new one by default), counts and tolerance.

    The batch runner starts one per run, the streaming runner one per query id
    (stable across restarts), a replay one per replay; an
    :class:`~quarantine.runners.errant.ErrantRecordReporter` reports into one.

    Args:
        plan: the pipeline's plan (a :class:`~quarantine.pipeline.Pipeline` is one).
        run_id: the run's id (a new one by default).
        listeners: the listeners' dispatch to go on with (a restarted query's run);
            by default a new one over the plan's listeners.
        kind: what the run does (a replay and a discard are runs of their own kind).

    Raises:
        ConfigError: the run writes quarantine rows (a run or a replay) under an encryption key this
            process cannot read (:meth:`~quarantine.keyring.KeyRing.sealing`): before anything is read.
    """
    if kind is not RunKind.DISCARD:
        plan.key_ring().sealing()
    rid = run_id or uuid.uuid4().hex
    config = plan.config
    info = RunInfo(
        pipeline=config.pipeline, run_id=rid, source=config.source.location,
        config=config.redacted(), started_at=plan.clock(), kind=kind,
    )
    return Run(
        plan=plan, info=info, metrics=RunMetrics(run_id=rid), tolerance=plan.policy().tolerance(rid),
        listeners=listeners or Listeners(plan.listeners),
    )
