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

from pathlib import Path
from typing import Any

from quarantine.cli import main
from quarantine.html_report import FIGURES
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
