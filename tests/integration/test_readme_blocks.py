"""The README blocks no other test runs: the notebook quickstart, the metrics table's SQL,
the SQL over quarantine rows by run and kind, and the errant record reporter.

Each block is read by its key (``tests/support/readme.py``) and run as written; the only
changes are the README's placeholders (``/data/ops/…``, ``main.ops.…``, ``'<run id>'``,
``batch_id = 42``, ``pipeline = 'orders'``), replaced by this test's tables and values,
and the free names a reader's own code would define (``send``, ``rejected``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from tests.helpers import kafka_df, orders_config, report_run
from tests.support.readme import block


def test_the_quickstart_runs_the_demo_then_swaps_its_stages(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mlflow_store: str
) -> None:
    """Getting started's "Quickstart: a notebook": its ``init-demo`` in an empty folder (no ``conf/``
    of a checkout: issue 54, point 4), then its Python. The demo logs to ``sqlite:///mlflow.db`` in the
    working directory: ``mlflow_store``, this test's own."""
    monkeypatch.chdir(tmp_path)
    (init,) = block("quickstart-demo").commands()
    assert main([*init[1:], "--records", "300", "--poison-rate", "0.1"]) == 0
    capsys.readouterr()

    namespace: dict[str, Any] = {}
    exec(block("quickstart").body, namespace)  # the README's own code
    shown = capsys.readouterr().out
    summary = namespace["summary"]
    assert summary.records_in == 300 and 0 < summary.records_quarantined < 300
    assert ("pipeline orders_demo" in shown and f"quarantined {summary.records_quarantined:>15,}" in shown.replace(
        "  ", " "
    )) or str(summary.records_quarantined) in shown
    assert "|offset|" in shown.replace(" ", "") and "parse_order" not in shown.split("|offset|")[0][-1:]
    parse_failures = namespace["staged"].where("parse_order.error IS NOT NULL").count()
    assert parse_failures > 0 and shown.count("\n|") >= min(parse_failures, 20) + 1  # header + shown rows

    exec(block("quickstart-stages").body, namespace)
    pipe = namespace["pipe"]
    assert [s.name for s in pipe.stages] == ["decode", "parse_order"]
    staged = pipe.transform(namespace["read_source"](pipe.spark, pipe.config.source))
    assert staged.where("parse_order.result.order_id IS NOT NULL").count() > 0


@pytest.fixture
def ops(spark: Any, table_dir: Path) -> Iterator[dict[str, Any]]:
    """``report_run``'s tables (two runs, a breach, a replay, a discard) as ``spark_catalog.<db>.*``."""
    report_run(spark, table_dir)
    db = f"qt_ops_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE spark_catalog.{db}")
    for name, path in (("quarantine", "quarantine"), ("quarantine_metrics", "metrics")):
        spark.sql(f"CREATE TABLE spark_catalog.{db}.{name} USING delta LOCATION '{table_dir / path}'")
    run_1, run_2 = (r[0] for r in spark.sql(
        f"SELECT run_id FROM spark_catalog.{db}.quarantine_metrics GROUP BY run_id ORDER BY min(recorded_at)"
    ).collect())
    try:
        yield {"db": db, "run_1": run_1, "run_2": run_2, "dir": table_dir}
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS spark_catalog.{db} CASCADE")


def _runnable(key: str, ops: dict[str, Any]) -> list[str]:
    return [
        sql.replace("delta.`/data/ops/quarantine_metrics`", f"delta.`{ops['dir'] / 'metrics'}`")
        .replace("main.ops.", f"spark_catalog.{ops['db']}.")
        .replace("'<run id>'", f"'{ops['run_1' if key == 'metrics-sql' else 'run_2']}'")
        .replace("batch_id = 42", "batch_id = 0")
        .replace("pipeline = 'orders'", "pipeline = 'report_test'")
        for sql in block(key).statements()
    ]


def test_the_metrics_tables_sql_runs_and_agrees_with_the_runs(spark: Any, ops: dict[str, Any]) -> None:
    """``report_run`` logs two runs to the metrics table (its replay and discard run without
    listeners): run 1 reads the 9 records and quarantines 7; run 2 reads the 7 not in the
    target, quarantines them again and breaches ``errors.tolerance.limit: 1``."""
    results = [spark.sql(s).collect() for s in _runnable("metrics-sql", ops)]
    totals, rate, where, by_batch, last_error, breaches = results
    total = {r["metric"]: r["value"] for r in totals}
    assert "last-error-timestamp" not in total
    assert (total["records-in"], total["records-ok"], total["records-quarantined"]) == (16, 2, 14)
    assert total["tolerance-breaches"] == 1
    assert [(r["pipeline"], r["error_rate"]) for r in rate] == [("report_test", 14 / 16)]
    assert {(r["stage"], r["topic"], r["quarantined"]) for r in where} == {
        ("parse", "orders", 10), ("decode", "orders", 4)
    }
    assert [(r["batch_id"], r["records_in"], r["quarantined"], r["retries"]) for r in by_batch] == [(0, 9, 7, 0)]
    assert [r["pipeline"] for r in last_error] == ["report_test"] and last_error[0]["last_error"] is not None
    assert [(r["run_id"], r["batch_id"], r["breaches"]) for r in breaches] == [(ops["run_2"], 0, 1)]


def test_the_reporter_block_and_the_sql_over_its_records_run(spark: Any, ops: dict[str, Any]) -> None:
    """The README's reporter code, then the SQL over quarantine rows by run, day, kind and history."""
    raw = parse_config(orders_config(ops["dir"], "report_test"))  # report_run's pipeline and tables
    sent: list[bytes] = []

    def send(row: Any) -> None:  # a sink that refuses values starting with "bad"
        if bytes(row["value"]).startswith(b"bad"):
            raise ConnectionError(f"refused offset {row['offset']}")
        sent.append(bytes(row["value"]))

    rejected = kafka_df(spark, [b"jdbc-1"], topic="sink-topic", start_offset=500).withColumn(
        "error_message", F.lit("duplicate key")
    )
    namespace: dict[str, Any] = {
        "pipeline": Pipeline.from_config(raw, spark, listeners=[]), "send": send, "batch_id": 7, "rejected": rejected,
    }
    exec(block("reporter").body, namespace)  # the README's own code; its vectorised part runs at once
    namespace["write_batch"](kafka_df(spark, [b"ok-0", b"bad-1", b"ok-2"], topic="sink-topic", start_offset=600), 8)
    assert sent == [b"ok-0", b"ok-2"]

    behind, per_day, sink, failed_more = (spark.sql(s).collect() for s in _runnable("metrics-records-sql", ops))
    # run 2 quarantined 7 (5 at parse); the rows a later run failed again carry that run's id
    # now (README), which leaves the 2 the replay closed
    assert [(r["stage"], r["records"]) for r in behind] == [("parse", 2)]
    assert {(r["topic"], r["open_records"]) for r in per_day} == {("orders", 3), ("sink-topic", 2)}
    assert {(r["stage"], r["error_class"], r["records"]) for r in sink} == {
        ("sink", "ConnectionError", 1), ("jdbc", "SinkError", 1)
    }
    # run 1, run 2 and the replay: 5 records failed 3 times, the 2 fractional amounts twice
    assert sorted(r["failures"] for r in failed_more) == [2, 2, 3, 3, 3, 3, 3]
