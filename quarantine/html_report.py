"""A pipeline's report page: one self-contained HTML page of its quarantine and metrics tables.

Six figures, each aggregated in Spark over the quarantine table
(:data:`~quarantine.schema.QUARANTINE_SCHEMA`) and the metrics table
(:data:`~quarantine.schema.METRICS_SCHEMA`), filtered to the config's pipeline;
only the small aggregates reach the driver, where Plotly draws them:

* ``over_time`` — quarantined records by the hour (by the day past three days)
  of ``first_seen_at``, stacked by ``stage``;
* ``error_classes`` — the ten most frequent ``error_class`` values, open and closed, each bar
  labelled with its count (on a log axis when the largest class would flatten the others);
* ``partitions`` — records per ``topic``/``partition``, open and closed, with their lowest and highest offset;
* ``statuses`` — open vs replayed vs discarded;
* ``breaches`` — ``tolerance-breaches`` per run, by kind: an error limit's, or a judging stage's
  aggregate expectations' (metrics table cells);
* ``replays`` — closed rows per resolution (``resolved_at``, ``status``, ``resolution``).

The page needs no network when viewed: plotly.js is inlined once in ``<head>``
and every figure is a ``<div>`` plus a ``Plotly.newPlot`` call. A figure without
data (no quarantine table yet, no breach, no replay, no metrics table) is a
``<div class="no-data">`` saying so. Plotly is the optional extra
``spark-quarantine[report]``; without it :func:`write_report` raises
:class:`ReportDependencyError` before Spark is touched.

``quarantine report`` (:mod:`quarantine.cli`) writes it. The same figures are a Lakeview
dashboard in the bundle (``dashboards/quarantine.lvdash.json``).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from quarantine.errors import MissingDependencyError
from quarantine.metrics import MetricNames
from quarantine.report import RunKind
from quarantine.schema import QuarantineStatus
from quarantine.sinks import read_table_pinned, table_exists
from quarantine.sinks.quarantine import read_quarantine

__all__ = [
    "FIGURES",
    "TOP_ERROR_CLASSES",
    "ReportData",
    "ReportDependencyError",
    "breach_kind",
    "breaches_per_run",
    "collect_report_data",
    "error_classes",
    "offsets_per_partition",
    "pipeline_runs",
    "quarantined_over_time",
    "render_html",
    "replay_history",
    "require_plotly",
    "status_counts",
    "time_unit",
    "write_report",
]

#: How many error classes the ``error_classes`` figure shows.
TOP_ERROR_CLASSES = 10
#: The newest runs (breaches) and resolutions (replays) a figure shows.
_LATEST = 200
#: Past this span of ``first_seen_at``, ``over_time`` buckets by the day instead of the hour.
_HOURLY_SPAN = dt.timedelta(days=3)

#: Each figure's id (the ``data-figure`` attribute of its section) and title, in page order.
FIGURES: tuple[tuple[str, str], ...] = (
    ("over_time", "Quarantined records over time, by stage"),
    ("error_classes", f"Top {TOP_ERROR_CLASSES} error classes"),
    ("partitions", "Records and offsets per partition, open and closed"),
    ("statuses", "Open vs replayed vs discarded"),
    ("breaches", "Breaches per run, by kind"),
    ("replays", "Replay history"),
)

_STATUSES = tuple(s.value for s in QuarantineStatus)
_STATUS_COLOURS = {"open": "#d62728", "replayed": "#2ca02c", "discarded": "#7f7f7f"}
#: Breaches: an error limit's in orange, each judging stage's in a blue or a purple.
_EXPECTATION_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b")

Rows = list[tuple[Any, ...]]


class ReportDependencyError(MissingDependencyError):
    """Plotly (the ``report`` extra) is not installed."""


def require_plotly() -> ModuleType:
    """``plotly.graph_objects``, or :class:`ReportDependencyError` naming the extra to install."""
    try:
        from plotly import graph_objects
    except ImportError as exc:
        raise ReportDependencyError(
            "quarantine report draws its charts with Plotly, which is not installed", "report"
        ) from exc
    go: ModuleType = graph_objects  # untyped: plotly ships no stubs
    return go


# --------------------------------------------------------------------------- aggregations (pure)


def time_unit(first: dt.datetime | None, last: dt.datetime | None) -> str:
    """``hour`` for a span of ``first_seen_at`` up to three days (or none), else ``day``."""
    if first is None or last is None or last - first <= _HOURLY_SPAN:
        return "hour"
    return "day"


def _records() -> Column:
    return F.count(F.lit(1)).alias("records")


def pipeline_runs() -> Column:
    """True for a metrics-table row of a pipeline run (``run_kind`` ``run``, or NULL: written before the
    column existed), not of a replay or a discard."""
    return F.coalesce(F.col("run_kind"), F.lit(RunKind.RUN.value)) == RunKind.RUN.value


def quarantined_over_time(quarantine: DataFrame, unit: str) -> DataFrame:
    """``bucket`` (``first_seen_at`` truncated to ``unit``, ``hour`` or ``day``, in UTC whatever the
    session's time zone), ``stage``, ``records``; by bucket, stage."""
    # epoch arithmetic, not date_trunc (which truncates in the session's time zone)
    seconds = {"hour": 3600, "day": 86400}[unit]
    bucket = F.timestamp_seconds(F.floor(F.unix_seconds(F.col("first_seen_at")) / seconds) * seconds).alias("bucket")
    return quarantine.groupBy(bucket, F.col("stage")).agg(_records()).orderBy("bucket", "stage")


def error_classes(quarantine: DataFrame, top: int = TOP_ERROR_CLASSES) -> DataFrame:
    """The ``top`` error classes: ``error_class``, ``records``, ``open_records``; most records first."""
    is_open = (F.col("status") == QuarantineStatus.OPEN.value).cast("long")
    return (
        quarantine.groupBy("error_class")
        .agg(_records(), F.sum(is_open).alias("open_records"))
        .orderBy(F.desc("records"), F.asc_nulls_last("error_class"))
        .limit(top)
    )


def offsets_per_partition(quarantine: DataFrame) -> DataFrame:
    """Records and offsets per partition, all of them and split into open and closed ones.

    ``topic``, ``partition``, ``records``, ``min_offset``, ``max_offset`` (every status), then
    ``open_records``, ``open_min_offset``, ``open_max_offset``, ``closed_min_offset``,
    ``closed_max_offset`` (NULL where the partition has none); by topic, partition.
    """
    is_open = F.col("status") == QuarantineStatus.OPEN.value
    open_offset = F.when(is_open, F.col("offset"))
    closed_offset = F.when(~is_open, F.col("offset"))
    return (
        quarantine.groupBy("topic", "partition")
        .agg(
            _records(), F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
            F.sum(is_open.cast("long")).alias("open_records"),
            F.min(open_offset).alias("open_min_offset"), F.max(open_offset).alias("open_max_offset"),
            F.min(closed_offset).alias("closed_min_offset"), F.max(closed_offset).alias("closed_max_offset"),
        )
        .orderBy("topic", "partition")
    )


def status_counts(quarantine: DataFrame) -> DataFrame:
    """``status``, ``records``."""
    return quarantine.groupBy("status").agg(_records()).orderBy("status")


def breaches_per_run(metrics: DataFrame, latest: int = _LATEST) -> DataFrame:
    """``run_id``, ``at`` (the run's first breach row), ``breaches``, ``stage``: per run and kind of
    breach, the latest runs with a breach, oldest first.

    ``stage`` is the kind: NULL for an error limit's breach (``errors.tolerance*``, a ``fail``
    handler), a judging stage's name for its aggregate expectations' breaches (any
    ``on_breach`` action, ``warn`` included). Sums the ``tolerance-breaches`` rows (a metric's
    rows partition its batch total, so a sum never double counts), the run-end row of a breach
    that ended a run (``batch_id`` NULL) included.
    """
    rows = metrics.where((F.col("metric") == MetricNames.TOLERANCE_BREACHES.value) & (F.col("value") > 0))
    first = F.min("recorded_at").over(Window.partitionBy("run_id"))
    per_kind = rows.withColumn("at", first).groupBy("run_id", "at", "stage").agg(
        F.sum("value").cast("long").alias("breaches")
    )
    runs = per_kind.select("run_id", "at").distinct().orderBy(F.desc("at"), "run_id").limit(latest)
    return (
        per_kind.join(runs, ["run_id", "at"])
        .select("run_id", "at", "breaches", "stage")
        .orderBy("at", "run_id", F.asc_nulls_first("stage"))
    )


def replay_history(quarantine: DataFrame, latest: int = _LATEST) -> DataFrame:
    """``resolved_at``, ``status``, ``resolution``, ``records``: the latest resolutions, oldest first.

    A replay (or discard) closes its rows with one ``resolved_at`` and one
    ``resolution`` (``replayed by run …`` / ``discarded: <reason>``), so each
    group is one replay or discard.
    """
    closed = quarantine.where((F.col("status") != QuarantineStatus.OPEN.value) & F.col("resolved_at").isNotNull())
    groups = closed.groupBy("resolved_at", "status", "resolution").agg(_records())
    return groups.orderBy(F.desc("resolved_at")).limit(latest).orderBy("resolved_at", "status", "resolution")


# --------------------------------------------------------------------------- collecting


@dataclass(frozen=True)
class ReportData:
    """The collected aggregates of one report (small: a few hundred rows at most).

    Each figure's rows are plain tuples in the column order of its aggregation
    function; ``missing`` says, per figure id, why it has no source at all
    (no quarantine table yet, no metrics table configured). ``records_in`` is the
    source records the pipeline's runs read (``records-in`` of :func:`pipeline_runs`:
    a replay's selection is not counted again); None without a metrics table.
    """

    pipeline: str
    generated_at: dt.datetime
    quarantine_table: str
    metrics_table: str | None
    since: dt.datetime | None = None
    unit: str = "hour"
    over_time: Rows = field(default_factory=list)
    error_classes: Rows = field(default_factory=list)
    partitions: Rows = field(default_factory=list)
    statuses: Rows = field(default_factory=list)
    breaches: Rows = field(default_factory=list)
    replays: Rows = field(default_factory=list)
    records_in: int | None = None
    missing: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        """Records in ``status``."""
        return sum(int(n) for s, n in self.statuses if s == status)

    def summary_lines(self) -> list[str]:
        """The few lines ``quarantine report`` prints."""
        total = sum(int(n) for _, n in self.statuses)
        since = f" since {self.since.isoformat()}" if self.since else ""
        lines = [f"pipeline {self.pipeline}: {total:,} quarantined record(s){since}"]
        if self.records_in is not None:
            lines.append(f"  records in (runs)      {self.records_in:,}")
        lines.extend(f"  {s:<22} {self.count(s):,}" for s in _STATUSES)
        limits = sum(int(r[2]) for r in self.breaches if r[3] is None)
        expectations = sum(int(r[2]) for r in self.breaches if r[3] is not None)
        runs = len({r[0] for r in self.breaches})
        lines.append(f"  breaches               {limits + expectations:,} in {runs:,} run(s): "
                     f"error limits {limits:,}, expectations {expectations:,}")
        lines.append(f"  replays and discards   {len(self.replays):,}")
        return lines


def _tuples(df: DataFrame) -> Rows:
    return [tuple(r) for r in df.collect()]


def collect_report_data(
    spark: SparkSession,
    *,
    pipeline: str,
    quarantine_table: str,
    metrics_table: str | None,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
) -> ReportData:
    """Aggregate both tables in Spark and collect the figures' rows.

    Each table is read at one version (pinned), so the figures agree with each
    other while a pipeline writes; one small Spark job per figure.

    Args:
        spark: the session.
        pipeline: the pipeline whose rows are reported.
        quarantine_table: ``errors.deadletterqueue.table.name`` (may not exist yet).
        metrics_table: ``metrics.table``, or None when the config has none.
        since: keep only records first seen, breaches recorded and rows resolved at or after it.
        now: the report's time stamp (injected for tests).

    Raises:
        ConfigError: ``quarantine_table`` is not a quarantine table.
    """
    at = now or dt.datetime.now(dt.UTC)
    data: dict[str, Any] = {"missing": {}}
    if table_exists(spark, quarantine_table):
        read_quarantine(spark, quarantine_table)  # its columns checked: a wrong table is a ConfigError
        q = read_table_pinned(spark, quarantine_table).where(F.col("pipeline") == F.lit(pipeline))
        seen = q if since is None else q.where(F.col("first_seen_at") >= F.lit(since))
        span = seen.agg(F.min("first_seen_at"), F.max("first_seen_at")).first()
        unit = time_unit(*(span if span is not None else (None, None)))
        resolved = q if since is None else q.where(F.col("resolved_at") >= F.lit(since))
        data |= {
            "unit": unit,
            "over_time": _tuples(quarantined_over_time(seen, unit)),
            "error_classes": _tuples(error_classes(seen)),
            "partitions": _tuples(offsets_per_partition(seen)),
            "statuses": _tuples(status_counts(seen)),
            "replays": _tuples(replay_history(resolved)),
        }
    else:
        for fig in ("over_time", "error_classes", "partitions", "statuses", "replays"):
            data["missing"][fig] = f"the quarantine table {quarantine_table} does not exist yet"
    if metrics_table is None:
        data["missing"]["breaches"] = "the config has no metrics.table"
    elif not table_exists(spark, metrics_table):
        data["missing"]["breaches"] = f"the metrics table {metrics_table} does not exist yet"
    else:
        m = read_table_pinned(spark, metrics_table).where(F.col("pipeline") == F.lit(pipeline))
        if since is not None:
            m = m.where(F.col("recorded_at") >= F.lit(since))
        data["breaches"] = _tuples(breaches_per_run(m))
        # records-in has one row per topic per batch: their sum is the total, over the pipeline's own
        # runs only (a replay's records-in are records it selected from quarantine: counted twice)
        total = m.where((F.col("metric") == MetricNames.RECORDS_IN.value) & pipeline_runs()).agg(F.sum("value")).first()
        data["records_in"] = int(total[0]) if total is not None and total[0] is not None else 0
    return ReportData(
        pipeline=pipeline, generated_at=at, quarantine_table=quarantine_table,
        metrics_table=metrics_table, since=since, **data,
    )


# --------------------------------------------------------------------------- rendering


def _label(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") if value.second else value.strftime("%Y-%m-%d %H:%M")
    return "(none)" if value is None else str(value)


def _counts(title: str) -> dict[str, Any]:
    """A count axis from 0 with whole-number tick labels."""
    return {"title": title, "rangemode": "tozero", "tickformat": ",d"}


#: Past this ratio of the largest to the smallest count, a count axis is logarithmic (a linear
#: one would draw the small counts as nothing next to the large one).
_LOG_SPREAD = 20


def _count_axis(title: str, counts: list[int]) -> dict[str, Any]:
    """:func:`_counts`, or a log axis when ``counts`` (zeros aside) spread more than :data:`_LOG_SPREAD` times."""
    shown = [n for n in counts if n > 0]
    if shown and max(shown) > _LOG_SPREAD * min(shown):
        # bars from 1, ticks at 1, 10, 100…, room on the right for the largest bar's label
        return {"title": f"{title} (log scale)", "type": "log", "tickformat": ",d", "dtick": 1,
                "range": [0, math.log10(max(shown) * 3)]}
    return _counts(title)


def _count_text(n: int) -> str:
    """A bar's label: its count, none for an empty bar."""
    return f"{n:,}" if n else ""


def _offsets(low: int | None, high: int | None) -> str:
    """``offsets low..high``, or ``no records`` (hover text)."""
    return "no records" if low is None else f"offsets {low}..{high}"


def _whole_ticks(fig: Any) -> None:
    """Tick count axes every 1 below 10: Plotly would tick a count of 2 at halves (``,d``: 0, 1, 1, 2)."""
    stacked = fig.layout.barmode == "stack"
    for axis, letter, other in (("xaxis", "x", "y"), ("yaxis", "y", "x")):
        if fig.layout[axis].tickformat != ",d":
            continue
        totals: dict[Any, float] = {}
        for trace in fig.data:
            values = list(trace[letter] or ())
            for cat, v in zip(list(trace[other] or range(len(values))), values, strict=False):
                totals[cat] = totals.get(cat, 0) + v if stacked else max(totals.get(cat, 0), v)
        if max(totals.values(), default=0) < 10:
            fig.layout[axis].dtick = 1


def _figures(data: ReportData, go: ModuleType) -> dict[str, Any]:
    """Each figure id with data: its Plotly figure (categorical x axes: a lone bar stays visible)."""
    figs: dict[str, Any] = {}
    if data.over_time:
        buckets = sorted({r[0] for r in data.over_time})
        stages = sorted({r[1] for r in data.over_time}, key=_label)
        cell = {(r[0], r[1]): r[2] for r in data.over_time}
        figs["over_time"] = go.Figure(
            [go.Bar(name=_label(s), x=[_label(b) for b in buckets], y=[cell.get((b, s), 0) for b in buckets])
             for s in stages],
            layout={"barmode": "stack", "xaxis": {"title": f"first seen ({data.unit})", "type": "category"},
                    "yaxis": _counts("records"), "legend": {"title": {"text": "stage"}}},
        )
    if data.error_classes:
        rows = list(reversed(data.error_classes))  # the largest at the top of a horizontal bar chart
        names = [_label(r[0]) for r in rows]
        counts = {"open": [int(r[2]) for r in rows], "closed": [int(r[1]) - int(r[2]) for r in rows]}
        # side by side, each bar labelled with its count; on a log axis when one class would flatten the rest
        figs["error_classes"] = go.Figure(
            [go.Bar(name=name, orientation="h", y=names, x=xs, text=[_count_text(n) for n in xs],
                    textposition="outside", cliponaxis=False,
                    marker={"color": _STATUS_COLOURS["open" if name == "open" else "replayed"]},
                    hovertemplate=f"%{{y}}<br>%{{x:,}} {name} record(s)<extra></extra>")
             for name, xs in counts.items()],
            layout={"barmode": "group", "xaxis": _count_axis("records", [n for xs in counts.values() for n in xs]),
                    "yaxis": {"type": "category"}, "margin": {"l": 220, "r": 40}},
        )
    if data.partitions:
        names = [f"{r[0]} / {r[1]}" for r in data.partitions]
        parts = data.partitions
        split = {
            "open": ([int(r[5]) for r in parts], [_offsets(r[6], r[7]) for r in parts]),
            "closed": ([int(r[2]) - int(r[5]) for r in parts], [_offsets(r[8], r[9]) for r in parts]),
        }
        figs["partitions"] = go.Figure(
            [go.Bar(name=name, x=names, y=ys, text=[_count_text(n) for n in ys], textposition="auto",
                    customdata=offsets, marker={"color": _STATUS_COLOURS["open" if name == "open" else "replayed"]},
                    hovertemplate=f"%{{x}}<br>%{{y:,}} {name} record(s)<br>%{{customdata}}<extra></extra>")
             for name, (ys, offsets) in split.items()],
            layout={"barmode": "stack", "xaxis": {"title": "topic / partition", "type": "category"},
                    "yaxis": _counts("records"), "legend": {"title": {"text": "status"}}},
        )
    if data.statuses:
        figs["statuses"] = go.Figure(
            go.Bar(x=list(_STATUSES), y=[data.count(s) for s in _STATUSES],
                   marker={"color": [_STATUS_COLOURS[s] for s in _STATUSES]},
                   text=[_count_text(data.count(s)) for s in _STATUSES],
                   textposition="auto"),
            layout={"xaxis": {"title": "status", "type": "category"}, "yaxis": _counts("records")},
        )
    if data.breaches:
        runs = list(dict.fromkeys((r[0], r[1]) for r in data.breaches))  # in order: oldest first
        kinds = sorted({r[3] for r in data.breaches}, key=lambda k: (k is not None, k or ""))
        cell = {(r[0], r[3]): int(r[2]) for r in data.breaches}
        figs["breaches"] = go.Figure(
            [go.Bar(name=breach_kind(kind), x=[f"{_label(at)} · {str(run)[:8]}" for run, at in runs],
                    y=[cell.get((run, kind), 0) for run, _ in runs], customdata=[str(run) for run, _ in runs],
                    marker={"color": _breach_colour(i, kind)},
                    hovertemplate=f"run %{{customdata}}<br>%{{y}} breach(es): {html.escape(breach_kind(kind))}"
                                  "<extra></extra>")
             for i, kind in enumerate(kinds)],
            layout={"barmode": "stack", "xaxis": {"title": "run (first breach)", "type": "category"},
                    "yaxis": _counts("breaches"), "showlegend": True,  # a lone kind is named too
                    "legend": {"title": {"text": "kind"}, "orientation": "h", "y": -0.3}},
        )
    if data.replays:
        traces = []
        for status in (QuarantineStatus.REPLAYED.value, QuarantineStatus.DISCARDED.value):
            rows = [r for r in data.replays if r[1] == status]
            if rows:
                traces.append(go.Bar(
                    name=status, x=[_label(r[0]) for r in rows], y=[r[3] for r in rows],
                    customdata=[_label(r[2]) for r in rows], marker={"color": _STATUS_COLOURS[status]},
                    hovertemplate="%{customdata}<br>%{y} record(s)<extra></extra>",
                ))
        figs["replays"] = go.Figure(
            traces, layout={"barmode": "stack", "xaxis": {"title": "resolved at", "type": "category"},
                            "yaxis": _counts("records")},
        )
    return figs


def _breach_colour(i: int, stage: str | None) -> str:
    return "#ff7f0e" if stage is None else _EXPECTATION_COLOURS[i % len(_EXPECTATION_COLOURS)]


def breach_kind(stage: str | None) -> str:
    """How the report names a kind of breach (:func:`breaches_per_run`'s ``stage``)."""
    if stage is None:
        return "error limit (errors.tolerance, a fail handler)"
    return f"aggregate expectations of {stage} (warn, fail or quarantine_batch)"


def _no_data(data: ReportData, fig_id: str) -> str:
    reason = data.missing.get(fig_id) or {
        "over_time": "no quarantined records",
        "error_classes": "no quarantined records",
        "partitions": "no quarantined records",
        "statuses": "no quarantined records",
        "breaches": "no tolerance breach recorded",
        "replays": "no record replayed or discarded yet",
    }[fig_id]
    return f'<div class="no-data">No data: {html.escape(reason)}.</div>'


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } .meta { color: #666; margin-top: 0; }
.summary { display: flex; gap: 1rem; flex-wrap: wrap; padding: 0; list-style: none; }
.summary li { border: 1px solid #ddd; border-radius: 6px; padding: .5rem .8rem; }
.summary b { display: block; font-size: 1.3rem; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1rem; }
@media (max-width: 900px) { .grid { grid-template-columns: minmax(0, 1fr); } }
section.figure { border: 1px solid #ddd; border-radius: 6px; padding: .5rem; min-width: 0; overflow: hidden; }
section.figure h2 { font-size: 1rem; margin: .2rem .4rem; }
.chart { height: 360px; width: 100%; }
.no-data { height: 360px; display: flex; align-items: center; justify-content: center;
           color: #666; font-size: 1.1rem; background: #f6f6f6; border-radius: 4px; }
"""


def render_html(data: ReportData) -> str:
    """The report page: plotly.js inlined once, one section per figure (:data:`FIGURES`), no network.

    Raises:
        ReportDependencyError: Plotly is not installed.
    """
    go = require_plotly()
    from plotly.offline import get_plotlyjs

    figs = _figures(data, go)
    sections = []
    for fig_id, title in FIGURES:
        if fig_id in figs:
            fig = figs[fig_id]
            _whole_ticks(fig)
            fig.update_layout(template="plotly_white", margin={"t": 20}, height=360)
            body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{fig_id}",
                               config={"displaylogo": False, "responsive": True})
            body = f'<div class="chart">{body}</div>'
        else:
            body = _no_data(data, fig_id)
        sections.append(f'<section class="figure" data-figure="{fig_id}"><h2>{html.escape(title)}</h2>{body}</section>')
    tiles = [(s, f"{data.count(s):,}") for s in _STATUSES]
    tiles.insert(0, ("quarantined", f"{sum(int(n) for _, n in data.statuses):,}"))
    if data.records_in is not None:
        tiles.insert(0, ("records in", f"{data.records_in:,}"))
    tiles.append(("error-limit breaches", f"{sum(int(r[2]) for r in data.breaches if r[3] is None):,}"))
    tiles.append(("expectation breaches", f"{sum(int(r[2]) for r in data.breaches if r[3] is not None):,}"))
    summary = "".join(f"<li><b>{v}</b>{html.escape(k)}</li>" for k, v in tiles)
    meta = (f"generated {data.generated_at:%Y-%m-%d %H:%M:%S %Z} · quarantine table "
            f"{html.escape(data.quarantine_table)} · metrics table {html.escape(data.metrics_table or '(none)')}")
    if data.since is not None:
        meta += f" · since {html.escape(data.since.isoformat())}"
    title = f"quarantine report: {html.escape(data.pipeline)}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title}</title><style>{_STYLE}</style>\n"
        f"<script type=\"text/javascript\">{get_plotlyjs()}</script>\n</head>\n"
        f"<body><h1>{title}</h1><p class=\"meta\">{meta}</p><ul class=\"summary\">{summary}</ul>\n"
        f"<div class=\"grid\">{''.join(sections)}</div>\n"
        f"<script type=\"application/json\" id=\"report-data\">{_embedded(data)}</script>\n"
        "</body></html>\n"
    )


def _embedded(data: ReportData) -> str:
    """The figures' row counts as JSON (for scripts reading the page); ``<`` escaped, so no text ends the script."""
    counts = {fig_id: len(getattr(data, fig_id)) for fig_id, _ in FIGURES}
    return json.dumps({"pipeline": data.pipeline, "rows": counts}).replace("<", "\\u003c")


def write_report(
    spark: SparkSession,
    out: str | Path,
    *,
    pipeline: str,
    quarantine_table: str,
    metrics_table: str | None,
    since: dt.datetime | None = None,
    now: dt.datetime | None = None,
) -> ReportData:
    """Aggregate, render and write the page to ``out`` (its folders created); the data it shows.

    Raises:
        ReportDependencyError: Plotly is not installed (checked before Spark runs anything).
    """
    require_plotly()
    data = collect_report_data(
        spark, pipeline=pipeline, quarantine_table=quarantine_table, metrics_table=metrics_table,
        since=since, now=now,
    )
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(data), encoding="utf-8")
    return data
