"""A pipeline's report page: one self-contained HTML page of its quarantine and metrics tables.

Six figures, each aggregated over the quarantine table and the metrics table, filtered to
the config's pipeline (:func:`quarantine.ops.reads.report_data`: one read each, on DuckDB
over path tables or on Spark); only the small aggregates
(:class:`~quarantine.ops.report_model.ReportData`) reach this module, where Plotly draws them:

* ``over_time`` — quarantined records by the hour (by the day past three days)
  of ``first_seen_at``, stacked by ``stage``;
* ``error_classes`` — the ten most frequent ``error_class`` values, open and closed, each bar
  labelled with its count (on a log axis when the largest class would flatten the others);
* ``partitions`` — records per ``topic``/``partition``, open and closed, with their lowest and highest offset;
* ``statuses`` — open vs replayed vs discarded;
* ``breaches`` — ``tolerance-breaches`` per run, by kind: an error limit's, or a judging stage's
  aggregate expectations' (metrics table cells);
* ``replays`` — closed rows per resolution (``resolved_at``, ``status``, ``resolution``).

A bar's count label is drawn at 10 px or more, or not at all (a small segment of a stack:
its hover text has the count); the error classes' legend sits above the plot, clear of the
labels outside their bars (``tests/e2e/test_report_browser.py`` measures both in Chromium).

The page needs no network when viewed: plotly.js is inlined once in ``<head>``
and every figure is a ``<div>`` plus a ``Plotly.newPlot`` call. A figure without
data (no quarantine table yet, no breach, no replay, no metrics table) is a
``<div class="no-data">`` saying so. Plotly is the optional extra
``spark-quarantine[report]``; without it ``quarantine report`` raises
:class:`ReportDependencyError` before any table is read. This module imports no engine.

``quarantine report`` (:mod:`quarantine.cli`) writes it. The same figures are a Lakeview
dashboard in the bundle (``dashboards/quarantine.lvdash.json``).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

from quarantine.columns import QuarantineStatus
from quarantine.errors import MissingDependencyError
from quarantine.ops.report_model import STATUSES, TOP_ERROR_CLASSES, ReportData

__all__ = [
    "FIGURES",
    "ReportDependencyError",
    "breach_kind",
    "render_html",
    "require_plotly",
    "write_page",
]

#: Each figure's id (the ``data-figure`` attribute of its section) and title, in page order.
FIGURES: tuple[tuple[str, str], ...] = (
    ("over_time", "Quarantined records over time, by stage"),
    ("error_classes", f"Top {TOP_ERROR_CLASSES} error classes"),
    ("partitions", "Records and offsets per partition, open and closed"),
    ("statuses", "Open vs replayed vs discarded"),
    ("breaches", "Breaches per run, by kind"),
    ("replays", "Replay history"),
)

_STATUS_COLOURS = {"open": "#d62728", "replayed": "#2ca02c", "discarded": "#7f7f7f"}
#: Breaches: an error limit's in orange, each judging stage's in a blue or a purple.
_EXPECTATION_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b")


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


#: The smallest font (px) a bar's label is drawn at; a label that would need less is hidden.
_LABEL_MIN_PX = 10


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
        # a row without first_seen_at buckets as NULL: first, as the aggregation orders it
        buckets = sorted({r[0] for r in data.over_time}, key=lambda b: (b is not None, b or dt.datetime.min))
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
            # the legend above the plot: at its default place, right of the plot, the largest bar's
            # label (outside its bar) ran into it
            layout={"barmode": "group", "xaxis": _count_axis("records", [n for xs in counts.values() for n in xs]),
                    "yaxis": {"type": "category"}, "margin": {"l": 220, "r": 40},
                    "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}},
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
            go.Bar(x=list(STATUSES), y=[data.count(s) for s in STATUSES],
                   marker={"color": [_STATUS_COLOURS[s] for s in STATUSES]},
                   text=[_count_text(data.count(s)) for s in STATUSES],
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
    for fig in figs.values():
        # a label Plotly would shrink below 10 px to fit its bar (a small segment of a stack) is
        # hidden instead: unreadable, it only cluttered; the bar's hover text has its count
        fig.update_layout(uniformtext={"minsize": _LABEL_MIN_PX, "mode": "hide"})
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
    tiles = [(s, f"{data.count(s):,}") for s in STATUSES]
    tiles.insert(0, ("quarantined", f"{sum(int(n) for _, n in data.statuses):,}"))
    if data.records_in is not None:
        tiles.insert(0, ("reads", f"{data.records_in:,}"))
    if data.records is not None:
        tiles.insert(0, ("records", f"{data.records:,}"))
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


def write_page(data: ReportData, out: str | Path) -> None:
    """Render ``data`` and write the page to ``out`` (its folders created).

    Raises:
        ReportDependencyError: Plotly is not installed.
    """
    page = render_html(data)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
