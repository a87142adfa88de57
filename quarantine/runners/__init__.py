"""Runners: read a source, drive a pipeline's :class:`~quarantine.batch.plan.Plan` batch by batch.

* :func:`run_batch` (:mod:`quarantine.runners.batch`) — a Delta or Parquet source read
  once, as batch 0.
* :func:`run_stream` (:mod:`quarantine.runners.streaming`) — a Kafka topic or a
  Kafka-shaped Delta table read with Structured Streaming, one
  :meth:`~quarantine.batch.run.Run.process_batch` per micro-batch.

A runner owns its run (start and end events to the listeners, the streaming
query and its id); the pipeline below it processes one batch at a time and
never calls back up.
"""

from __future__ import annotations

from quarantine.runners.batch import read_source, run_batch
from quarantine.runners.streaming import StreamFailedError, run_stream

__all__ = ["StreamFailedError", "read_source", "run_batch", "run_stream"]
