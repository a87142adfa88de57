"""A stage's verdict on a whole batch, and how the runner gathers the verdicts.

Most stages judge one record at a time. A :class:`~quarantine.stage.JudgingStage` (the
``expectation`` stage: GX validates its suite on the batch; the capability is declared
with the stage contract) also judges the records that reached it *as one batch*, after
the batch is counted and before anything is written. Its verdict is a tuple of
:class:`~quarantine.errorhandling.breach.Breach`,
each with its action:

* ``warn``: reported (batch report, metrics, MLflow), the batch goes on;
* ``fail``: the failed records are written to quarantine, the target is not, and
  the batch fails with :class:`~quarantine.errors.ExpectationBreachError`;
* ``quarantine_batch``: every record of the batch goes to quarantine with the
  stage's :meth:`JudgingStage.batch_error` (so the batch keeps every record's
  raw bytes, :func:`keeps_raw_bytes`).

The runner (:mod:`quarantine.batch.run`) and the pipeline's pure parts
(:mod:`quarantine.pipeline`) know this module only, never what is inside a
judging stage (``tests/unit/test_runner_layering.py``). What they do with it:

1. :meth:`Pipeline.split_frame <quarantine.pipeline.Pipeline.split_frame>` carries
   each judging stage's input in the persisted batch (:func:`carried_columns`):
   ``_q_check_<stage>`` is the stage's input where the record reached the stage
   (no earlier stage failed), NULL elsewhere (or, for a last stage whose result is
   its input, only where it failed the record).
2. The count pass observes :func:`check_counts` beside the other counts.
3. :func:`judge_batch` hands each stage the rows that reached it (a frame of one
   column, ``input``, read from the persisted batch: the source is not read again)
   and gathers the verdicts (:class:`Verdicts`). A replay is not judged: its
   selection of failed records is no batch of the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quarantine.batch.chain import stage_input
from quarantine.columns import CHECK_INPUT_PREFIX, ERROR, RESULT
from quarantine.config import BreachAction
from quarantine.errorhandling.breach import Breach
from quarantine.stage import INPUT, JudgingStage, Stage

__all__ = [
    "Verdicts",
    "carried_columns",
    "check_counts",
    "judge_batch",
    "judging",
    "keeps_raw_bytes",
    "quarantined_by_check",
]

def judging(stages: Sequence[Stage]) -> list[JudgingStage]:
    """The judging stages of a chain, in order."""
    return [s for s in stages if isinstance(s, JudgingStage)]


def keeps_raw_bytes(stages: Sequence[Stage]) -> bool:
    """Whether a verdict may quarantine the whole batch (the persisted batch must keep every raw byte)."""
    return any(s.may_quarantine_batch() for s in judging(stages))


def _reads_result(stages: Sequence[Stage], i: int) -> bool:
    """Whether the judging stage ``stages[i]`` is judged from the chain's result where it passed."""
    s = stages[i]
    return isinstance(s, JudgingStage) and i == len(stages) - 1 and s.result_is_input()


def carried_columns(stages: Sequence[Stage]) -> list[Column]:
    """Columns for the runner's projection of the staged batch: one per judging stage.

    ``_q_check_<name>`` holds the stage's input where the record reached the
    stage (no earlier stage failed) and NULL elsewhere, so the stage judges
    exactly the records it checked; :func:`judge_batch` reads it back. A last
    stage whose result is its input (:meth:`JudgingStage.result_is_input`, the
    expectation stage) carries it only where it failed the record: elsewhere the
    input is the chain's result, which the batch holds anyway (a persisted batch
    one struct per record smaller). The frame must be the output of
    :func:`quarantine.batch.chain.apply_stages` over ``stages``.
    """
    names = [s.name for s in stages]
    out: list[Column] = []
    for i, s in enumerate(stages):
        if not isinstance(s, JudgingStage):
            continue
        value = stage_input(s, names[i - 1] if i else None, names[:i])
        reached = F.col(names[i - 1]).getField("error").isNull() if i else F.lit(True)
        if _reads_result(stages, i):
            reached = reached & F.col(s.name).getField("error").isNotNull()
        out.append(F.when(reached, value).alias(f"{CHECK_INPUT_PREFIX}{s.name}"))
    return out


def _judged_input(stages: Sequence[Stage], i: int) -> Column:
    """The input of the judging stage ``stages[i]`` in the persisted batch (NULL where it was not reached)."""
    carried = F.col(f"{CHECK_INPUT_PREFIX}{stages[i].name}")
    if _reads_result(stages, i):
        return F.when(F.col(ERROR).isNull(), F.col(RESULT)).otherwise(carried)
    return carried


def check_counts(stages: Sequence[Stage], error: Column) -> list[Column]:
    """Every judging stage's :meth:`~JudgingStage.check_counts`."""
    return [c for s in judging(stages) for c in s.check_counts(error)]


def quarantined_by_check(stages: Sequence[Stage], counts: Mapping[str, Any]) -> dict[str, int]:
    """Quarantined records per check, over every judging stage (a name two stages share is summed)."""
    out: dict[str, int] = {}
    for s in judging(stages):
        for k, v in s.quarantined_by_check(counts).items():
            out[k] = out.get(k, 0) + v
    return out


@dataclass(frozen=True)
class Verdicts:
    """The judging stages' verdicts on one batch.

    Attributes:
        judged: ``(stage name, breaches)`` for each stage that judged this batch.
        notes: every judging stage's :meth:`~JudgingStage.notes`.
        batch_error: the error for every record of the batch, when a breach asks
            for the whole batch in quarantine (the first such stage's); else None.
    """

    judged: tuple[tuple[str, tuple[Breach, ...]], ...] = ()
    notes: tuple[str, ...] = ()
    batch_error: Column | None = None

    @property
    def breaches(self) -> tuple[Breach, ...]:
        """Every breach, stage by stage, in each stage's order."""
        return tuple(b for _, bs in self.judged for b in bs)

    def with_action(self, action: BreachAction) -> tuple[Breach, ...]:
        """The breaches whose action is ``action``."""
        return tuple(b for b in self.breaches if b.action is action)


def judge_batch(batch: DataFrame, stages: Sequence[Stage], batch_id: int, *, replaying: bool) -> Verdicts:
    """Let every judging stage judge the batch (none when ``replaying``).

    Args:
        batch: the runner's persisted batch, including :func:`carried_columns`.
        stages: the chain.
        batch_id: the batch id.
        replaying: a replay's batch (a selection of failed records): not judged.
    """
    notes = tuple(n for s in judging(stages) for n in s.notes())
    if replaying:
        return Verdicts(notes=notes)
    judged: list[tuple[str, tuple[Breach, ...]]] = []
    batch_error: Column | None = None
    for i, s in enumerate(stages):
        if not isinstance(s, JudgingStage):
            continue
        col = _judged_input(stages, i)
        breaches = s.judge(batch.where(col.isNotNull()).select(col.alias(INPUT)), batch_id)
        if breaches is None:
            continue
        judged.append((s.name, breaches))
        whole = [b for b in breaches if b.action is BreachAction.QUARANTINE_BATCH]
        if whole and batch_error is None:
            batch_error = s.batch_error(whole)
    return Verdicts(tuple(judged), notes, batch_error)
