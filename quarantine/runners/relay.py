"""Batch reports from a streaming run's Spark Connect worker back to the client.

Over Spark Connect, ``foreachBatch`` runs its function in a Python worker that the
server starts (on Databricks serverless and shared clusters, on the cluster's
driver), attached to the client's session. The worker runs every batch
(:meth:`Run.process_batch <quarantine.batch.run.Run.process_batch>`: stages, both writes,
tolerance), but the run's listeners (MLflow, the metrics table, logs) and its
summary belong to the client, which started the run and ends it.

They meet in the one place both sides reach: the session's settings. The worker
publishes each :class:`~quarantine.listeners.events.BatchReport` under
``spark.quarantine.relay.<query run id>.<n>`` and the count under ``….last``; a
failure of the pipeline under ``….error``. The client reads them while the query
runs (:class:`RelayReader`), hands each report to its listeners and removes the
setting. The key holds the query's *run* id (new at every start), so a restarted
query never reads its predecessor's reports.

A report reaches the listeners after its batch committed (the worker does not wait
for the client); a client that dies first loses the listeners' view of that batch,
never its records: the tables are written by the worker before the offsets commit.
"""

from __future__ import annotations

import base64
import logging
import pickle
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from quarantine.errors import QuarantineError
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus

__all__ = ["RelayListener", "RelayReader", "relay_prefix"]

log = logging.getLogger("quarantine.runners.relay")

_ROOT = "spark.quarantine.relay"


def relay_prefix(query_run_id: str) -> str:
    """The settings' prefix for one start of a streaming query (its ``runId``)."""
    return f"{_ROOT}.{query_run_id}"


def _encode(value: object) -> str:
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def _decode(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))  # written by this session's own worker


def _portable(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling, else a :class:`QuarantineError` naming it."""
    try:
        back = pickle.loads(pickle.dumps(exc))
    except Exception:
        back = None
    if isinstance(back, BaseException) and str(back) == str(exc):
        return back
    return QuarantineError(f"{type(exc).__name__}: {exc}")


@dataclass
class RelayListener:
    """Worker side: a :class:`~quarantine.listeners.events.RunListener` that publishes each batch's report.

    The run's start and end are the client's; this listener relays batches only.
    """

    spark: SparkSession
    prefix: str
    sent: int = 0

    def on_run_start(self, run: RunInfo) -> None:
        """Nothing: the client started the run."""

    def on_batch(self, report: BatchReport) -> None:
        """Publish ``report`` for the client (a listener failure is logged by the run, never raised)."""
        self.spark.conf.set(f"{self.prefix}.{self.sent + 1}", _encode(report))
        self.sent += 1
        self.spark.conf.set(f"{self.prefix}.last", str(self.sent))

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        """Nothing: the client ends the run."""

    def failed(self, exc: BaseException) -> None:
        """Publish the pipeline's failure, so the client raises it as itself (not Spark's wrapper)."""
        try:
            self.spark.conf.set(f"{self.prefix}.error", _encode(_portable(exc)))
        except Exception as problem:  # the query fails anyway, with Spark's text of exc
            log.warning("could not relay the batch's failure to the client: %s", problem)


@dataclass
class RelayReader:
    """Client side: the reports and failure a :class:`RelayListener` published, each once."""

    spark: SparkSession
    prefix: str
    _next: int = field(default=1, repr=False)

    def reports(self) -> list[BatchReport]:
        """The reports published since the last call, in batch order (their settings removed)."""
        last = int(self.spark.conf.get(f"{self.prefix}.last", "0") or 0)
        out: list[BatchReport] = []
        while self._next <= last:
            key = f"{self.prefix}.{self._next}"
            text = self.spark.conf.get(key, None)
            if text:
                out.append(_decode(text))
                self.spark.conf.unset(key)
            self._next += 1
        return out

    def error(self) -> BaseException | None:
        """The pipeline's failure the worker published, if any."""
        text = self.spark.conf.get(f"{self.prefix}.error", None)
        return _decode(text) if text else None

    def close(self) -> None:
        """Remove the relay's remaining settings from the session."""
        for key in (f"{self.prefix}.last", f"{self.prefix}.error"):
            try:
                self.spark.conf.unset(key)
            except Exception as problem:  # a closed session: nothing left to tidy
                log.debug("relay setting %s not removed: %s", key, problem)
