"""The report page as rendered from collected rows (no Spark): structure, no network, empty states."""

from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import replace
from typing import Any

import pytest

from quarantine.commands.options import parse_time
from quarantine.errors import ConfigError
from quarantine.ops.report_model import ReportData, time_unit
from quarantine.ops.report_page import (
    FIGURES,
    ReportDependencyError,
    _figures,
    render_html,
    require_plotly,
)

T0 = dt.datetime(2026, 11, 2, 10, 0)
SRC = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


def _full() -> ReportData:
    return ReportData(
        pipeline="orders <demo>", generated_at=dt.datetime(2026, 11, 2, 12, tzinfo=dt.UTC),
        quarantine_table="/data/q", metrics_table="/data/m",
        over_time=[(T0, "decode", 3), (T0, "parse", 2), (T0 + dt.timedelta(hours=1), "parse", 1)],
        error_classes=[("InvalidUtf8", 3, 1), ("JsonParseError", 3, 3)],
        partitions=[("orders", 0, 4, 1, 9, 3, 1, 8, 9, 9), ("orders", 1, 2, 100, 101, 0, None, None, 100, 101)],
        statuses=[("open", 4), ("replayed", 1), ("discarded", 1)],
        breaches=[("run-1234567890", T0, 2, None)],
        replays=[(T0, "replayed", "replayed by run r2", 1), (T0, "discarded", "discarded: bug", 1)],
        records_in=100,
    )


def test_every_figure_is_a_chart_with_plotly_inlined_once_and_nothing_fetched() -> None:
    from plotly.offline import get_plotlyjs

    page = render_html(_full())
    assert page.count(get_plotlyjs()) == 1
    assert page.count("Plotly.newPlot(") == len(FIGURES) and "no-data" not in page.split("<body>")[1]
    for fig, title in FIGURES:
        assert f'<section class="figure" data-figure="{fig}"><h2>{title}</h2>' in page
    assert SRC.search(page) is None
    assert "<title>quarantine report: orders &lt;demo&gt;</title>" in page and "orders <demo>" not in page
    assert '"displaylogo": false' in page
    assert page.count('"dtick":1') == len(FIGURES)  # small counts tick at whole numbers, never at halves


def test_an_empty_report_says_no_data_and_why_in_every_figure() -> None:
    empty = ReportData(
        pipeline="p", generated_at=dt.datetime(2026, 11, 2, tzinfo=dt.UTC), quarantine_table="/q",
        metrics_table=None, missing={"breaches": "the config has no metrics.table"},
    )
    page = render_html(empty)
    assert "Plotly.newPlot(" not in page
    assert page.count('<div class="no-data">No data: ') == len(FIGURES)
    assert "No data: the config has no metrics.table." in page
    assert "No data: no record replayed or discarded yet." in page


def test_summary_lines_count_each_status_and_the_breaches() -> None:
    lines = _full().summary_lines()
    assert lines[0] == "pipeline orders <demo>: 6 quarantined record(s)"
    assert any(re.fullmatch(r"  open\s+4", ln) for ln in lines)
    assert any(re.fullmatch(r"  breaches\s+2 in 1 run\(s\): error limits 2, expectations 0", ln) for ln in lines)


def test_over_time_buckets_by_the_hour_up_to_three_days_then_by_the_day() -> None:
    assert time_unit(None, None) == "hour"
    assert time_unit(T0, T0 + dt.timedelta(days=3)) == "hour"
    assert time_unit(T0, T0 + dt.timedelta(days=3, seconds=1)) == "day"


def test_since_is_an_iso_date_in_utc_unless_it_has_an_offset() -> None:
    assert parse_time("2026-11-01", "--since") == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert parse_time("2026-11-01T12:00+01:00", "--since").utcoffset() == dt.timedelta(hours=1)
    with pytest.raises(ConfigError, match=r"--since.*yesterday.*ISO date"):
        parse_time("yesterday", "--since")


def test_without_plotly_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(ReportDependencyError, match=r"pip install 'spark-quarantine\[report\]'"):
        require_plotly()
    with pytest.raises(ReportDependencyError):
        render_html(_full())


def _figure(data: ReportData, fig_id: str) -> Any:
    return _figures(data, require_plotly())[fig_id]


def test_error_classes_show_their_counts_on_a_scale_where_a_huge_class_hides_no_other() -> None:
    data = replace(_full(), error_classes=[("range", 7_784, 7_784), ("MalformedJson", 43, 40), ("InvalidUtf8", 3, 0)])
    fig = _figure(data, "error_classes")
    assert fig.layout.xaxis.type == "log"  # 3 records stay visible next to 7,784
    assert fig.layout.xaxis.dtick == 1 and tuple(fig.layout.xaxis.range) == (0, pytest.approx(4.37, abs=0.01))
    shown = {(trace.name, y, text) for trace in fig.data for y, text in zip(trace.y, trace.text, strict=True)}
    assert ("open", "range", "7,784") in shown and ("closed", "MalformedJson", "3") in shown
    assert ("closed", "InvalidUtf8", "3") in shown and ("open", "MalformedJson", "40") in shown
    # counts of one size: a plain axis from 0
    assert _figure(_full(), "error_classes").layout.xaxis.type in (None, "linear")


def test_offsets_per_partition_say_which_records_are_open_and_which_closed() -> None:
    data = replace(_full(), partitions=[("orders", 0, 10, 1, 900, 4, 500, 900, 1, 400),
                                      ("orders", 1, 2, 100, 101, 0, None, None, 100, 101)])
    fig = _figure(data, "partitions")
    bars = {trace.name: list(trace.y) for trace in fig.data}
    assert bars == {"open": [4, 0], "closed": [6, 2]}
    hover = " ".join(str(c) for trace in fig.data for c in trace.customdata)
    assert "offsets 500..900" in hover and "offsets 1..400" in hover and "no records" in hover
    assert dict(FIGURES)["partitions"] == "Records and offsets per partition, open and closed"


def test_breaches_are_labelled_by_kind_an_error_limits_or_an_expectation_stages() -> None:
    data = replace(_full(), breaches=[("run-1", T0, 1, None), ("run-2", T0 + dt.timedelta(hours=1), 2, "expect_order")])
    fig = _figure(data, "breaches")
    bars = {trace.name: [y for y in trace.y] for trace in fig.data}
    assert bars == {"error limit (errors.tolerance, a fail handler)": [1, 0],
                    "aggregate expectations of expect_order (warn, fail or quarantine_batch)": [0, 2]}
    assert dict(FIGURES)["breaches"] == "Breaches per run, by kind"
    assert _figure(_full(), "breaches").layout.showlegend is True  # one kind is named too
    assert any(re.fullmatch(r"  breaches\s+3 in 2 run\(s\): error limits 1, expectations 2", ln)
               for ln in data.summary_lines())


def test_records_without_a_first_seen_time_are_drawn_in_a_bucket_of_their_own() -> None:
    # a quarantine row with first_seen_at NULL (written by hand, or by an old build) buckets as NULL
    data = replace(_full(), over_time=[(None, "decode", 2), (T0, "decode", 3), (T0, None, 1)])
    fig = _figures(data, require_plotly())["over_time"]
    assert [list(t.x) for t in fig.data] == [["(none)", "2026-11-02 10:00"]] * 2
    assert [list(t.y) for t in fig.data] == [[0, 1], [2, 3]]  # stage (none) first, as _label sorts it
    assert "Plotly.newPlot(" in render_html(data)
