"""How a batch is written, chosen once from the batch's facts: one pure function, a table of cases.

:func:`write_plan` takes what is known of a batch before it runs (:class:`BatchFacts`: what kind
of batch, what the policy may do, the stages, the last batch's outcome, the target) and returns
the :class:`WritePlan` :meth:`quarantine.batch.run.Run.process_batch` and
:class:`quarantine.batch.writes.BatchWriter` follow. The reasons, one line each:

* **settle**: a stream's micro-batch is compared with what the tables settled when the
  stream started from a new checkpoint inside what they hold (``overlap``), or when it is the
  first after a restart into a target appended plainly (it may be a batch written before a
  crash); a batch run's records always are (:func:`quarantine.batch.settle.prepare`).
* **count first** when the policy may stop the batch, a stage judges the whole batch, the
  batch is the first after a restart, or the target is MERGEd (the MERGE plans its source
  anew and does not fill a cache); and for a stream's batch after one that failed records
  (its two commits are then made at once). Otherwise the target write counts as it writes.
* **no cache** (the stages run again for the quarantine write) only after a clean batch of
  this run, when the batch is written while counted, is not compared with the tables, and
  every stage gives each record the same outcome.
* **hold**: a stream's batch that reads only its offsets is cached; one that reads the tables
  (compared with them, a batch run's, a replay's) is checkpointed, so a commit of either
  table does not make Spark compute it again.
* **target**: a micro-batch appends (under ``txnAppId``/``txnVersion`` unless the target keeps
  the source coordinates); a batch run and a replay MERGE insert-only, bounded by the batch's
  lowest offsets when it holds only what the source added since the last run.
* **quarantine**: appended once a Kafka stream passed the offsets the table held; MERGEd before.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["BatchFacts", "Hold", "TargetWrite", "WritePlan", "write_plan"]


class Hold(StrEnum):
    """How the batch's split is kept for its second read."""

    NONE = "none"
    CACHE = "cache"
    CHECKPOINT = "checkpoint"


class TargetWrite(StrEnum):
    """How the batch's good rows reach the target."""

    APPEND = "append"
    APPEND_TXN = "append with txnAppId/txnVersion"
    MERGE = "insert-only MERGE"
    MERGE_BOUNDED = "insert-only MERGE above the batch's lowest offsets"


@dataclass(frozen=True)
class BatchFacts:
    """What is known of a batch before it runs.

    Attributes:
        streaming: a stream's micro-batch (else a batch run's batch or a replay's).
        replaying: a replay's batch.
        resumed: the first micro-batch after the stream (re)started.
        overlapping: a stream from a new checkpoint, still inside what the tables hold.
        keeps_coordinates: the target keeps the source coordinates (``target.source_columns``).
        may_stop: the policy may stop the batch (tolerance none, limits, handlers that fail).
        judging: a stage judges the whole batch (the expectation stage).
        last_failed: whether this run's last batch had failed records (None: the first).
        deterministic: every stage gives each record the same outcome.
        target_exists: the target exists (always True for a stream's batch: not looked up).
        bounded: the batch holds only what the source added since the last run (floors known).
        watermark_passed: a Kafka stream has passed the offsets the quarantine table held.
    """

    streaming: bool = False
    replaying: bool = False
    resumed: bool = False
    overlapping: bool = False
    keeps_coordinates: bool = True
    may_stop: bool = False
    judging: bool = False
    last_failed: bool | None = None
    deterministic: bool = True
    target_exists: bool = True
    bounded: bool = False
    watermark_passed: bool = False


@dataclass(frozen=True)
class WritePlan:
    """How a batch is written (see the module doc for each choice's reason)."""

    settle: bool
    count_first: bool
    rerun: bool
    hold: Hold
    target: TargetWrite
    append_quarantine: bool


def write_plan(f: BatchFacts) -> WritePlan:
    """The :class:`WritePlan` for a batch with facts ``f`` (pure)."""
    settle = f.overlapping or (f.resumed and f.keeps_coordinates)
    count_first = f.resumed or f.may_stop or f.judging
    rerun = not count_first and not settle and f.last_failed is False and f.deterministic
    creates_target = not f.streaming and not f.replaying and not f.target_exists
    count_first = count_first or (
        not rerun and ((not f.streaming and not creates_target) or f.last_failed is True)
    )
    if rerun:
        hold = Hold.NONE
    elif f.streaming and not settle:
        hold = Hold.CACHE
    else:
        hold = Hold.CHECKPOINT
    if f.streaming:
        target = TargetWrite.APPEND if f.keeps_coordinates else TargetWrite.APPEND_TXN
    else:
        target = TargetWrite.MERGE_BOUNDED if f.bounded else TargetWrite.MERGE
    return WritePlan(
        settle=settle, count_first=count_first, rerun=rerun, hold=hold, target=target,
        append_quarantine=f.watermark_passed,
    )
