"""How one batch reaches its two tables: counted, decided, then written; or written while counted.

A :class:`~quarantine.batch.run.Run` hands its prepared, kept batch here (:class:`Batch`, written
as its :class:`BatchMode` says) with the way to take: whether the policy could stop the
batch (:meth:`ErrorPolicy.may_stop <quarantine.errorhandling.policy.ErrorPolicy.may_stop>`, or a stage
that judges the whole batch, :mod:`quarantine.batch.verdict`, as the expectation stage does).

*Count, decide, write* (``errors.tolerance=none``, limits, handlers that may
fail, judging stages; and a stream's micro-batch after one that failed records,
whatever the policy, so that its two commits are made at once):

1. One noop pass builds the cache and observes every count (records in, failed
   per stage…) — the only pass over the source data.
2. The error policy decides from those counts (:mod:`quarantine.errorhandling.policy`):
   handlers, ``errors.tolerance`` and its limits, and the judging stages'
   breaches with ``on_breach: fail``.
3. The writes. Failed rows always go to the quarantine table
   (:class:`~quarantine.sinks.quarantine.QuarantineWriter`), so a breach fails
   the run *after* the failed records are durable, and then to the error reporters
   (:mod:`quarantine.errorhandling.reporter`: the DLQ topic, the error-context log);
   good rows go to the target exactly once (txn append in streaming, insert-only
   MERGE in batch) only when the policy let the batch go on. The two writes are made
   at once (two Delta commits to two tables, independent of each other): a batch
   pays one commit's latency, not two.

*Write while counting* (a policy that goes on whatever the counts, and replays):

1. The target write is the pass that builds the cache and observes every count
   (one Spark job for a batch without failures).
2. The failed rows, if any, go to the quarantine table from the cache.
3. Handlers run, then the error reporters (neither can fail the batch here).

Either way both writes are durable before :meth:`BatchWriter.write` returns,
i.e. before a stream commits the batch's offsets; if one fails, the batch
fails, and its re-run or restart completes the other without writing anything
twice. Then records open in quarantine that passed are closed (after the target
write: a crash in between leaves them open, and the next run closes them).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from quarantine.batch.plan import Plan
from quarantine.batch.verdict import Verdicts, check_counts, judge_batch
from quarantine.batch.write_plan import TargetWrite
from quarantine.columns import CLOSING, ERROR, FINGERPRINT, OPEN, REOPENED, REUSED, SOURCE_KEY, QuarantineStatus
from quarantine.config import BreachAction
from quarantine.errorhandling.handlers import BatchDecision, counts_by_kind
from quarantine.errorhandling.policy import Scope
from quarantine.errorhandling.reporter import FailedRecords, Reported, report_errors
from quarantine.errorhandling.retry import retried_write
from quarantine.errorhandling.tolerance import ToleranceGuard
from quarantine.errors import ExpectationBreachError, HandlerError, InconsistentBatchError, ToleranceExceededError
from quarantine.identity import Floors
from quarantine.metrics.columns import observed_counts, observed_row
from quarantine.sinks.offset_watermark import OffsetWatermark
from quarantine.sinks.quarantine import QuarantineWrite, close_records
from quarantine.sinks.target import append_batch, evolve_target, merge_new_rows, target_change
from quarantine.stage import Stage

__all__ = ["Batch", "BatchMode", "BatchWriter", "Outcome"]

log = logging.getLogger("quarantine")

T = TypeVar("T")

def _all_of(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``calls`` at once, one thread each; their results in order.

    Every call runs to its end (none is abandoned half-way); then the first
    failure in the order of ``calls`` is raised.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="quarantine-write") as pool:
        futures = [pool.submit(call) for call in calls]
        wait(futures)
    return [f.result() for f in futures]


#: the observed fingerprint of an uncached batch's failed rows (see ``BatchWriter._failed_again``)
_FAILED_FINGERPRINT = "_q_failed_fingerprint"
#: records of a stream's batch from a new checkpoint whose coordinates other content holds
_REUSED_RECORDS = "_q_reused_records"


def _fingerprint(where: Column) -> Column:
    """An order-free fingerprint of the coordinates of the rows ``where`` holds: a sum of 32-bit hashes."""
    h = F.xxhash64(*SOURCE_KEY).bitwiseAND(F.lit(0xFFFFFFFF))
    return F.sum(F.when(where, h))



@dataclass(frozen=True)
class BatchMode:
    """How a batch is written: a batch run's, a replay's, or a stream's micro-batch's.

    Build with :meth:`batch_run`, :meth:`replay` or :meth:`micro_batch`; a mode that
    is two of them at once (a streaming replay, a batch run with a watermark) is refused.

    Attributes:
        streaming: the target is appended (a micro-batch: plainly when it keeps the
            source coordinates, else with ``txnAppId``/``txnVersion`` = batch id), else
            written with an insert-only MERGE.
        replaying: the batch is a replay (:mod:`quarantine.runners.replay`): records that pass
            are closed as ``replayed by run …``; the replay's policy decides.
        watermark, staged, resumed, overlap: a micro-batch's (:meth:`micro_batch`).
        floors: a batch run's batch of what its source added since the last run: the lowest
            offset per topic-partition, below which no settled row is compared or MERGEd
            (:class:`~quarantine.identity.Floors`).
    """

    streaming: bool = False
    replaying: bool = False
    watermark: OffsetWatermark | None = None
    staged: bool = False
    resumed: bool = False
    overlap: OffsetWatermark | None = None
    floors: Floors | None = None

    def __post_init__(self) -> None:
        stream_only = self.watermark is not None or self.staged or self.resumed or self.overlap is not None
        if (self.streaming and self.replaying) or (stream_only and not self.streaming):
            raise ValueError(f"not a batch run, a replay or a micro-batch: {self}")

    @classmethod
    def batch_run(cls, floors: Floors | None = None) -> BatchMode:
        """A batch run's batch: its good rows MERGEd into the target (insert-only); with ``floors``,
        compared with and MERGEd into only the settled rows at or above them."""
        return cls(floors=floors)

    @classmethod
    def replay(cls) -> BatchMode:
        """A replay's batch of open quarantine records: records that pass are closed as replayed."""
        return cls(replaying=True)

    @classmethod
    def micro_batch(
        cls,
        watermark: OffsetWatermark | None = None,
        *,
        staged: bool = False,
        resumed: bool = False,
        overlap: OffsetWatermark | None = None,
    ) -> BatchMode:
        """A stream's micro-batch: its good rows appended (see :func:`~quarantine.sinks.target.append_batch`).

        Args:
            watermark: a Kafka stream's :class:`OffsetWatermark`: once it has
                passed, failed rows are appended to the quarantine table instead
                of MERGEd; until then the batch advances it.
            staged: the batch is already :meth:`Plan.split_frame <quarantine.batch.plan.Plan.split_frame>`
                of a prepared batch (a Kafka stream stages its streaming DataFrame once per
                query, see :meth:`Plan.stage_stream <quarantine.batch.plan.Plan.stage_stream>`,
                instead of building the same plan for every micro-batch).
            resumed: the first micro-batch after a stream (re)started: it may be a
                batch whose writes were made before a crash, so it is counted before it
                is written, and, into a target that keeps the source coordinates, it
                leaves out the records the tables hold (compared with them as a batch
                run's records are); into one without, Delta skips its append under its
                ``txnVersion`` (running no job).
            overlap: a Kafka stream started from a new checkpoint over tables holding
                records of its topics: until it has passed their highest offsets, the
                batch leaves out the records they settled
                (:func:`quarantine.batch.settle.unsettled`).
        """
        return cls(streaming=True, watermark=watermark, staged=staged, resumed=resumed, overlap=overlap)


@dataclass
class Batch:
    """One batch on its way to its two tables (the kept split, how it is written)."""

    split: DataFrame
    chain: Sequence[Stage]
    batch_id: int
    now: dt.datetime
    mode: BatchMode
    #: the watermark had passed when the batch began: failed rows are appended, not MERGEd
    append: bool
    #: whether ``split`` is persisted (else its stages run again for each write that reads it)
    cached: bool = True
    #: the rows the target MERGE's own commit inserted (None: not a MERGE, or it created the table)
    inserted: int | None = None
    #: a stream from a new checkpoint, still inside what the tables hold (:meth:`BatchMode.micro_batch`)
    overlap: OffsetWatermark | None = None
    #: the columns the target gained before this batch's writes (``target.schema_evolution: add_columns``)
    added_columns: tuple[str, ...] = ()
    #: how its good rows reach the target (:func:`~quarantine.batch.write_plan.write_plan`)
    target: TargetWrite = TargetWrite.MERGE


@dataclass
class Outcome:
    """What the writes of a batch left: its counts, the judging stages' verdicts, the policy's failure if any."""

    counts: Mapping[str, Any]
    quarantined: int
    verdicts: Verdicts
    failure: BaseException | None = None
    dlq_attempts: int = 1
    #: what the error reporters (the DLQ topic, the error-context log) did with the failed rows
    reported: Reported = field(default_factory=Reported)


@dataclass
class BatchWriter:
    """A run's writer of its batches: the two ways, the policy's decision, the error reporters.

    Not thread safe: one batch at a time.

    Attributes:
        plan: the pipeline's plan.
        run_id: the run's id (the target append's ``txnAppId``, the quarantine rows' run).
        tolerance: the run's error count and rate-limit window (``errors.tolerance.*``).
    """

    plan: Plan
    run_id: str
    tolerance: ToleranceGuard

    def write(self, b: Batch, *, count_first: bool) -> Outcome:
        """Write ``b`` to both tables, counted first or while written; close its records that passed.

        Returns:
            The outcome; a tolerance, handler or ``on_breach: fail`` failure is in
            :attr:`Outcome.failure`, not raised (the caller publishes the batch first).

        Raises:
            TableWriteError: a write failed after its retries (``QuarantineWriteError``
                for the quarantine table, raised first when both failed).
            InconsistentBatchError: an uncached batch's second run failed other records.
            SchemaMismatchError: the target cannot take the batch's good rows (a field
                retyped, or new under ``target.schema_evolution: fail``), before any write.
        """
        self._fit_target(b)
        return self._count_then_write(b) if count_first else self._write_then_count(b)

    def _fit_target(self, b: Batch) -> None:
        """Before any write of the batch: refuse good rows the target cannot take, add their new columns.

        Compares the schema of the batch's good rows (Spark's analysis: no job runs) with the
        target's (:func:`~quarantine.sinks.target.target_change`); a target the batch creates
        is not looked at. The columns are added in a commit of their own, under the write
        retry policy; the batch's writes then find them.
        """
        pipeline = self.plan
        table = pipeline.target_table
        change = target_change(
            pipeline.spark, table, pipeline.target_rows(b.split).schema,
            evolution=pipeline.config.target.schema_evolution,
        )
        if change is not None and (change.added or change.widened):
            retried_write(
                pipeline.write_operator, "target schema", table, b.batch_id,
                lambda: evolve_target(pipeline.spark, table, change),
            )
            if change.added:
                b.added_columns = tuple(c.name for c in change.added)
                log.info(
                    "target %s: added column(s) %s (older rows read NULL; target.schema_evolution: add_columns)",
                    table, ", ".join(c.name for c in change.added),
                )
            for c in change.widened:
                log.warning(
                    "target %s: widened column %s from %s to %s (Delta type widening, delta.enableTypeWidening: "
                    "readers need Delta 3.2+; target.schema_evolution: add_columns)",
                    table, c.name, c.table_type, c.rows_type,
                )

    def _observed(self, b: Batch) -> list[Column]:
        """Every count the batch's report and policy need, as ``observe`` columns."""
        return [
            *observed_counts(b.chain, ERROR), *check_counts(b.chain, F.col(ERROR)),
            F.count(F.when(F.col(ERROR).isNull() & F.col(OPEN), 1)).alias(CLOSING),
            F.count(F.when(F.col(OPEN), 1)).alias(REOPENED),
            *(b.mode.watermark.observed() if b.mode.watermark is not None and not b.append else ()),
            *(b.overlap.observed() if b.overlap is not None else ()),
            *((F.count(F.col(REUSED)).alias(_REUSED_RECORDS),) if REUSED in b.split.columns else ()),
            *(() if b.cached else (_fingerprint(F.col(ERROR).isNotNull()).alias(_FAILED_FINGERPRINT),)),
        ]

    def _settled(self, b: Batch, counts: Mapping[str, Any]) -> None:
        """After a stream's batch from a new checkpoint was counted: advance its overlap, and say
        how many records at coordinates other content holds it ran as new records."""
        if b.overlap is not None:
            b.overlap.advance(counts)
        reused = int(counts.get(_REUSED_RECORDS) or 0)
        if reused:
            log.warning(
                "batch %s: %s record(s) at coordinates an earlier record with other content holds (a topic "
                "recreated?) ran as new records: a stream's records each get rows of their own",
                b.batch_id, reused,
            )

    def _count_pass(self, split: DataFrame, observed: Sequence[Column]) -> Mapping[str, Any]:
        """One noop pass over ``split`` (building its cache) that observes ``observed``."""
        obs = Observation(f"quarantine_{uuid.uuid4().hex}")
        split.observe(obs, *observed).write.format("noop").mode("overwrite").save()
        return obs.get

    def _count_then_write(self, b: Batch) -> Outcome:
        """Count, let the policy decide, then write: for a policy that may stop the batch.

        One noop pass builds the persisted batch and observes every count; the
        judging stages judge their input (:mod:`quarantine.batch.verdict`); the policy decides (handlers,
        tolerance, ``on_breach: fail``); then the quarantine write (always, its error reporters
        right after it) and the target write (if the batch goes on) are made at once.
        """
        observed = self._observed(b)
        counts = self._count_pass(b.split, observed)
        if b.mode.watermark is not None and not b.append:
            b.mode.watermark.advance(counts)
        self._settled(b, counts)
        # The judging stages (GX's validation of an expectation stage) judge their input on the
        # persisted batch, not the source. Not a replay's: its selection of failed records is no
        # batch of the source, and verdicts over it (a row count, a mean) would be breaches that
        # did not happen (issue 13).
        verdicts = judge_batch(b.split, b.chain, b.batch_id, replaying=b.mode.replaying)
        whole_batch_error = verdicts.batch_error
        if whole_batch_error is not None:
            # on_breach=quarantine_batch: every row goes to quarantine; recount over the cache
            b.split = b.split.withColumn(ERROR, F.coalesce(F.col(ERROR), whole_batch_error))
            counts = self._count_pass(b.split, observed)
        out = Outcome(counts=counts, quarantined=int(counts["records_quarantined"]), verdicts=verdicts)
        # The policy decides from the counts, before anything is written: failed rows
        # go to quarantine either way; good rows only when the batch goes on.
        decision = None
        try:
            decision = self._decide(b, counts, out.quarantined)
            self._enforce(b, decision, out.quarantined)
            failing = verdicts.with_action(BreachAction.FAIL)
            if failing:
                raise ExpectationBreachError(
                    "expectation breach (on_breach=fail): " + "; ".join(x.message for x in failing)
                    + f"; failed records are in {self.plan.quarantine_table}; the target was not written",
                    breaches=failing, count=len(failing),
                )
        except (ToleranceExceededError, HandlerError) as exc:
            out.failure = exc  # published with the batch's metrics, then raised
        writes: list[Callable[[], None]] = []
        if out.quarantined:
            writes.append(lambda: self._report(b, out, self._write_quarantine(b, out.quarantined), b.split, decision))
        if out.failure is None:
            writes.append(lambda: self._write_target(b, b.split))
        # The two tables' commits are independent: made at once, a batch pays one commit's
        # latency. Both are durable before this returns (before a stream commits its offsets);
        # if either fails the batch fails, and its re-run writes neither twice.
        _all_of(writes)
        if out.failure is None and int(counts[CLOSING]):
            self._close_passed(b.split, b.mode.replaying, b.now)
        return out

    def _write_then_count(self, b: Batch) -> Outcome:
        """Write the target while counting, then the quarantine: for a policy that cannot stop the batch.

        The verdict is "go on" whatever the counts (:meth:`ErrorPolicy.may_stop`), so
        the target write is the pass that builds the persisted batch and observes
        every count: one Spark job for a batch with no failures, one more (over the
        cache) for its failed rows. A write that fails fails the batch before the
        other is made; its re-run writes nothing twice (as in :meth:`_count_then_write`).
        """
        observed = self._observed(b)
        obs = Observation(f"quarantine_{uuid.uuid4().hex}")
        self._write_target(b, b.split.observe(obs, *observed))
        counts = observed_row(obs)
        if counts is None:
            # the write ran no job over the batch (a stream's micro-batch Delta had already
            # committed under its txnVersion), or ran it in a query of its own (the first
            # write creating a catalog-named target): count over the cache instead
            counts = self._count_pass(b.split, observed)
        if b.mode.watermark is not None and not b.append:
            b.mode.watermark.advance(counts)
        self._settled(b, counts)
        out = Outcome(counts=counts, quarantined=int(counts["records_quarantined"]), verdicts=Verdicts())
        # an uncached batch's failed rows, run again and cached: its quarantine write and its
        # error reporters read them, not the whole batch a third time
        failed = self._failed_again(b, counts) if out.quarantined and not b.cached else None
        try:
            written = self._write_quarantine(b, out.quarantined, failed) if out.quarantined else None
            # handlers, the error reporters (even when a handler raised), tolerance: nothing in this
            # policy fails the batch
            decision = None
            try:
                decision = self._decide(b, counts, out.quarantined)
            finally:
                if written is not None:
                    self._report(b, out, written, b.split if failed is None else failed, decision)
            self._enforce(b, decision, out.quarantined)
        finally:
            if failed is not None:
                failed.unpersist()
        if int(counts[CLOSING]):
            self._close_passed(b.split, b.mode.replaying, b.now)
        return out

    def _failed_again(self, b: Batch, counts: Mapping[str, Any]) -> DataFrame:
        """An uncached batch's failed rows, its stages run again once, cached (the caller unpersists).

        They are a small part of a mostly clean batch, and are checked against the
        target pass (count and a fingerprint of their coordinates) before anything
        is written.

        Raises:
            InconsistentBatchError: the second run failed other records than the
                first (see the class): nothing was written to quarantine.
        """
        failed = b.split.where(F.col(ERROR).isNotNull()).persist(StorageLevel.MEMORY_AND_DISK)
        again = failed.agg(F.count(F.lit(1)).alias("n"), _fingerprint(F.lit(True)).alias("fp")).first()
        assert again is not None
        first = (int(counts["records_quarantined"]), int(counts[_FAILED_FINGERPRINT] or 0))
        if (int(again["n"]), int(again["fp"] or 0)) != first:
            failed.unpersist()
            raise InconsistentBatchError(
                f"batch {b.batch_id} of pipeline {self.plan.config.pipeline}: the target pass failed "
                f"{first[0]} record(s), the quarantine pass {int(again['n'])} (or other ones): a stage is not "
                "deterministic, or the source changed while it was read twice. Nothing was written to "
                f"{self.plan.quarantine_table}; the target has the first pass's good rows; the batch "
                "is not committed, so a re-run (or the stream's restart) runs its records again, writing "
                "nothing twice"
            )
        return failed

    def _write_quarantine(self, b: Batch, records: int, failed: DataFrame | None = None) -> QuarantineWrite:
        """Write the batch's ``records`` failed rows (``failed``, else ``b.split``'s) to the quarantine table."""
        failed = b.split.where(F.col(ERROR).isNotNull()) if failed is None else failed
        return self.plan.quarantine_writer().write(
            failed, run_id=self.run_id, batch_id=b.batch_id, now=b.now, error=ERROR, append=b.append, records=records,
            floors=b.mode.floors if b.target is TargetWrite.MERGE_BOUNDED else None,
        )

    def _write_target(self, b: Batch, split: DataFrame) -> None:
        """Write the batch's good rows (of ``split``, ``b``'s split or it observed) to the target exactly once.

        A batch run's MERGE sets ``b.inserted`` to the rows its own commit inserted.
        """
        run_id, batch_id = self.run_id, b.batch_id
        good = self.plan.target_rows(split)
        if b.target in (TargetWrite.APPEND, TargetWrite.APPEND_TXN):
            # A target keeping the coordinates is appended plainly: the batch that may hold
            # records the tables have (the first after a start) was compared with them
            # (Run.process_batch); else Delta's transaction identifiers make it exactly once.
            # txnAppId carries the run (= streaming query) id: a new checkpoint restarts
            # batch ids at 0, and Delta would silently skip those appends otherwise.
            txn_version = batch_id if b.target is TargetWrite.APPEND_TXN else None
            retried_write(
                self.plan.write_operator, "target append", self.plan.target_table, batch_id,
                lambda: append_batch(
                    good, self.plan.target_table, pipeline=f"{self.plan.config.pipeline}:{run_id}",
                    batch_id=txn_version, owner=self.plan.config.pipeline,
                    evolution=self.plan.config.target.schema_evolution,
                ),
            )
        else:
            def merge() -> None:
                b.inserted = merge_new_rows(
                    self.plan.spark, good, self.plan.target_table, pipeline=self.plan.config.pipeline,
                    evolution=self.plan.config.target.schema_evolution,
                    floors=b.mode.floors if b.target is TargetWrite.MERGE_BOUNDED else None,
                )

            retried_write(self.plan.write_operator, "target MERGE", self.plan.target_table, batch_id, merge)

    def _close_passed(self, split: DataFrame, replaying: bool, now: dt.datetime) -> None:
        """Close the open quarantine rows of the batch's records that passed.

        Each record's outcome is its own result in this batch, never who wrote its
        quarantine row last. Runs after the target write: a crash in between leaves
        the row open, and the next run or replay runs the record again and closes it.
        """
        passed = split.where(F.col(ERROR).isNull() & F.col(OPEN)).select(*SOURCE_KEY, FINGERPRINT)
        how = "replayed by run" if replaying else "passed on re-run, run"
        retried_write(
            self.plan.write_operator, "quarantine close", self.plan.quarantine_table, 0,
            lambda: close_records(
                self.plan.spark, self.plan.quarantine_table, passed, pipeline=self.plan.config.pipeline,
                status=QuarantineStatus.REPLAYED, resolution=f"{how} {self.run_id}", now=now,
            ),
        )

    def _decide(self, b: Batch, counts: Mapping[str, Any], errors: int) -> BatchDecision | None:
        """The handlers' answers for the batch's ``errors`` failed records (None: it has none).

        Raises:
            HandlerError: a custom handler raised or returned no HandlerResponse.
        """
        if not errors:
            return None
        by_stage = {s.name: int(counts[f"stage:{s.name}"]) for s in b.chain}
        return self.plan.policy().decide(
            counts_by_kind(b.chain, by_stage), run_id=self.run_id, batch_id=b.batch_id, by_stage=by_stage,
            stage_kinds={s.name: s.kind for s in b.chain},
        )

    def _enforce(self, b: Batch, decision: BatchDecision | None, errors: int) -> None:
        """The tolerance guard on the handlers' answers (see :mod:`quarantine.errorhandling.tolerance`).

        A count-first batch is judged before its writes: a breach still writes the quarantine
        rows, then fails the run without writing the target. A replay has its own policy: a
        record that fails again is its expected outcome, so no handler, limit or tolerance
        fails it (it stays open with the new error).

        Raises:
            ToleranceExceededError: a handler said fail, or a tolerance limit broke.
        """
        if decision is not None:
            self.plan.policy().enforce(
                decision, scope=Scope.REPLAY if b.mode.replaying else Scope.RUN, errors=errors, now=b.now,
                batch_id=b.batch_id, tolerance=self.tolerance,
            )

    def _report(
        self, b: Batch, out: Outcome, written: QuarantineWrite, failed: DataFrame, decision: BatchDecision | None
    ) -> None:
        """Right after the quarantine write: tell the plan's error reporters of the failed rows (of
        ``failed``) the table now holds; ``out`` gets what the write and the reporters did.

        The error-context log gets the kinds the handlers log, and a failing kind always (the run
        stops, and the log says which records and why); a replay's too.
        """
        out.dlq_attempts = written.attempts
        kinds = set() if decision is None else {*decision.logged_kinds, *decision.failed_kinds}
        out.reported = report_errors(self.plan.error_reporters(), FailedRecords(
            failed, written.rows, self.plan.config.pipeline, self.run_id, b.batch_id,
            logged_kinds=frozenset(k.value for k in kinds),
            total=0 if decision is None else sum(decision.counts[k] for k in kinds),
        ))

