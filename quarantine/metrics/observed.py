"""A batch's metrics, and its schema drift, read from the row its metric columns observed.

Pure (no Spark): the driver turns ``Observation.get`` of
:func:`quarantine.metrics.columns.observed_counts` (plus what only the driver
knows: lines logged, quarantine write attempts, breaches) into a frozen
:class:`~quarantine.metrics.cells.BatchMetrics` (:func:`batch_metrics`), and into the
undeclared fields each stage saw (:func:`schema_drift`).

The per-topic counts come from a frequent-items sketch; they are checked here
against the exact ``count`` columns of the same pass: if the cells do not add up
(a batch with thousands of topics, or NULL topics), the rest is reported under
the topic :data:`OTHER_TOPIC` and a warning is logged, so totals stay exact and
nothing is silently lost.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quarantine.columns import ITEM_SEP, ErrorKind
from quarantine.metrics.cells import BatchMetrics, MetricNames, MetricPoint
from quarantine.metrics.columns import (
    CELLS_FAILED,
    LAST_ERROR_TS,
    MAX_TOPICS,
    RECORDS_FAILED,
    RECORDS_IN,
    TOPICS_IN,
    stage_key,
)
from quarantine.stage import ReportsDrift

__all__ = ["OTHER_TOPIC", "batch_metrics", "schema_drift"]

log = logging.getLogger("quarantine.metrics.cells")

#: Where per-topic counts the sketch could not attribute exactly are reported.
OTHER_TOPIC = "__other__"


def _int(row: Mapping[str, Any], key: str) -> int:
    v = row.get(key)
    return int(v) if v is not None else 0


def _items(entries: str | Iterable[Any] | None) -> dict[str, int]:
    """``approx_top_k`` output → {item: count}; the NULL item (filtered-out rows) dropped.

    ``entries`` is the observed JSON (of :func:`~quarantine.metrics.columns.observed_counts`: objects with ``item`` and
    ``count``, ``item`` left out when NULL) or ``(item, count)`` pairs.
    """
    if isinstance(entries, str):
        entries = [(e.get("item"), e["count"]) for e in json.loads(entries)]
    out: dict[str, int] = {}
    for e in entries or ():
        item, count = e[0], e[1]
        if item is not None:
            out[str(item)] = out.get(str(item), 0) + int(count)
    return out


def _complete(counts: dict[str, int], total: int, what: str) -> dict[str, int]:
    """Counts that add up to ``total``: any rest goes to :data:`OTHER_TOPIC` (with a warning)."""
    rest = total - sum(counts.values())
    if rest:
        log.warning(
            "%s: expected the per-topic counts to add up to %d, found %d (NULL topics, or "
            "more than %d topics in one batch); %d reported under topic %r",
            what,
            total,
            total - rest,
            MAX_TOPICS,
            rest,
            OTHER_TOPIC,
        )
        counts = {**counts, OTHER_TOPIC: counts.get(OTHER_TOPIC, 0) + rest}
    return counts


def _epoch_ms(ts: dt.datetime) -> float:
    if ts.tzinfo is None:  # a naive clock value is taken as UTC (the runner's clock is UTC)
        ts = ts.replace(tzinfo=dt.UTC)
    return float(int(ts.timestamp() * 1000))


def batch_metrics(
    observed_row: Mapping[str, Any],
    *,
    stages: Sequence[Any],
    now: dt.datetime,
    errors_logged: int = 0,
    dlq_attempts: int = 1,
    breaches: Mapping[str | None, int] | None = None,
    topic_attempts: int = 0,
    topic_failed_attempts: int = 0,
) -> BatchMetrics:
    """The batch's metrics from the row observed by :func:`~quarantine.metrics.columns.observed_counts`.

    Pure (no Spark). Only what the data pass cannot see is passed in.

    Args:
        observed_row: ``Observation.get`` of the columns of :func:`~quarantine.metrics.columns.observed_counts`.
        stages: the same stages, in order.
        now: the batch's write time (fallback for ``last-error-timestamp``).
        errors_logged: error-context lines the error log wrote for the batch.
        dlq_attempts: attempts the quarantine MERGE took (1 = first try succeeded).
        topic_attempts: attempts the DLQ topic's produce took (0: no topic).
        topic_failed_attempts: those of them that failed (:meth:`DlqTopic.report
            <quarantine.sinks.dlq_topic.DlqTopic.report>`).
        breaches: tolerance breaches of the batch by where they come from: a judging stage's name
            for its aggregate expectations' breaches, None for an error limit's (or a ``fail``
            handler's); their cells of ``tolerance-breaches`` (stage NULL: the error limit).
    """
    row = observed_row
    mn = MetricNames
    records_in = _int(row, RECORDS_IN)
    failed = _int(row, RECORDS_FAILED)
    names = [s.name for s in stages]
    kinds = {s.name: getattr(s, "kind", None) for s in stages}
    errors = {n: _int(row, stage_key("stage", n)) for n in names}
    retried_ok = {n: _int(row, stage_key("retried_ok", n)) for n in names}

    # stage x topic cells of failed records, completed per stage against the exact counts
    sketch: dict[str, dict[str, int]] = {}
    for item, n in _items(row.get(CELLS_FAILED)).items():
        stage, _, topic = item.partition(ITEM_SEP)
        sketch.setdefault(stage, {})[topic] = n
    failed_cells = {
        s: _complete(sketch.get(s, {}), errors[s], f"records-quarantined at stage {s}") for s in names if errors[s]
    }
    in_topics = _complete(_items(row.get(TOPICS_IN)), records_in, "records-in")
    failed_by_topic: dict[str, int] = {}
    for topics in failed_cells.values():
        for t, n in topics.items():
            failed_by_topic[t] = failed_by_topic.get(t, 0) + n

    points: list[MetricPoint] = []

    def cells(metric: MetricNames, values: Iterable[tuple[str | None, str | None, int]]) -> None:
        nonzero = [(stage, topic, v) for stage, topic, v in values if v]
        if not nonzero:
            points.append(MetricPoint(metric, 0.0))
        for stage, topic, v in nonzero:
            points.append(MetricPoint(metric, float(v), stage, topic))

    by_cell = [(s, t, n) for s, topics in failed_cells.items() for t, n in sorted(topics.items())]
    for metric in (mn.RECORDS_QUARANTINED, mn.TOTAL_RECORD_ERRORS, mn.TOTAL_RECORDS_SKIPPED):
        cells(metric, by_cell)
    cells(
        mn.EXPECTATION_FAILURES,
        [(s, t, n) for s, t, n in by_cell if kinds.get(s) == ErrorKind.EXPECTATION],
    )
    cells(mn.RECORDS_IN, [(None, t, n) for t, n in sorted(in_topics.items())])
    ok_topics = sorted(set(in_topics) | set(failed_by_topic))
    cells(
        mn.RECORDS_OK,
        [(None, t, in_topics.get(t, 0) - failed_by_topic.get(t, 0)) for t in ok_topics],
    )
    cells(
        mn.TOTAL_RECORD_FAILURES,
        [(n, None, _int(row, stage_key("attempts", n)) + retried_ok[n]) for n in names],
    )
    cells(
        mn.TOTAL_RETRIES,
        [(n, None, _int(row, stage_key("retries", n)) + retried_ok[n]) for n in names],
    )
    cells(mn.SCHEMA_DRIFT_RECORDS, [(n, None, _int(row, stage_key("drift", n))) for n in names])
    last_ms = row.get(LAST_ERROR_TS)
    last_error = float(last_ms) if last_ms is not None else _epoch_ms(now)
    dlq_attempts = max(dlq_attempts, 1) if failed else 0
    # the table's write, then the DLQ topic's (each attempt sends every failed record)
    requests = failed * (dlq_attempts + topic_attempts)
    failures = failed * (max(dlq_attempts - 1, 0) + topic_failed_attempts)
    points += [
        MetricPoint(mn.TOTAL_ERRORS_LOGGED, float(errors_logged)),
        MetricPoint(mn.DEADLETTERQUEUE_PRODUCE_REQUESTS, float(requests)),
        MetricPoint(mn.DEADLETTERQUEUE_PRODUCE_FAILURES, float(failures)),
        MetricPoint(mn.LAST_ERROR_TIMESTAMP, last_error if failed else 0.0),
    ]
    by_source = sorted((breaches or {}).items(), key=lambda kv: (kv[0] is not None, kv[0] or ""))
    cells(mn.TOLERANCE_BREACHES, [(stage, None, n) for stage, n in by_source])
    return BatchMetrics(tuple(points))


def schema_drift(stages: Sequence[Any], observed_row: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``{stage: {undeclared field: records that held it}}`` from the row observed by
    :func:`~quarantine.metrics.columns.observed_counts`, for the stages that :class:`ReportsDrift` and saw any.

    Pure (no Spark). Exact while a batch has fewer distinct sets of undeclared fields
    per stage than the sketch tracks (:data:`MAX_TOPICS`); beyond that the rarest sets
    may be missing here (``schema-drift-records`` stays exact).
    """
    out: dict[str, dict[str, int]] = {}
    for s in stages:
        if not isinstance(s, ReportsDrift) or not _int(observed_row, stage_key("drift", s.name)):
            continue
        fields: dict[str, int] = {}
        for names, n in _items(observed_row.get(stage_key("drift_fields", s.name))).items():
            for name in names.split(ITEM_SEP):
                fields[name] = fields.get(name, 0) + n
        out[s.name] = dict(sorted(fields.items()))
    return out
