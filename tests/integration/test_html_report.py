"""``quarantine report`` over tables from a real run: every figure's numbers, empty states, the CLI.

The tables come from :func:`tests.helpers.report_run` (a run, a breaching run, a
replay and a discard; built once per worker by the ``report_conf`` fixture), so every
figure has data; the browser test of the same page is ``tests/e2e/test_report_browser.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.config import load_config
from quarantine.ops.report_model import ReportData
from quarantine.ops.report_page import FIGURES, write_page
from tests.helpers import REPORT_SOURCE, kafka_df, orders_config, spark_report_data
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
SRC = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


@pytest.fixture
def run_conf(report_conf: Path) -> Path:
    """The config of :func:`tests.helpers.report_run`'s tables (``report_conf``, tests/conftest.py)."""
    return report_conf


def _data(spark: Any, conf: Path, **kw: Any) -> ReportData:
    config = load_config(conf)
    return spark_report_data(
        spark, pipeline=config.pipeline, quarantine_table=config.errors.dlq_table_name,
        metrics_table=config.metrics.table, **kw,
    )


def test_every_figure_counts_what_the_run_replay_and_discard_did(spark: Any, run_conf: Path) -> None:
    data = _data(spark, run_conf)
    assert data.missing == {}
    # run 1 quarantined 7 of 9: 2 invalid UTF-8 (decode), 5 at parse; 2 replayed, 2 discarded
    assert dict(data.statuses) == {"open": 3, "replayed": 2, "discarded": 2}
    assert {r[1] for r in data.over_time} == {"decode", "parse"} and sum(r[2] for r in data.over_time) == 7
    assert data.unit == "hour"
    assert sum(r[1] for r in data.error_classes) == 7 and sum(r[2] for r in data.error_classes) == 3
    assert [r[1] for r in data.error_classes] == sorted((r[1] for r in data.error_classes), reverse=True)
    # partition 0: offsets 1 (discarded) and 4 (replayed) closed, 2 and 3 open; partition 1: 101 (replayed)
    # and 102 (discarded) closed, 103 open
    assert data.partitions == [("orders", 0, 4, 1, 4, 2, 2, 3, 1, 4), ("orders", 1, 3, 101, 103, 1, 103, 103, 101, 102)]
    (breach,) = data.breaches  # run 2 ended on errors.tolerance.limit
    assert breach[2] == 1  # one breach, counted once (the metrics table had 2: run end + batch)
    assert breach[3] is None  # an error limit's, not an expectation stage's
    resolved = {(r[1], r[2].split(" ")[0], r[3]) for r in data.replays}
    assert resolved == {("replayed", "replayed", 2), ("discarded", "discarded:", 2)}
    metrics = spark.read.format("delta").load(load_config(run_conf).metrics.table)
    (runs,) = metrics.where("metric = 'records-in'").groupBy().agg({"value": "sum"}).collect()
    assert data.records_in == runs[0] >= sum(len(v) for v in REPORT_SOURCE.values())


def test_since_keeps_only_later_records_breaches_and_resolutions(spark: Any, run_conf: Path) -> None:
    later = _data(spark, run_conf, since=dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert later.statuses == later.over_time == later.breaches == later.replays == later.partitions == []
    assert later.records_in == 0
    earlier = _data(spark, run_conf, since=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    assert dict(earlier.statuses) == {"open": 3, "replayed": 2, "discarded": 2}


def test_the_cli_writes_a_page_with_every_chart_and_no_network_reference(
    run_conf: Path, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "site" / "report.html"
    assert main(["report", "--conf", str(run_conf), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "pipeline report_test: 7 quarantined record(s)" in printed
    assert re.search(r"replayed\s+2\n", printed)
    assert re.search(r"breaches\s+1 in 1 run\(s\): error limits 1, expectations 0", printed)
    page = out.read_text(encoding="utf-8")
    assert page.count("Plotly.newPlot(") == len(FIGURES) and 'class="no-data"' not in page
    assert page.count("<script") == len(FIGURES) + 2  # plotly.js once, one per chart, the embedded counts
    assert SRC.search(page) is None, SRC.search(page)
    for fig_id, _ in FIGURES:
        assert f'data-figure="{fig_id}"' in page and f'id="chart-{fig_id}"' in page


def test_the_readmes_report_command_runs(run_conf: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    (argv,) = block("report").commands()
    argv = argv[1:]
    argv[argv.index("--conf") + 1] = str(run_conf)  # the README's demo config, here the run's
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    assert (tmp_path / argv[argv.index("--out") + 1]).is_file()
    assert "wrote the report to" in capsys.readouterr().out


def test_a_pipeline_without_failures_breaches_or_replays_says_no_data_in_every_figure(
    spark: Any, table_dir: Path, tmp_path: Path
) -> None:
    from quarantine.config import parse_config
    from quarantine.pipeline import Pipeline

    kafka_df(spark, [b'{"order_id":"1","amount":1}']).write.format("delta").save(str(table_dir / "source"))
    cfg = orders_config(table_dir, "clean_test")
    cfg["metrics"] = {"table": str(table_dir / "metrics")}
    Pipeline.from_config(parse_config(cfg), spark).run()
    data = spark_report_data(spark, pipeline="clean_test", quarantine_table=str(table_dir / "quarantine"),
                             metrics_table=str(table_dir / "metrics"))
    write_page(data, tmp_path / "r.html")
    assert data.records_in == 1 and data.breaches == [] and sum(n for _, n in data.statuses) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count('class="no-data"') == len(FIGURES) and "Plotly.newPlot(" not in page
    assert "No data: no tolerance breach recorded." in page


def test_missing_tables_are_named_in_the_no_data_text(spark: Any, table_dir: Path, tmp_path: Path) -> None:
    data = spark_report_data(spark, pipeline="nothing_yet", quarantine_table=str(table_dir / "q"), metrics_table=None)
    write_page(data, tmp_path / "r.html")
    assert set(data.missing) == {fig for fig, _ in FIGURES}
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count(f"no quarantine table at {table_dir / 'q'} yet") == len(FIGURES) - 1
    assert "no metrics table: the config has no metrics.table" in page


def test_a_bad_since_is_a_usage_error_naming_the_option(run_conf: Path, tmp_path: Path, capsys: Any) -> None:
    code = main(["report", "--conf", str(run_conf), "--out", str(tmp_path / "r.html"), "--since", "last week"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--since" in err and "last week" in err and "ISO date" in err
    assert not (tmp_path / "r.html").exists()


def test_a_table_that_is_not_a_quarantine_table_is_a_config_error_naming_the_key(
    spark: Any, run_conf: Path, tmp_path: Path, capsys: Any
) -> None:
    other = str(tmp_path / "not_quarantine")
    spark.range(3).write.format("delta").save(other)
    argv = ["report", "--conf", str(run_conf), "--out", str(tmp_path / "r.html"),
            "--set", f"errors.deadletterqueue.table.name={other}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "errors.deadletterqueue.table.name" in err and "not_quarantine" in err
    assert not (tmp_path / "r.html").exists()


def test_records_in_counts_the_pipelines_runs_not_what_replays_and_discards_selected(
    spark: Any, table_dir: Path
) -> None:
    from quarantine.schema import METRICS_SCHEMA

    at = dt.datetime(2026, 11, 2, 10, tzinfo=dt.UTC)
    rows = [
        ("p", "run-1", 0, at, "records-in", None, "orders", 10_000.0, "run"),
        ("p", "run-0", 0, at, "records-in", None, "orders", 5.0, None),  # written before run_kind existed
        ("p", "replay-1", 0, at, "records-in", None, "orders", 7_790.0, "replay"),
        ("p", "replay-2", 0, at, "records-in", None, "orders", 53.0, "replay"),
        ("p", "discard-1", 0, at, "records-discarded", None, None, 4.0, "discard"),
        ("other", "run-2", 0, at, "records-in", None, "orders", 99.0, "run"),
    ]
    metrics = str(table_dir / "metrics")
    spark.createDataFrame(rows, METRICS_SCHEMA).write.format("delta").save(metrics)
    data = spark_report_data(spark, pipeline="p", quarantine_table=str(table_dir / "q"), metrics_table=metrics)
    assert data.records_in == 10_005
    # two replays and a discard ran, whatever they closed (issue 54: after two replays, one of which
    # closed nothing, the report said "replays and discards 1")
    assert data.resolution_runs == [("discard", 1), ("replay", 2)]
    assert "  replays and discards   3 run(s): replay 2, discard 1" in data.summary_lines()


def test_the_headline_says_records_and_reads_apart(
    spark: Any, run_conf: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report run's source holds 9 records; its runs read 16 (run 2 read the 7 open ones again).
    The headline says both, each named for what it is, on either engine."""
    config = load_config(run_conf)
    source = sum(len(v) for v in REPORT_SOURCE.values())
    target = spark.read.format("delta").load(config.target.table).count()
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    held = quarantine.where("status <> 'replayed'").count()
    assert (target, held) == (4, 5)  # 2 passed run 1, 2 were replayed; 3 open and 2 discarded
    metrics = spark.read.format("delta").load(config.metrics.table)
    (reads,) = metrics.where("metric = 'records-in' AND run_kind = 'run'").groupBy().agg({"value": "sum"}).first()
    assert reads == 16 > source
    for engine in ("spark", "auto"):  # the Spark path, then the JVM-free one (path tables)
        monkeypatch.setenv("QUARANTINE_READ_ENGINE", engine)
        assert main(["report", "--conf", str(run_conf), "--out", str(tmp_path / f"{engine}.html")]) == 0
        printed = capsys.readouterr().out
        assert re.search(rf"^  records +{source} +\(4 in the target, 5 in quarantine: open or discarded\)$",
                         printed, re.M), printed
        assert re.search(r"^  reads +16 +\(", printed, re.M), printed
        assert "records in" not in printed
        page = (tmp_path / f"{engine}.html").read_text(encoding="utf-8")
        assert f"<li><b>{source}</b>records</li>" in page and "<li><b>16</b>reads</li>" in page
    data = _data(spark, run_conf, target_table=config.target.table)
    assert (data.records, data.records_in) == (source, 16)
    # --since: the target's rows have no time to cut by, so records are not counted
    assert _data(spark, run_conf, target_table=config.target.table, since=dt.datetime(2020, 1, 1,
                                                                                   tzinfo=dt.UTC)).records is None
