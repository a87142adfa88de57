"""One run of a pipeline: its id, its counts, and the batches it processes.

A :class:`~quarantine.plan.Plan` is configuration and pure DataFrame
functions; everything that belongs to one run lives here: the run's id and
:class:`~quarantine.report.RunInfo`, its metric totals, its tolerance count
(:class:`~quarantine.tolerance.ToleranceGuard`) and its error-context log. A
runner starts a run (:func:`start_run`) and hands it each batch; the
streaming runner starts one per query id (stable across restarts from the same
checkpoint), so nothing changes the pipeline under a running query.

Order of a batch (:meth:`Run.process_batch`), and why. The stages run and the
batch is projected to what the two writes need (raw bytes kept only for failed
rows), then persisted, so every record's outcome is computed once and both
writes see the same one. Then it goes one of two ways, chosen by whether the
policy could stop the batch at all (:meth:`ErrorPolicy.may_stop
<quarantine.policy.ErrorPolicy.may_stop>`, or a stage that judges the whole
batch, :mod:`quarantine.verdict`, as the expectation stage does with GX):

*Count, decide, write* (``errors.tolerance=none``, limits, handlers that may
fail, judging stages):

1. One noop pass builds the cache and observes every count (records in, failed
   per stage…) — the only pass over the source data.
2. The error policy decides from those counts (:mod:`quarantine.policy`):
   handlers, the error-context log, ``errors.tolerance`` and its limits, and
   the judging stages' breaches with ``on_breach: fail``.
3. The writes. Failed rows always go to the quarantine table
   (:class:`~quarantine.sinks.quarantine.QuarantineWriter`), so a breach fails
   the run *after* the failed records are durable; good rows go to the target
   exactly once (txn append in streaming, insert-only MERGE in batch) only when
   the policy let the batch go on. The two writes are made at once (two Delta
   commits to two tables, independent of each other): a batch pays one commit's
   latency, not two.

It is also the way of a stream's micro-batch after one that failed records, whatever
the policy: the noop pass costs less than the second commit it saves waiting for (the
two are made at once; benchmarks/README.md, streaming).

*Write while counting* (a policy that goes on whatever the counts, and replays):

1. The target write is the pass that builds the cache and observes every count
   (one Spark job for a batch without failures).
2. The failed rows, if any, go to the quarantine table from the cache.
3. Handlers and the error-context log run (they cannot fail the batch here).

Either way both writes are durable before :meth:`Run.process_batch` returns,
i.e. before a stream commits the batch's offsets; if one fails, the batch
fails, and its re-run or restart completes the other without writing anything
twice. Then:

4. Records open in quarantine that passed are closed (after the target write:
   a crash in between leaves them open, and the next run closes them).
5. Listeners (metrics table, MLflow, logs) get the batch report.

A crash anywhere in 1-5 leaves the offsets uncommitted; the replayed batch
rewrites nothing twice (see :mod:`quarantine.sinks`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from quarantine.config import BreachAction
from quarantine.errors import (
    ExpectationBreachError,
    HandlerError,
    InconsistentBatchError,
    ToleranceExceededError,
)
from quarantine.handlers import counts_by_kind
from quarantine.listeners.error_log import ErrorContextLogger, sample_errors
from quarantine.metric_columns import observed_counts
from quarantine.metrics import MetricNames, RunMetrics
from quarantine.observed_metrics import batch_metrics, schema_drift
from quarantine.offset_watermark import OffsetWatermark
from quarantine.plan import Plan
from quarantine.policy import Scope
from quarantine.redaction import redact_text
from quarantine.report import BatchReport, Listeners, RunInfo, RunKind, RunStatus
from quarantine.schema import CLOSING, ERROR, FINGERPRINT, OPEN, REUSED, SOURCE_KEY, QuarantineStatus
from quarantine.sinks.dlq_topic import TopicProduce
from quarantine.sinks.quarantine import QuarantineWrite, close_records
from quarantine.sinks.target import append_batch, merge_new_rows
from quarantine.stage import Stage
from quarantine.tolerance import ToleranceGuard
from quarantine.verdict import Verdicts, check_counts, judge_batch, judging, quarantined_by_check

__all__ = ["Run", "start_run"]

log = logging.getLogger("quarantine")

T = TypeVar("T")


def _hold(split: DataFrame, streaming: bool) -> DataFrame:
    """``split`` kept as its first pass computes it, for every later read of the batch.

    A batch run's (or a replay's) batch reads the tables it writes: records already
    delivered or closed are left out (:meth:`Plan.prepare`). A cache of it is
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
    tables (:meth:`Plan.unsettled`): it reads them, and is checkpointed.

    A batch run's checkpoint is on disk only (``DISK_ONLY``): a batch run reads its whole
    source at once, so its size is the source's, not a trigger's. Kept in memory
    (``MEMORY_AND_DISK``), a 5M-record, 50%-poison batch ran a 2 GiB driver out of heap:
    Spark copies a spilled block back into memory whole each time it is read
    (``BlockManager.maybeCacheDiskBytesInMemory``). On disk, a read streams the block
    from the file (the OS page cache keeps it warm). Serialized either way: ``_DESER``
    saved ~1-2 s per 1M rows but ran out of heap unrolling the same batch
    (benchmarks/README.md, memory).
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


def _collected(obs: Observation, timeout_s: float = 10.0) -> Mapping[str, Any] | None:
    """``obs``'s metrics once the action that carried it has run; None if none ran it.

    A classic session completes observations from its listener bus, a moment
    after the action returns: wait up to ``timeout_s`` for them (``Observation.get``
    would wait for ever if the action skipped its job). Spark Connect returns them
    with the action's result.
    """
    jo = getattr(obs, "_jo", None)
    if jo is None:
        try:
            return obs.get
        except Exception:
            return None
    future = jo.future()
    deadline = time.monotonic() + timeout_s
    while not future.isCompleted():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)
    return obs.get


#: the observed fingerprint of an uncached batch's failed rows (see ``Run._failed_again``)
_FAILED_FINGERPRINT = "_q_failed_fingerprint"
#: records of a stream's batch from a new checkpoint whose coordinates other content holds
_REUSED_RECORDS = "_q_reused_records"


def _fingerprint(where: Column) -> Column:
    """An order-free fingerprint of the coordinates of the rows ``where`` holds: a sum of 32-bit hashes."""
    h = F.xxhash64("topic", "partition", "offset").bitwiseAND(F.lit(0xFFFFFFFF))
    return F.sum(F.when(where, h))


@dataclass
class _Batch:
    """One batch on its way through :meth:`Run.process_batch` (the persisted split and its flags)."""

    split: DataFrame
    chain: Sequence[Stage]
    batch_id: int
    now: dt.datetime
    streaming: bool
    replaying: bool
    watermark: OffsetWatermark | None
    append: bool
    #: whether ``split`` is persisted (else its stages run again for each write that reads it)
    cached: bool = True
    #: the rows the target MERGE's own commit inserted (None: not a MERGE, or it created the table)
    inserted: int | None = None
    #: a stream from a new checkpoint, still inside what the tables hold (see process_batch)
    overlap: OffsetWatermark | None = None


@dataclass
class _Outcome:
    """What the writes of a batch left: its counts, the judging stages' verdicts, the policy's failure if any."""

    counts: Mapping[str, Any]
    quarantined: int
    verdicts: Verdicts
    failure: BaseException | None = None
    logged: int = 0
    dlq_attempts: int = 1
    #: the DLQ topic's produce, when one is configured and there were failed rows
    topic: TopicProduce | None = None


@dataclass
class Run:
    """One run of a pipeline (a batch run, one streaming query, a replay).

    Build with :func:`start_run`.
    Not thread safe: one batch at a time.

    Attributes:
        pipeline: the pipeline's plan (configuration and pure functions; no run state).
        info: the run's id, pipeline, source, redacted config and start time.
        metrics: the run's metric totals so far (errant record reporters add theirs).
        tolerance: the run's error count and rate-limit window (``errors.tolerance.*``).
        listeners: the pipeline's listeners, as this run calls them (:class:`Listeners`).
    """

    pipeline: Plan
    info: RunInfo
    metrics: RunMetrics
    tolerance: ToleranceGuard
    listeners: Listeners
    _error_log: ErrorContextLogger | None = field(default=None, init=False, repr=False)
    #: whether this run's last batch had failed records (None before its first; see process_batch)
    _last_failed: bool | None = field(default=None, init=False, repr=False)

    @property
    def run_id(self) -> str:
        """The run's id (a streaming query's id: stable across restarts)."""
        return self.info.run_id

    def begin(self) -> None:
        """Tell the listeners the run started; they handle it while the first batch runs."""
        self.listeners.start("on_run_start", self.info)

    def end(self, status: RunStatus, error: BaseException | None = None) -> None:
        """Tell the listeners the run ended; returns once they all have handled it."""
        self._warn(self.listeners.call("on_run_end", self.info, status, error), "at the run's end")
        self.listeners.close()

    def report_batch(self, report: BatchReport) -> None:
        """Send a report of work done outside :meth:`process_batch` (a discard's) to the listeners."""
        self._warn(self.listeners.call("on_batch", report), f"on batch {report.batch_id}")

    def _warn(self, problems: Sequence[BaseException], when: str) -> None:
        for problem in problems:
            log.warning("listener failed %s: %s", when, redact_text(str(problem), self.pipeline.config.secrets()))

    def process_batch(
        self,
        df: DataFrame,
        batch_id: int,
        *,
        streaming: bool = False,
        replaying: bool = False,
        watermark: OffsetWatermark | None = None,
        staged: bool = False,
        resumed: bool = False,
        overlap: OffsetWatermark | None = None,
    ) -> BatchReport:
        """Split one batch and write both tables from one read of it.

        Args:
            df: the batch, Kafka-shaped.
            batch_id: the micro-batch id (0 for a batch run).
            streaming: write the target with ``txnAppId``/``txnVersion`` = batch id
                (streaming), else with an insert-only MERGE (batch).
            replaying: the batch is a replay (:mod:`quarantine.replay`): records that
                pass are closed as ``replayed by run …``.
            watermark: a Kafka stream's :class:`OffsetWatermark`: once it has
                passed, failed rows are appended to the quarantine table instead
                of MERGEd; until then the batch advances it.
            staged: ``df`` is already :meth:`Plan.split_frame` of a prepared batch (a
                Kafka stream stages its streaming DataFrame once per query, see
                :meth:`Plan.stage_stream`, instead of building the same plan for
                every micro-batch).
            resumed: the first micro-batch after a stream (re)started: it may be a
                batch whose target append Delta already committed (then skipped under
                its ``txnVersion``, running no job), so it is counted before it is
                written.
            overlap: a Kafka stream started from a new checkpoint over tables holding
                records of its topics: until it has passed their highest offsets, the
                batch leaves out the records they settled (:meth:`Plan.unsettled`).

        Returns:
            The batch report (also sent to the listeners, also when the batch fails
            on tolerance: its metrics are published first, then it raises).

        Raises:
            ToleranceExceededError: after the quarantine write; the target is not written.
            TableWriteError: a write failed after its retries (``QuarantineWriteError``
                for the quarantine table, raised first when both failed); the other
                write may have committed; records open in quarantine are not closed.
        """
        run = self.info
        now = self.pipeline.clock()
        prepared = df if staged else self.pipeline.prepare(df, streaming=streaming)
        chain = self.pipeline.chain(prepared)
        split = prepared if staged else self.pipeline.split_frame(prepared)
        # a stream from a new checkpoint, inside what the tables hold: compared with them (reads them)
        settling = overlap is not None and not overlap.passed
        if settling:
            split = self.pipeline.unsettled(split)
        scope = Scope.REPLAY if replaying else Scope.RUN
        count_first = resumed or self.pipeline.policy().may_stop(scope) or bool(judging(chain))
        # Without a cache, the stages run again for the quarantine write: only where they give
        # every record the same outcome, and only after a clean batch of this run. The bet, measured
        # on 1M records (benchmarks/README.md): a clean batch saves the cache's ~3.5 s (12.4 -> 8.4 s),
        # a 10%-poison batch pays the stages twice (16.3 -> 27.4 s).
        rerun = (
            not count_first and not settling and self._last_failed is False and all(s.deterministic for s in chain)
        )
        # A cached batch is built by a plain job: Delta's MERGE (a batch run's target write) plans
        # its source anew and does not fill the cache, so a stage that is not deterministic would
        # give the MERGE and the quarantine write different outcomes (records lost; see
        # tests/integration/test_runner_paths.py). Streaming appends build it as they write.
        # A stream's batch after one that failed records most likely fails some too. Counted
        # first (a noop pass over the cache), its target and quarantine commits are made at once
        # and it pays one commit's latency; written while counted, the quarantine write waits for
        # the target's commit. Measured side by side (benchmarks/README.md, streaming): 200k
        # Kafka records at 1 % poison, 18.6 -> 16.4 s, p50 micro-batch 1,637 -> 1,458 ms.
        count_first = count_first or (not rerun and (not streaming or self._last_failed is True))
        # a stream's batch compared with the tables reads them, as a batch run's does: checkpointed
        persisted = None if rerun else _hold(split, streaming and not settling)
        batch = _Batch(
            split=persisted if persisted is not None else split, chain=chain, batch_id=batch_id, now=now,
            streaming=streaming, replaying=replaying, watermark=watermark,
            append=watermark is not None and watermark.passed, cached=persisted is not None,
            overlap=overlap if settling else None,
        )
        try:
            outcome = self._count_then_write(batch) if count_first else self._write_then_count(batch)
        finally:
            if persisted is not None:
                _release(persisted, streaming and not settling)
        self._last_failed = outcome.quarantined > 0
        counts, quarantined, verdicts, failure = outcome.counts, outcome.quarantined, outcome.verdicts, outcome.failure
        logged, dlq_attempts = outcome.logged, outcome.dlq_attempts

        # a tolerance/handler breach is one more breach than the judging stages found
        broke = failure is not None and not isinstance(failure, ExpectationBreachError)
        metrics = batch_metrics(
            counts, stages=chain, now=now, errors_logged=logged, dlq_attempts=dlq_attempts,
            topic_attempts=outcome.topic.attempts if outcome.topic else 0,
            topic_failed_attempts=outcome.topic.failed_attempts if outcome.topic else 0,
            breaches=len(verdicts.breaches) + int(broke),
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
            records_quarantined=quarantined,
            quarantined_by_stage={k: v for k, v in by_stage.items() if v},
            quarantined_by_topic=metrics.topic_counts(MetricNames.RECORDS_QUARANTINED),
            quarantined_by_expectation=quarantined_by_check(chain, counts),
            schema_drift=schema_drift(chain, counts),
            metrics=metrics.as_report(),
            breaches=verdicts.breaches,
            untranslated_expectations=verdicts.notes,
            finished_at=self.pipeline.clock(),
        )
        self._warn(self.listeners.call("on_batch", report), f"on batch {batch_id}")
        if failure is not None:
            raise failure
        return report

    def _observed(self, b: _Batch) -> list[Column]:
        """Every count the batch's report and policy need, as ``observe`` columns."""
        return [
            *observed_counts(b.chain, ERROR), *check_counts(b.chain, F.col(ERROR)),
            F.count(F.when(F.col(ERROR).isNull() & F.col(OPEN), 1)).alias(CLOSING),
            *(b.watermark.observed() if b.watermark is not None and not b.append else ()),
            *(b.overlap.observed() if b.overlap is not None else ()),
            *((F.count(F.col(REUSED)).alias(_REUSED_RECORDS),) if REUSED in b.split.columns else ()),
            *(() if b.cached else (_fingerprint(F.col(ERROR).isNotNull()).alias(_FAILED_FINGERPRINT),)),
        ]

    def _settled(self, b: _Batch, counts: Mapping[str, Any]) -> None:
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

    def _count_then_write(self, b: _Batch) -> _Outcome:
        """Count, let the policy decide, then write: for a policy that may stop the batch.

        One noop pass builds the persisted batch and observes every count; the
        judging stages judge their input (:mod:`quarantine.verdict`); the policy decides (handlers,
        error log, tolerance, ``on_breach: fail``); then the quarantine write
        (always) and the target write (if the batch goes on) are made at once.
        """
        observed = self._observed(b)
        counts = self._count_pass(b.split, observed)
        if b.watermark is not None and not b.append:
            b.watermark.advance(counts)
        self._settled(b, counts)
        # The judging stages (GX's validation of an expectation stage) judge their input on the
        # persisted batch, not the source. Not a replay's: its selection of failed records is no
        # batch of the source, and verdicts over it (a row count, a mean) would be breaches that
        # did not happen (issue 13).
        verdicts = judge_batch(b.split, b.chain, b.batch_id, replaying=b.replaying)
        whole_batch_error = verdicts.batch_error
        if whole_batch_error is not None:
            # on_breach=quarantine_batch: every row goes to quarantine; recount over the cache
            b.split = b.split.withColumn(ERROR, F.coalesce(F.col(ERROR), whole_batch_error))
            counts = self._count_pass(b.split, observed)
        out = _Outcome(counts=counts, quarantined=int(counts["records_quarantined"]), verdicts=verdicts)
        # The policy decides from the counts, before anything is written: failed rows
        # go to quarantine either way; good rows only when the batch goes on.
        try:
            out.logged = self._check_tolerance(
                counts, b.chain, out.quarantined, b.now, b.batch_id, b.split, b.replaying
            )
            failing = verdicts.with_action(BreachAction.FAIL)
            if failing:
                raise ExpectationBreachError(
                    "expectation breach (on_breach=fail): " + "; ".join(x.message for x in failing)
                    + f"; failed records are in {self.pipeline.quarantine_table}; the target was not written",
                    breaches=failing, count=len(failing),
                )
        except (ToleranceExceededError, HandlerError) as exc:
            out.failure = exc  # published with the batch's metrics, then raised
        writes: list[Callable[[], QuarantineWrite | None]] = []
        if out.quarantined:
            writes.append(lambda: self._write_quarantine(b, out.quarantined))
        if out.failure is None:
            writes.append(lambda: self._write_target(b, b.split))
        # The two tables' commits are independent: made at once, a batch pays one commit's
        # latency. Both are durable before this returns (before a stream commits its offsets);
        # if either fails the batch fails, and its re-run writes neither twice.
        done = _all_of(writes)
        if out.quarantined and done[0] is not None:
            out.dlq_attempts, out.topic = done[0].attempts, done[0].topic
        if out.failure is None and int(counts[CLOSING]):
            self._close_passed(b.split, b.replaying, b.now)
        return out

    def _write_then_count(self, b: _Batch) -> _Outcome:
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
        counts = _collected(obs)
        if counts is None:
            # the write ran no job over the batch (a stream's micro-batch Delta had already
            # committed under its txnVersion): count over the cache instead
            counts = self._count_pass(b.split, observed)
        if b.watermark is not None and not b.append:
            b.watermark.advance(counts)
        self._settled(b, counts)
        out = _Outcome(counts=counts, quarantined=int(counts["records_quarantined"]), verdicts=Verdicts())
        # an uncached batch's failed rows, run again and cached: its quarantine write and its
        # error-log sample read them, not the whole batch a third time
        failed = self._failed_again(b, counts) if out.quarantined and not b.cached else None
        try:
            if out.quarantined:
                written = self._write_quarantine(b, out.quarantined, failed)
                out.dlq_attempts, out.topic = written.attempts, written.topic
            # handlers and the error-context log; nothing in this policy fails the batch
            out.logged = self._check_tolerance(
                counts, b.chain, out.quarantined, b.now, b.batch_id, b.split if failed is None else failed,
                b.replaying,
            )
        finally:
            if failed is not None:
                failed.unpersist()
        if int(counts[CLOSING]):
            self._close_passed(b.split, b.replaying, b.now)
        return out

    def _failed_again(self, b: _Batch, counts: Mapping[str, Any]) -> DataFrame:
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
                f"batch {b.batch_id} of pipeline {self.pipeline.config.pipeline}: the target pass failed "
                f"{first[0]} record(s), the quarantine pass {int(again['n'])} (or other ones): a stage is not "
                "deterministic, or the source changed while it was read twice. Nothing was written to "
                f"{self.pipeline.quarantine_table}; the target has the first pass's good rows; the batch "
                "is not committed, so a re-run (or the stream's restart) runs its records again, writing "
                "nothing twice"
            )
        return failed

    def _write_quarantine(self, b: _Batch, records: int, failed: DataFrame | None = None) -> QuarantineWrite:
        """Write the batch's ``records`` failed rows (``failed``, else ``b.split``'s) to quarantine and DLQ topic."""
        failed = b.split.where(F.col(ERROR).isNotNull()) if failed is None else failed
        return self.pipeline.quarantine_writer().write(
            failed, run_id=self.run_id, batch_id=b.batch_id, now=b.now, error=ERROR, append=b.append, records=records
        )

    def _write_target(self, b: _Batch, split: DataFrame) -> None:
        """Write the batch's good rows (of ``split``, ``b``'s split or it observed) to the target exactly once.

        A batch run's MERGE sets ``b.inserted`` to the rows its own commit inserted.
        """
        run_id, batch_id = self.run_id, b.batch_id
        good = self.pipeline.target_rows(split)
        if b.streaming:
            self.pipeline.write(
                "target append", self.pipeline.target_table, batch_id,
                # txnAppId carries the run (= streaming query) id: a new checkpoint restarts
                # batch ids at 0, and Delta would silently skip those appends otherwise.
                lambda: append_batch(
                    good, self.pipeline.target_table, pipeline=f"{self.pipeline.config.pipeline}:{run_id}",
                    batch_id=batch_id, owner=self.pipeline.config.pipeline,
                ),
            )
        else:
            def merge() -> None:
                b.inserted = merge_new_rows(
                    self.pipeline.spark, good, self.pipeline.target_table, pipeline=self.pipeline.config.pipeline
                )

            self.pipeline.write("target MERGE", self.pipeline.target_table, batch_id, merge)

    def _close_passed(self, split: DataFrame, replaying: bool, now: dt.datetime) -> None:
        """Close the open quarantine rows of the batch's records that passed.

        Each record's outcome is its own result in this batch, never who wrote its
        quarantine row last. Runs after the target write: a crash in between leaves
        the row open, and the next run or replay runs the record again and closes it.
        """
        passed = split.where(F.col(ERROR).isNull() & F.col(OPEN)).select(*SOURCE_KEY, FINGERPRINT)
        how = "replayed by run" if replaying else "passed on re-run, run"
        self.pipeline.write(
            "quarantine close", self.pipeline.quarantine_table, 0,
            lambda: close_records(
                self.pipeline.spark, self.pipeline.quarantine_table, passed, pipeline=self.pipeline.config.pipeline,
                status=QuarantineStatus.REPLAYED, resolution=f"{how} {self.run_id}", now=now,
            ),
        )

    def _check_tolerance(
        self, counts: Mapping[str, Any], chain: Sequence[Stage], errors: int, now: dt.datetime, batch_id: int,
        split: DataFrame, replaying: bool = False,
    ) -> int:
        """Handlers, error-context log, then the tolerance guard; returns lines logged.

        Runs before the batch's writes: a breach still writes the quarantine rows,
        then fails the run without writing the target (see :mod:`quarantine.handlers`,
        :mod:`quarantine.listeners.error_log`, :mod:`quarantine.tolerance`).

        A replay has its own policy: a record that fails again is its expected
        outcome, so no handler, limit or tolerance fails it (it stays open with
        the new error); the error-context log still runs.

        Raises:
            HandlerError: a custom handler raised or returned no HandlerResponse.
            ToleranceExceededError: a handler said fail, or a tolerance limit broke.
        """
        if not errors:
            return 0
        cfg = self.pipeline.config.errors
        policy = self.pipeline.policy()
        by_stage = {s.name: int(counts[f"stage:{s.name}"]) for s in chain}
        decision = policy.decide(
            counts_by_kind(chain, by_stage), run_id=self.run_id, batch_id=batch_id, by_stage=by_stage,
            stage_kinds={s.name: s.kind for s in chain},
        )
        # a failing kind is always logged: the run stops, and the log says which records and why
        kinds = set(decision.logged_kinds) | set(decision.failed_kinds)
        logged = 0
        if kinds:
            if self._error_log is None:
                self._error_log = ErrorContextLogger.from_config(
                    cfg, config=self.pipeline.config.redacted(), secrets=self.pipeline.config.secrets()
                )
            # a bounded sample (limit + collect) of the persisted batch, never a count
            sample = sample_errors(
                split, error=ERROR, kinds={k.value for k in kinds},
                include_messages=cfg.log_include_messages,
            ).collect()
            logged = self._error_log.log_batch(
                [r.asDict() for r in sample], pipeline=self.pipeline.config.pipeline, run_id=self.run_id,
                batch_id=batch_id, total=sum(decision.counts[k] for k in kinds),
            )
        policy.enforce(
            decision, scope=Scope.REPLAY if replaying else Scope.RUN, errors=errors, now=now,
            batch_id=batch_id, tolerance=self.tolerance,
        )
        return logged


def start_run(
    plan: Plan, run_id: str | None = None, *, listeners: Listeners | None = None, kind: RunKind = RunKind.RUN
) -> Run:
    """A new run of ``plan``: its id (a new one by default), counts and tolerance.

    The batch runner starts one per run, the streaming runner one per query id
    (stable across restarts), a replay one per replay; an
    :class:`~quarantine.reporter.ErrantRecordReporter` reports into one.

    Args:
        plan: the pipeline's plan (a :class:`~quarantine.pipeline.Pipeline` is one).
        run_id: the run's id (a new one by default).
        listeners: the listeners' dispatch to go on with (a restarted query's run);
            by default a new one over the plan's listeners.
        kind: what the run does (a replay and a discard are runs of their own kind).
    """
    rid = run_id or uuid.uuid4().hex
    config = plan.config
    info = RunInfo(
        pipeline=config.pipeline, run_id=rid, source=config.source.location,
        config=config.redacted(), started_at=plan.clock(), kind=kind,
    )
    return Run(
        pipeline=plan, info=info, metrics=RunMetrics(run_id=rid), tolerance=plan.policy().tolerance(rid),
        listeners=listeners or Listeners(plan.listeners),
    )
