"""The one place that decides whether a batch's errors stop the run.

After Kafka Connect's ``RetryWithToleranceOperator``: retries have already run
(inside the stages, :mod:`quarantine.errorhandling.retry`) and the batch's records are
counted; what is left is the verdict, given before anything is written
(:mod:`quarantine.batch.writes`). A batch has two outcomes:

* **go on** — every error kind was continued and the tolerance holds; the
  failed rows go to quarantine and the good rows to the target;
* **fail the run** — :class:`~quarantine.errors.ToleranceExceededError`, naming
  the config key that decided it: the failed rows are written to quarantine,
  then the run fails without writing the target, so the batch's good rows and
  offsets are not committed and nothing is lost.

In this order:

1. each error kind's handler (``errors.handler.<kind>``, :mod:`quarantine.errorhandling.handlers`)
   answers ``continue``, ``log_and_continue`` or ``fail``; a ``fail`` stops the run;
2. ``errors.tolerance=none`` stops it for errors no explicit handler continued;
3. ``errors.tolerance.limit`` and ``errors.tolerance.rate.limit`` count every error
   of the run and of the window (:class:`~quarantine.errorhandling.tolerance.ToleranceGuard`).

Where the errors come from decides how much of that applies (:class:`Scope`):
a pipeline's batches get all of it; records reported by a custom sink through
the errant record reporter get steps 1 and 2 (the run's limits count what the
pipeline read, not what a sink rejected); a replay gets none — a record that
still fails is its expected outcome and stays open with its new error.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from quarantine.columns import ErrorKind
from quarantine.errorhandling.handlers import BatchDecision, ErrorHandlers
from quarantine.errorhandling.settings import ErrorsConfig, Tolerance
from quarantine.errorhandling.tolerance import ToleranceGuard, WindowStore
from quarantine.errors import ToleranceExceededError

__all__ = ["ErrorPolicy", "Scope"]


class Scope(StrEnum):
    """Whose errors a verdict is about (see the module doc)."""

    #: A pipeline's batch (batch run or micro-batch): handlers, tolerance, limits.
    RUN = "run"
    #: Records a custom sink reported (KIP-610): handlers and ``errors.tolerance``.
    SINK = "sink"
    #: A replay: nothing stops it.
    REPLAY = "replay"


@dataclass
class ErrorPolicy:
    """Handlers and tolerance of one pipeline, for every batch of its runs.

    Holds no run state: a run's error count is the
    :class:`~quarantine.errorhandling.tolerance.ToleranceGuard` it gets from :meth:`tolerance`
    and keeps (:class:`quarantine.batch.run.Run`), and hands back to :meth:`enforce`.

    Attributes:
        errors: the ``errors.*`` config.
        pipeline: the pipeline's name (for messages and the rate-limit windows).
        handlers: the per-kind handlers, loaded and validated.
        window_store: where rate-limit windows are kept (None without a rate limit).
    """

    errors: ErrorsConfig
    pipeline: str
    handlers: ErrorHandlers
    window_store: WindowStore | None = None

    def tolerance(self, run_id: str) -> ToleranceGuard:
        """A new run's error count and rate-limit window (``errors.tolerance.*``)."""
        return ToleranceGuard(self.errors, pipeline=self.pipeline, run_id=run_id, store=self.window_store)

    def may_stop(self, scope: Scope) -> bool:
        """Whether any count of errors could stop a batch of ``scope``.

        False when nothing in the policy looks at the counts to fail: a replay;
        ``errors.tolerance=all`` with no ``limit``/``rate.limit`` and no handler
        but the built-in ``continue``/``log_and_continue``. Then a runner may
        write a batch before it knows the batch's counts (one pass over the batch,
        :mod:`quarantine.batch.writes`), since the verdict is "go on" whatever they are.
        """
        if scope is Scope.REPLAY:
            return False
        cfg = self.errors
        if cfg.tolerance is Tolerance.NONE or self.handlers.may_fail:
            return True
        return scope is Scope.RUN and (cfg.tolerance_limit >= 0 or cfg.tolerance_rate_limit >= 0)

    def decide(
        self,
        counts: Mapping[ErrorKind, int],
        *,
        run_id: str,
        batch_id: int,
        by_stage: Mapping[str, int] | None = None,
        stage_kinds: Mapping[str, ErrorKind] | None = None,
    ) -> BatchDecision:
        """The handlers' answers for a batch's errors (step 1; nothing is raised yet).

        Raises:
            HandlerError: a custom handler raised or returned no ``HandlerResponse``.
        """
        return self.handlers.decide(
            counts, pipeline=self.pipeline, run_id=run_id, batch_id=batch_id,
            by_stage=by_stage, stage_kinds=stage_kinds,
        )

    def enforce(
        self,
        decision: BatchDecision,
        *,
        scope: Scope,
        errors: int,
        now: dt.datetime,
        batch_id: int,
        tolerance: ToleranceGuard | None = None,
        what: str = "failed",
        cause: BaseException | None = None,
    ) -> None:
        """Fail the run if the batch's errors break the policy for ``scope``; else return.

        Args:
            decision: :meth:`decide`'s answers for the same errors.
            scope: whose errors they are.
            errors: how many records failed.
            now: the batch's time (its rate-limit window).
            batch_id: the micro-batch.
            tolerance: the run's guard (:meth:`tolerance`); required for ``RUN``.
            what: how the records failed, for the message of a ``SINK`` breach.
            cause: the exception a ``SINK`` breach is chained from.

        Raises:
            ToleranceExceededError: naming the key that decided (``errors.handler.<kind>``,
                ``errors.tolerance``, ``errors.tolerance.limit``, ``errors.tolerance.rate.limit``).
            ValueError: ``RUN`` scope without ``tolerance``.
        """
        if scope is Scope.REPLAY or errors <= 0:
            return
        if scope is Scope.SINK:
            limit = self._sink_breach(decision, errors)
            if limit is not None:
                raise ToleranceExceededError(
                    f"{limit}: {errors} record(s) {what} in batch {batch_id}; they are in the quarantine "
                    f"table {self.errors.dlq_table_name}; fail the batch so its offsets are not committed",
                    limit=limit, count=errors, window=f"batch {batch_id}",
                ) from cause
            return
        if tolerance is None:
            raise ValueError("a run's batch needs the run's tolerance guard (ErrorPolicy.tolerance)")
        decision.raise_for_failure()
        tolerance.check(errors, now, batch_id=batch_id, handled_errors=decision.handled_errors)

    def _sink_breach(self, decision: BatchDecision, errors: int) -> str | None:
        if decision.failed_kinds:
            return f"errors.handler.{decision.failed_kinds[0].value}"
        if self.errors.tolerance is Tolerance.NONE and decision.handled_errors < errors:
            return "errors.tolerance"
        return None
