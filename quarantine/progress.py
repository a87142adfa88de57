"""A sign of life during a long batch: one log line every few seconds while it runs.

A batch run's one batch is a few Spark jobs that may take minutes on a large
source, and says nothing until its summary. :class:`Progress` is a context manager
around such work: while it is open, a daemon thread logs, every ``every_s``
seconds, what is running, for how long, and Spark's own progress (tasks done of
the active stages), e.g.::

    batch run of orders_demo: 30 s so far; Spark: 12/40 tasks (stage 7)

Spark's progress comes from the driver's status tracker; where there is none
(Spark Connect has no ``sparkContext``) the line has the elapsed time only. The
thread never raises into the work it watches, and stops when the block ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from pyspark.sql import SparkSession

__all__ = ["Progress", "spark_progress"]

log = logging.getLogger("quarantine.progress")


def spark_progress(spark: SparkSession) -> str:
    """Tasks done of the session's active stages (``"12/40 tasks (stage 7)"``), or ``""``.

    Never raises: a session without a status tracker (Spark Connect) or a stopped
    one gives ``""``.
    """
    try:
        tracker = spark.sparkContext.statusTracker()
        infos = [i for i in (tracker.getStageInfo(s) for s in tracker.getActiveStageIds()) if i is not None]
    except Exception:  # Spark Connect: no sparkContext; a stopping session: Py4J errors
        return ""
    if not infos:
        return ""
    done = sum(i.numCompletedTasks for i in infos)
    total = sum(i.numTasks for i in infos)
    stages = ", ".join(str(i.stageId) for i in sorted(infos, key=lambda i: i.stageId))
    return f"{done}/{total} tasks (stage{'s' if len(infos) > 1 else ''} {stages})"


class Progress:
    """Log ``what`` every ``every_s`` seconds while the ``with`` block runs.

    Args:
        spark: the session whose jobs show progress.
        what: what is running, the start of each line (``batch run of orders``).
        every_s: seconds between lines; the first line comes after ``every_s``, so
            work shorter than that logs nothing.
        logger: where the lines go (INFO).
        clock: monotonic seconds (tests).
    """

    def __init__(
        self,
        spark: SparkSession,
        what: str,
        *,
        every_s: float = 15.0,
        logger: logging.Logger = log,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spark = spark
        self.what = what
        self.every_s = every_s
        self.logger = logger
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def line(self) -> str:
        """The line logged now."""
        elapsed = self.clock() - self._started
        spark = spark_progress(self.spark)
        return f"{self.what}: {elapsed:.0f} s so far" + (f"; Spark: {spark}" if spark else "")

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.logger.info("%s", self.line())
            except Exception:  # a sign of life must never take the work down
                return

    def __enter__(self) -> Progress:
        self._started = self.clock()
        self._thread = threading.Thread(target=self._loop, name="quarantine-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
