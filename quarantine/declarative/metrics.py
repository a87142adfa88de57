"""A declarative pipeline's metrics: the metrics table written from its tables after an update.

A dataset function cannot observe what it writes, so a pipeline (``target.written_by:
pipeline``) has no listeners. ``quarantine metrics`` writes the counts to ``metrics.table``
once an update has finished. It can run as the next task of the job that starts the update.
The rows have the same schema and metric names as a job's
(:data:`~quarantine.schema.METRICS_SCHEMA`), with ``run_kind = 'run'``. A "batch" is one
write of one of the pipeline's flows:

* **Quarantine batches.** The quarantine table's rows of ``run_id = 'declarative'`` are
  grouped by ``first_seen_at``. In a streaming flow ``current_timestamp()`` is the
  micro-batch's time, so one value is one micro-batch. Each batch gets the run id
  ``declarative:<quarantine table>`` and the batch id ``first_seen_at`` in epoch
  milliseconds. Its rows are ``records-quarantined``, ``total-record-errors`` and
  ``total-records-skipped``, as batch totals and per stage and topic, and ``records-in``.
* **Target batches.** Each ``STREAMING UPDATE`` commit in the target's Delta history is
  one. It gets the run id ``declarative:<target>`` and its commit version as the batch id,
  with ``records-ok`` and ``records-in`` rows holding the commit's ``numOutputRows``.

Each record a flow reads lands in one of the two tables, so ``records-in`` summed over an
update's batches is the records it read, as for a job.

The command writes exactly once per batch, by the rows' own ids, as the listener does: a
batch whose ``(pipeline, run_id, batch_id)`` the metrics table already holds is left out, so
running the command twice adds nothing. It is exact when no update is running: a micro-batch
that commits while the command reads is counted by the next call, not this one.
``maintain`` strips (never deletes) only closed quarantine rows older than the retention, and
their batches were recorded long before.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quarantine.columns import BATCH_ID, FIRST_SEEN_AT, PIPELINE, RUN_ID, STAGE, TOPIC, RunKind
from quarantine.config import PipelineConfig, WrittenBy
from quarantine.declarative import DECLARATIVE_RUN
from quarantine.errors import ConfigError
from quarantine.listeners.metrics_table import ensure_metrics_table, metrics_frame
from quarantine.metrics.cells import MetricNames
from quarantine.tables import read_table, save, table_exists, table_ref

__all__ = ["record_pipeline_metrics"]

_QUARANTINE_METRICS = (MetricNames.RECORDS_QUARANTINED, MetricNames.TOTAL_RECORD_ERRORS,
                       MetricNames.TOTAL_RECORDS_SKIPPED)


def _quarantine_rows(spark: SparkSession, config: PipelineConfig, now: dt.datetime) -> list[tuple[object, ...]]:
    """Metric rows of the quarantine table's batches: totals, per stage, per stage and topic."""
    name = config.errors.dlq_table_name
    if not table_exists(spark, name):
        return []
    run_id = f"{DECLARATIVE_RUN}:{name}"
    rows = read_table(spark, name).where((F.col(PIPELINE) == config.pipeline) & (F.col(RUN_ID) == DECLARATIVE_RUN))
    batch = (F.unix_micros(F.col(FIRST_SEEN_AT)) / 1000).cast("bigint")
    counts = rows.groupBy(batch.alias(BATCH_ID), STAGE, TOPIC).agg(F.count(F.lit(1)).alias("n")).collect()
    out: list[tuple[object, ...]] = []
    totals: dict[int, int] = {}
    by_stage: dict[tuple[int, str], int] = {}
    for r in counts:
        b, n = int(r["batch_id"]), int(r["n"])
        totals[b] = totals.get(b, 0) + n
        by_stage[(b, r["stage"])] = by_stage.get((b, r["stage"]), 0) + n
        for metric in _QUARANTINE_METRICS[1:]:
            out.append((config.pipeline, run_id, b, now, metric.value, r["stage"], r[TOPIC], float(n)))
    for (b, stage), n in by_stage.items():
        out.append((config.pipeline, run_id, b, now, MetricNames.RECORDS_QUARANTINED.value, stage, None, float(n)))
    for b, n in totals.items():  # records-in: each record a flow reads lands in one of the two tables
        out += [(config.pipeline, run_id, b, now, m.value, None, None, float(n))
                for m in (MetricNames.RECORDS_IN, *_QUARANTINE_METRICS)]
    return out


def _target_rows(spark: SparkSession, config: PipelineConfig, now: dt.datetime) -> list[tuple[object, ...]]:
    """A ``records-ok`` row per streaming commit of the target (its Delta history)."""
    name = config.target.table
    if not table_exists(spark, name):
        return []
    history = spark.sql(f"DESCRIBE HISTORY {table_ref(name)}").where(F.col("operation") == "STREAMING UPDATE")
    commits = history.select("version", F.col("operationMetrics")["numOutputRows"].alias("n")).collect()
    run_id = f"{DECLARATIVE_RUN}:{name}"
    return [(config.pipeline, run_id, int(c["version"]), now, metric.value, None, None, float(c["n"] or 0))
            for c in commits for metric in (MetricNames.RECORDS_IN, MetricNames.RECORDS_OK)]


def _recorded(spark: SparkSession, table: str, pipeline: str) -> set[tuple[str, int]]:
    """The ``(run_id, batch_id)`` of this pipeline's declarative batches the metrics table holds."""
    ours = (F.col(PIPELINE) == pipeline) & F.col(RUN_ID).startswith(f"{DECLARATIVE_RUN}:")
    rows = (read_table(spark, table).where(ours)
            .select(RUN_ID, BATCH_ID).distinct().collect())
    return {(r["run_id"], int(r["batch_id"])) for r in rows}


def record_pipeline_metrics(spark: SparkSession, config: PipelineConfig, *, now: dt.datetime | None = None) -> int:
    """Append the metrics of a declarative pipeline's batches not recorded yet; return how many batches.

    Raises:
        ConfigError: the config is not a declarative pipeline's (``target.written_by: job``: a
            job's listeners write its metrics), or has no ``metrics.table``.
    """
    if config.target.written_by is not WrittenBy.PIPELINE:
        raise ConfigError("target.written_by", config.target.written_by.value,
                          "pipeline for quarantine metrics: a job's listeners write its metrics table as it runs")
    table = config.metrics.table
    if not table:
        raise ConfigError("metrics.table", None, "the metrics table quarantine metrics writes")
    at = now or dt.datetime.now(dt.UTC)
    rows = [(*r, RunKind.RUN.value) for r in (*_quarantine_rows(spark, config, at), *_target_rows(spark, config, at))]
    held = set() if ensure_metrics_table(spark, table) else _recorded(spark, table, config.pipeline)
    new = [r for r in rows if (r[1], r[2]) not in held]
    if new:  # one plain append: all of these batches' rows or none
        save(metrics_frame(spark, new).write.format("delta").mode("append"), table)
    return len({(r[1], r[2]) for r in new})
