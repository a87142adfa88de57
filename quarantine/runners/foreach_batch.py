"""A streaming query's ``foreachBatch`` function: each micro-batch run on the query's run.

:class:`BatchRunner` is the function in the client's process: it waits for the query's
id (the run's id, stable across restarts from the same checkpoint), keeps the run and
the reports, and for a Kafka source the offset watermarks that say when a micro-batch
may append (:class:`~quarantine.sinks.offset_watermark.OffsetWatermark`). Over Spark Connect
the function runs in a Python worker the server starts: :class:`ConnectBatches` is sent
there (its stages checked to pickle first: :func:`shippable_stages`) and runs a
:class:`BatchRunner` of its own, whose reports reach the client through
:mod:`quarantine.runners.relay`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from quarantine.assemble import assemble
from quarantine.batch.plan import Plan
from quarantine.batch.run import Run, start_run
from quarantine.batch.writes import BatchMode
from quarantine.config import SourceFormat
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import QuarantineError, SourceError
from quarantine.listeners.events import BatchReport
from quarantine.runners.relay import RelayListener, relay_prefix
from quarantine.sinks.offset_watermark import OffsetWatermark
from quarantine.sinks.target import highest_offsets

if TYPE_CHECKING:
    from quarantine.config import PipelineConfig
    from quarantine.stage import Stage

__all__ = ["OVERLAP_PREFIX", "BatchRunner", "ConnectBatches", "shippable_stages"]

#: the streaming runner's logger: a batch's line is the stream's, wherever the batch ran
log = logging.getLogger("quarantine.runners.streaming")

#: How long a micro-batch waits for the query id before giving up (start() returns in ms).
_ID_WAIT_S = 60.0
#: the observed columns of a new checkpoint's overlap watermark (see BatchRunner._overlap_at)
OVERLAP_PREFIX = "_q_overlap:"


@dataclass
class BatchRunner:
    """The ``foreachBatch`` function: waits for the query id, then runs the batch.

    Keeps the run (one per query id: a restart from the same checkpoint goes on
    with the same run), the reports, and the first pipeline exception so that
    ``run_stream`` re-raises it as itself rather than as Spark's wrapper.
    """

    plan: Plan
    run: Run | None = None
    #: whether the stream's DataFrame was staged once for the query (Plan.stage_stream)
    staged: bool = False
    reports: list[BatchReport] = field(default_factory=list)
    error: BaseException | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    #: Kafka sources: loaded at the first batch of each query start (see OffsetWatermark).
    _watermark: OffsetWatermark | None = None
    #: the next batch is the first of a query start (it may replay a committed batch)
    _resumed: bool = True
    #: a query started from a new checkpoint: the highest offsets the tables held (see _overlap_at)
    _overlap: OffsetWatermark | None = None

    def start(self, query_id: str) -> Run:
        """The query (re)started with ``query_id``: its run (the same one after a restart)."""
        if self.run is None or self.run.run_id != query_id:
            self.run = start_run(self.plan, query_id, listeners=self.run.listeners if self.run else None)
        self._watermark = None  # a (re)started query may replay a batch whose rows are in the table
        self._overlap = None
        self._resumed = True
        self._ready.set()
        return self.run

    def _overlap_at(self, batch_id: int, quarantined: OffsetWatermark) -> OffsetWatermark | None:
        """At a Kafka query's first batch: the offsets the tables hold, when the checkpoint is new.

        A query restarted from its checkpoint reads only offsets after those it committed,
        and its replayed batch (the first after the start) is compared with the tables
        (:meth:`BatchMode.micro_batch`'s ``resumed``) and MERGEs its failed records. A
        query whose first batch is batch 0 started from a new checkpoint (a reset, a
        recreated topic): it may read records the tables already settled, so its batches
        are compared with them until it has passed the highest offset either table holds
        in each topic-partition (one aggregate job over the target, here).
        """
        if batch_id != 0:
            return None
        p = self.plan
        held = dict(quarantined.ahead)
        for tp, offset in highest_offsets(p.spark, p.target_table).items():
            held[tp] = max(offset, held.get(tp, offset))
        return OffsetWatermark(held, prefix=OVERLAP_PREFIX) if held else None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if not self._ready.wait(_ID_WAIT_S):
            raise SourceError("the streaming query did not report its id; refusing to write")
        p = self.plan
        run = self.run
        assert run is not None  # set with the query id, before _ready
        try:
            if self._watermark is None and p.config.source.format is SourceFormat.KAFKA:
                self._watermark = OffsetWatermark.load(p.spark, p.quarantine_table, p.config.pipeline)
                self._overlap = self._overlap_at(int(batch_id), self._watermark)
            report = run.process_batch(df, int(batch_id), BatchMode.micro_batch(
                self._watermark, staged=self.staged, resumed=self._resumed, overlap=self._overlap,
            ))
            self._resumed = False
        except BaseException as exc:
            self.error = self.error or exc
            raise
        self.reports.append(report)
        log.info(
            "batch %s: %s in, %s ok, %s quarantined",
            batch_id, report.records_in, report.records_ok, report.records_quarantined,
        )
        if report.stale_stages:
            # the batch's writes are durable; its records that a refreshed stage would mend (an
            # avro or protobuf stage's schema ids not listed yet) are in quarantine. At most once per batch,
            # never failing it (a source that cannot be asked is logged): the next batch runs it.
            try:
                refresh_stages(p, report.stale_stages)
            except Exception as exc:  # a stage's refresh must not raise; if one does, the batch stands
                log.warning("batch %s: refreshing %s failed: %s", batch_id, ", ".join(report.stale_stages), exc)


def refresh_stages(plan: Plan, names: Iterable[str]) -> list[str]:
    """Refresh ``plan``'s stages named (:meth:`Stage.refreshed <quarantine.stage.Stage.refreshed>`), in place.

    The streaming runner calls it between micro-batches, with the stages whose records
    failed in a way a refresh may mend (:attr:`~quarantine.listeners.events.BatchReport.stale_stages`).
    Each stage is asked once, under the ``errors.retry.*`` policy; a stage that has nothing
    new, or cannot reach its source, stays as it is. ``plan.stages`` is changed in place, so
    the run and the runner holding this plan run the refreshed stages from the next batch;
    nothing else of the plan changes.

    Returns:
        The names of the stages replaced.
    """
    wanted = set(names)
    policy = RetryPolicy.from_config(plan.config.errors)
    replaced: list[str] = []
    for i, stage in enumerate(plan.stages):
        if stage.name in wanted and stage.refreshes():
            fresh = stage.refreshed(policy)
            if fresh is not None:
                plan.stages[i] = fresh
                replaced.append(stage.name)
    return replaced



@dataclass
class ConnectBatches:
    """The ``foreachBatch`` function over Spark Connect: pickled to the server's Python worker.

    Holds what the worker needs to build the pipeline on its own session (the config,
    the built stages) and nothing of the client's (no session, no listeners). At the
    first batch it finds its query by name in the session, builds the pipeline with a
    :class:`~quarantine.runners.relay.RelayListener` as its only listener and a
    :class:`BatchRunner` over it, which runs every batch (the worker lives as long as
    the query, so the run's tolerance count and watermark carry over between batches).
    """

    config: PipelineConfig
    stages: list[Stage]
    name: str
    staged: bool
    _runner: BatchRunner | None = field(default=None, repr=False)
    _relay: RelayListener | None = field(default=None, repr=False)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self._runner is None or self._relay is None:
            spark = df.sparkSession
            query = _active_query(spark, self.name)
            self._relay = RelayListener(spark, relay_prefix(str(query.runId)))
            pipeline = assemble(Plan, self.config, spark, listeners=[self._relay], stages=self.stages)
            self._runner = BatchRunner(pipeline, staged=self.staged)
            self._runner.start(str(query.id))
        try:
            self._runner(df, batch_id)
        except BaseException as exc:
            self._relay.failed(exc)
            raise


def shippable_stages(stages: list[Stage]) -> list[Stage]:
    """``stages``, checked to pickle: over Spark Connect they are sent to the server's worker.

    Raises:
        QuarantineError: a stage does not pickle (a Python-built stage holding a lock, a
            session, an open file…), naming it, before the query starts.
    """
    from pyspark import cloudpickle

    for stage in stages:
        try:
            cloudpickle.dumps(stage)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise QuarantineError(
                f"stage '{stage.name}' cannot be sent to the Spark Connect server, which runs a streaming "
                f"run's batches: it does not pickle ({type(exc).__name__}: {exc}); build it from plain values "
                "(functions by dotted path, no sessions or open resources)"
            ) from None
    return stages


def _active_query(spark: SparkSession, name: str) -> StreamingQuery:
    """The session's active query called ``name`` (foreachBatch runs only while it is active)."""
    deadline = time.monotonic() + _ID_WAIT_S
    while True:
        found = [q for q in spark.streams.active if q.name == name]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise SourceError(f"the streaming query {name} is not active in the session; refusing to write")
        time.sleep(0.2)
