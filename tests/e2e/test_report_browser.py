"""``quarantine report``'s page in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

The page of a run with data in every figure (:func:`tests.helpers.report_run`: failures at
two stages on two partitions, a breach, a replay and a discard) loads from ``file://`` with
no console error and no request leaving the file, every chart is drawn with its bars, and
a screenshot is saved to ``artifacts/report.png`` (CI keeps ``artifacts/``). The page of a
pipeline with nothing to show says "No data" in every figure, also without an error.

Chromium is the system's (``make test`` installs it: ``scripts/install_browser.sh``); Playwright never downloads
a browser here. A machine without it fails this test with that instruction; it never skips.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from quarantine.cli import main
from quarantine.ops.report_model import ReportData
from quarantine.ops.report_page import FIGURES, render_html
from tests.e2e.conftest import open_page as _open

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"


def test_the_report_of_a_run_draws_every_chart_without_console_errors(
    report_conf: Path, tmp_path: Path, browser_page: tuple[Any, list[str]]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", "--conf", str(report_conf), "--out", str(out)]) == 0

    page, problems = browser_page
    _open(page, out)
    for fig, _ in FIGURES:
        chart = f'section[data-figure="{fig}"] #chart-{fig}'
        page.wait_for_selector(f"{chart} .main-svg g.trace", state="attached", timeout=30_000)
        traces = page.locator(f"{chart} .main-svg g.trace").count()
        bars = page.locator(f"{chart} .main-svg g.trace g.point path").count()
        assert traces > 0 and bars > 0, (fig, traces, bars)
    assert page.locator(".no-data").count() == 0
    assert page.title() == "quarantine report: report_test"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert problems == []


def test_the_report_of_an_empty_pipeline_says_no_data_in_every_figure_without_errors(
    spark: Any, tmp_path: Path, browser_page: tuple[Any, list[str]]
) -> None:
    import yaml

    from tests.helpers import orders_config

    conf = tmp_path / "empty.yml"
    conf.write_text(yaml.safe_dump({**orders_config(tmp_path), "metrics": {"table": str(tmp_path / "metrics")}}))
    out = tmp_path / "empty.html"
    assert main(["report", "--conf", str(conf), "--out", str(out)]) == 0

    page, problems = browser_page
    _open(page, out)
    texts = page.locator("section.figure .no-data").all_inner_texts()
    assert len(texts) == len(FIGURES) and all(t.startswith("No data: ") for t in texts), texts
    assert page.locator(".main-svg").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-empty.png"), full_page=True)
    assert problems == []


def _chart(page: Any, fig: str) -> list[dict[str, Any]]:
    """The traces Plotly drew in a figure: name, x and y (as plain lists)."""
    return list(page.evaluate(
        """id => document.getElementById(id)._fullData.map(t => ({
               name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || [])}))""",
        f"chart-{fig}",
    ))


def test_the_numbers_on_the_page_are_the_tables_numbers(
    spark: Any, report_conf: Path, tmp_path: Path, browser_page: tuple[Any, list[str]]
) -> None:
    """Every tile and every bar, read from the page as drawn, against aggregates of the Delta tables
    made here (not by the report's code); the metrics table also holds a replay's rows, whose
    records-in are records it selected from quarantine, not source records."""
    import datetime as dt
    import shutil

    from pyspark.sql import functions as F

    from quarantine.config import load_config
    from quarantine.schema import METRICS_SCHEMA

    config = load_config(report_conf)
    metrics_path = tmp_path / "metrics"
    shutil.copytree(str(config.metrics.table), metrics_path)
    replay_rows = [("report_test", "a-replay", 0, dt.datetime.now(dt.UTC), "records-in", None, "orders", 4.0,
                    "replay")]
    spark.createDataFrame(replay_rows, METRICS_SCHEMA).write.format("delta").mode("append").save(str(metrics_path))
    out = tmp_path / "report.html"
    argv = ["report", "--conf", str(report_conf), "--out", str(out), "--set", f"metrics.table={metrics_path}"]
    assert main(argv) == 0

    q = spark.read.format("delta").load(str(config.errors.dlq_table_name)).where("pipeline = 'report_test'")
    m = spark.read.format("delta").load(str(metrics_path)).where("pipeline = 'report_test'")
    is_open = (F.col("status") == "open").cast("int")
    statuses = {r["status"]: r["n"] for r in q.groupBy("status").agg(F.count("*").alias("n")).collect()}
    (runs_in,) = m.where("metric = 'records-in' AND coalesce(run_kind, 'run') = 'run'").agg(F.sum("value")).first()
    breaches = m.where("metric = 'tolerance-breaches'")
    (limits,) = breaches.where("stage IS NULL").agg(F.coalesce(F.sum("value"), F.lit(0.0))).first()
    (expectations,) = breaches.where("stage IS NOT NULL").agg(F.coalesce(F.sum("value"), F.lit(0.0))).first()
    classes = {r["error_class"]: (r["n"] - r["o"], r["o"])
               for r in q.groupBy("error_class").agg(F.count("*").alias("n"), F.sum(is_open).alias("o")).collect()}
    partitions = {f"{r['topic']} / {r['partition']}": (r["n"] - r["o"], r["o"]) for r in
                  q.groupBy("topic", "partition").agg(F.count("*").alias("n"), F.sum(is_open).alias("o")).collect()}

    page, problems = browser_page
    _open(page, out)
    for fig, _ in FIGURES:
        page.wait_for_selector(f"#chart-{fig} .main-svg g.trace", state="attached", timeout=30_000)
    shown = [(li.locator("b").inner_text(), li.inner_text()) for li in page.locator(".summary li").all()]
    tiles = {text.removeprefix(value).strip(): int(value.replace(",", "")) for value, text in shown}
    in_target = spark.read.format("delta").load(str(config.target.table)).count()
    held = sum(n for status, n in statuses.items() if status != "replayed")
    assert tiles == {"records": in_target + held, "reads": int(runs_in), "quarantined": sum(statuses.values()),
                     **statuses, "error-limit breaches": int(limits), "expectation breaches": int(expectations)}
    assert tiles["reads"] == 16  # run 1 read 9 records, run 2 the 7 not in the target; not the replay's 4
    assert tiles["records"] == 9  # the source's: each in the target or held in quarantine, once

    def by_category(fig: str, category: str, value: str) -> dict[str, tuple[int, int]]:
        traces = {t["name"]: dict(zip(t[category], t[value], strict=True)) for t in _chart(page, fig)}
        return {c: (int(traces["closed"].get(c, 0)), int(traces["open"].get(c, 0)))
                for c in set(traces["open"]) | set(traces["closed"])}

    assert by_category("error_classes", "y", "x") == classes
    assert by_category("partitions", "x", "y") == partitions
    (status_bars,) = _chart(page, "statuses")
    assert dict(zip(status_bars["x"], status_bars["y"], strict=True)) == {
        s: statuses.get(s, 0) for s in ("open", "replayed", "discarded")}
    assert sum(y for t in _chart(page, "breaches") for y in t["y"]) == limits + expectations == 1
    assert problems == []


#: A bar label smaller than this (its drawn height, px) cannot be read: Plotly shrinks a label to fit its bar.
_READABLE_PX = 10

_LABELS = """id => {
  const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  const chart = document.getElementById(id);
  const legend = chart.querySelector('g.legend');
  const labels = Array.from(chart.querySelectorAll('g.trace.bars text.bartext'))
    .filter(t => t.textContent.trim() && getComputedStyle(t).display !== 'none'
                 && getComputedStyle(t).visibility !== 'hidden' && Number(getComputedStyle(t).opacity) > 0
                 && t.getBoundingClientRect().width > 0)
    .map(t => ({text: t.textContent, ...box(t)}));
  return {legend: legend ? box(legend) : null, labels: labels};
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    across = a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
    return across and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_bar_labels_are_readable_and_clear_of_the_legend(tmp_path: Path, browser_page: tuple[Any, list[str]]) -> None:
    """Issue 54, point 5: the largest bar's label overlapped the legend, and the labels of small
    segments were shrunk past reading. A page of counts far apart (one class and one partition
    with nearly every record, segments of 1 beside thousands), read as Chromium draws it: no
    label's box meets the legend's, and every label shown is at least 10 px high (a segment too
    small for its label shows none: the count is in its hover text)."""
    at = dt.datetime(2026, 11, 28, 10)
    data = ReportData(
        pipeline="labels", generated_at=at, quarantine_table="/q", metrics_table="/m",
        over_time=[(at, "decode", 3), (at, "parse", 9_000), (at + dt.timedelta(hours=1), "parse", 40)],
        error_classes=[("SchemaMismatch", 9_000, 8_990), ("InvalidUtf8", 150, 150), ("MalformedJson", 40, 2),
                       ("CastFailed", 3, 1)],
        partitions=[("orders", 0, 9_000, 0, 9_999, 8_999, 0, 9_999, 5, 5),
                    ("orders", 1, 190, 3, 400, 150, 3, 300, 310, 400)],
        statuses=[("open", 9_150), ("replayed", 39), ("discarded", 1)],
        breaches=[("run-1", at, 1, None), ("run-2", at + dt.timedelta(hours=1), 2, "expect_order")],
        replays=[(at, "replayed", "fixed", 39), (at, "discarded", "junk", 1)],
        resolution_runs=[("replay", 1), ("discard", 1)], records_in=20_000,
    )
    out = tmp_path / "labels.html"
    out.write_text(render_html(data), encoding="utf-8")

    page, problems = browser_page
    _open(page, out)
    drawn = 0
    for fig, _ in FIGURES:
        page.wait_for_selector(f"#chart-{fig} .main-svg g.trace", state="attached", timeout=30_000)
        found = page.evaluate(_LABELS, f"chart-{fig}")
        for label in found["labels"]:
            assert label["h"] >= _READABLE_PX, (fig, label)
            assert found["legend"] is None or not _overlap(label, found["legend"]), (fig, label, found["legend"])
        drawn += len(found["labels"])
    assert drawn >= 6  # the labels are there: the checks above looked at some
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-labels.png"), full_page=True)
    assert problems == []
