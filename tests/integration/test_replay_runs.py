"""Replay and discard, finished (issue 13, item 3): runs of their own kind, dry runs, ``--where`` checked first.

Every test fills its tables with a real pipeline run over a Kafka-shaped Delta source.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.dry_run import SHOWN_GROUPS
from quarantine.errors import ConfigError
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import check_predicate, preview_replay, replay
from quarantine.schema import METRICS_SCHEMA
from quarantine.tables import table_version
from tests.helpers import kafka_df, orders_config
from tests.support.crash import write_conf
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
SCHEMA = ("order_id STRING, customer_email STRING, amount DOUBLE, currency STRING, quantity INT, sku STRING, "
          "status STRING, created_at STRING")


def _order(i: int, amount: float) -> bytes:
    return json.dumps({
        "order_id": f"ord-{i:06d}", "customer_email": "a@example.com", "amount": amount, "currency": "EUR",
        "quantity": 1, "sku": "SKU-12345", "status": "paid", "created_at": "2026-01-01 00:00:00",
    }).encode()


def _expect_config(d: Path, max_amount: float, **extra: Any) -> dict[str, Any]:
    """The demo's stages (JSON, a range check, the orders GX suite with warn breaches) over ``d``."""
    return {
        "pipeline": "replay_runs",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json", "options": {"schema": SCHEMA}},
            {"name": "check_order", "type": "checks",
             "options": {"rules": [{"column": "amount", "check": "range", "min": 0, "max": max_amount}]}},
            {"name": "expect_order", "type": "expectation",
             "options": {"suite": str(REPO / "conf" / "expectations" / "orders.json"),
                         "on_breach": {"default": "warn"}, "validate_every": 1}},
        ],
        **extra,
    }


def test_a_replay_reports_no_expectation_breach_that_did_not_happen(spark: Any, table_dir: Path) -> None:
    """The suite's batch-level expectations (row count >= 1, mean amount <= 1000) are about source
    batches; a replay's selection is not one: 3 large orders replayed, passing or failing again,
    breach nothing."""
    values = [_order(i, 10.0 + i) for i in range(20)] + [_order(100 + i, 5000.0) for i in range(3)]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    first = Pipeline.from_config(parse_config(_expect_config(table_dir, 1000)), spark, listeners=[]).run()
    assert first.records_quarantined == 3 and not [b for x in first.batches for b in x.breaches]

    again = replay(Pipeline.from_config(parse_config(_expect_config(table_dir, 1000)), spark, listeners=[]))
    assert (again.selected, again.still_failing) == (3, 3)
    assert again.report.breaches == () and again.report.metrics.get("tolerance-breaches", 0.0) == 0.0

    fixed = replay(Pipeline.from_config(parse_config(_expect_config(table_dir, 100_000)), spark, listeners=[]))
    assert (fixed.selected, fixed.replayed) == (3, 3)
    assert fixed.report.breaches == () and fixed.report.metrics.get("tolerance-breaches", 0.0) == 0.0


# --------------------------------------------------------------------------- simple pipeline: decode + json

#: decode fails the first, json the second (no order_id, required), the third is good, the fourth is not JSON
VALUES = [b"\xff", b'{"amount": 1.5}', b'{"order_id": "o-1", "amount": 2.0}', b"{"]


def _fill(spark: Any, d: Path, **extra: Any) -> dict[str, Any]:
    """Run the orders pipeline once over VALUES (with the listeners ``extra`` configures); return its
    config (3 records open in quarantine)."""
    kafka_df(spark, VALUES).write.format("delta").save(str(d / "source"))
    cfg = {**orders_config(d), **extra}
    summary = Pipeline.from_config(parse_config(cfg), spark).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)
    return cfg


def _fixed(cfg: dict[str, Any]) -> dict[str, Any]:
    """The same pipeline with order_id no longer required: the record without one passes now."""
    stages = [dict(s) for s in cfg["stages"]]
    stages[1] = {**stages[1], "options": {"schema": "order_id STRING, amount DOUBLE"}}
    return {**cfg, "stages": stages}


def _versions(spark: Any, d: Path) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        table_version(spark, str(d / t)) for t in ("quarantine", "target")
    )


def test_a_where_naming_an_unknown_column_or_bad_sql_is_a_config_error_before_any_spark_job(
    spark: Any, table_dir: Path, capsys: Any
) -> None:
    conf = write_conf(_fill(spark, table_dir), table_dir / "p.yml")
    versions = _versions(spark, table_dir)
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup(None))
    with pytest.raises(ConfigError, match=r"--where.*stat_us"):
        check_predicate(spark, "stat_us = 'open'")
    with pytest.raises(ConfigError, match=r"--where.*(PARSE_SYNTAX_ERROR|syntax)"):
        check_predicate(spark, "stage = = 'decode'")
    with pytest.raises(ConfigError, match="--where"):
        check_predicate(spark, "offset + 1")  # not a condition
    check_predicate(spark, "stage = 'decode' AND first_seen_date >= '2026-01-01'")
    assert len(tracker.getJobIdsForGroup(None)) == jobs  # parsed and analysed only

    capsys.readouterr()
    assert main(["replay", "--conf", str(conf), "--where", "stat_us = 'open'"]) == 2
    err = capsys.readouterr().err
    assert "--where" in err and "stat_us" in err and len(err.strip().splitlines()) == 1
    assert main(["discard", "--conf", str(conf), "--where", "stage = = 1", "--reason", "x"]) == 2
    assert main(["replay", "--conf", str(conf), "--where", "stat_us = 'open'", "--dry-run"]) == 2
    assert _versions(spark, table_dir) == versions


def test_dry_runs_say_what_replay_and_discard_would_do_and_write_nothing(
    spark: Any, table_dir: Path, capsys: Any
) -> None:
    cfg = _fill(spark, table_dir)
    versions = _versions(spark, table_dir)
    fixed = Pipeline.from_config(parse_config(_fixed(cfg)), spark, listeners=[])

    preview = preview_replay(fixed)
    assert (preview.selected, preview.would_pass) == (3, 1)
    assert sorted((g.stage, g.records) for g in preview.groups) == [("decode", 1), ("parse", 1)]
    assert preview_replay(fixed, "stage = 'decode'").would_pass == 0

    conf = write_conf(_fixed(cfg), table_dir / "fixed.yml")
    capsys.readouterr()
    assert main(["replay", "--conf", str(conf), "--dry-run"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    # the selection by the failure each record was quarantined with, then the outcomes through the stages now
    assert out[0] == "replay --dry-run (nothing written): 3 open record(s) selected:"
    at = out.index("through the current stages: 1 would be replayed to the target, 2 would still fail:")
    assert sum(int(line.split()[0]) for line in out[1:at]) == 3
    assert len(out) == at + 3 and any("decode /" in line for line in out[at:])
    assert main(["discard", "--conf", str(conf), "--where", "stage = 'decode'", "--reason", "x", "--dry-run"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "discard --dry-run (nothing written): 1 open record(s) would be discarded:" and len(out) == 2
    assert out[1].split()[:3] == ["1", "decode", "/"]
    assert _versions(spark, table_dir) == versions  # neither table was written

    # the preview was right: the replay does what it said
    done = replay(fixed)
    assert (done.selected, done.replayed, done.still_failing) == (3, 1, 2)


def test_replay_and_discard_are_runs_in_the_metrics_table_and_in_mlflow(
    spark: Any, table_dir: Path, capsys: Any, caplog: Any, mlflow_store: str
) -> None:
    uri = mlflow_store
    metrics = str(table_dir / "metrics")
    cfg = _fill(spark, table_dir, metrics={"table": metrics},
                mlflow={"enabled": True, "tracking_uri": uri, "experiment": "replay-runs"})
    conf = write_conf(_fixed(cfg), table_dir / "fixed.yml")

    capsys.readouterr()
    caplog.clear()
    assert main(["replay", "--conf", str(conf)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "replay: 3 open record(s) selected, 1 replayed to the target, 2 still failing (still open)"
    assert len(out) == 2 and out[1].startswith("  run ")
    assert main(["discard", "--conf", str(conf), "--where", "stage = 'decode'", "--reason", "test producer"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["discarded 1 open record(s) (run_kind discard)"]
    # a few lines for one action, not hundreds (issue 13): what the CLI's logging lets through
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING or r.name.startswith("quarantine")]) <= 6

    table = spark.read.format("delta").load(metrics)
    # a metric's rows partition its total (README, "The metrics table"): a plain sum per kind
    totals = {(r["run_kind"], r["metric"]): r["value"]
              for r in table.groupBy("run_kind", "metric").agg(F.sum("value").alias("value")).collect()}
    assert totals[("run", "records-in")] == 4
    assert totals[("replay", "records-in")] == 3 and totals[("replay", "records-ok")] == 1
    assert totals[("replay", "records-quarantined")] == 2
    assert totals[("discard", "records-discarded")] == 1
    assert {r[0] for r in table.select("run_kind").distinct().collect()} == {"run", "replay", "discard"}

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("replay-runs")
    assert experiment is not None
    runs = {r.data.tags.get("quarantine.run_kind"): r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"run", "replay", "discard"}
    assert runs["replay"].data.tags["status"] == "succeeded" and runs["replay"].info.status == "FINISHED"
    assert runs["replay"].data.metrics["records_ok"] == 1.0
    assert runs["replay"].info.run_name.startswith("orders_test-replay-")
    assert runs["discard"].data.metrics["records-discarded"] == 1.0


def test_a_metrics_table_from_before_run_kind_gets_the_column_and_keeps_its_rows(
    spark: Any, table_dir: Path
) -> None:
    metrics = str(table_dir / "old_metrics")
    old = [f for f in METRICS_SCHEMA.fields if f.name != "run_kind"]
    spark.createDataFrame([("orders_test", "r0", 0, None, "records-in", None, None, 7.0)],
                          METRICS_SCHEMA.__class__(old)).write.format("delta").save(metrics)
    cfg = _fill(spark, table_dir)
    replay(Pipeline.from_config(parse_config({**_fixed(cfg), "metrics": {"table": metrics}}), spark))
    rows = (spark.read.format("delta").load(metrics).where("metric = 'records-in'")
            .groupBy("run_id", "run_kind").agg(F.sum("value").alias("value")))
    assert sorted((r["run_id"] == "r0", r["run_kind"], r["value"]) for r in rows.collect()) == [
        (False, "replay", 3.0), (True, None, 7.0)
    ]


# --------------------------------------------------------------------------- the README's commands


def test_the_readmes_replay_dry_run_and_maintain_commands_run(spark: Any, table_dir: Path, capsys: Any) -> None:
    """Every command of "Replay and discard", "Dry run" and "Quarantine table maintenance", on a
    pipeline of the demo's shape (``conf/orders_demo.yml`` becomes this test's config)."""
    commands = [c for key in ("replay-discard", "dry-run", "maintain") for c in block(key).commands()]
    assert len(commands) == sum(len(block(key).lines()) for key in ("replay-discard", "dry-run", "maintain"))
    assert [c[1] for c in commands] == ["replay", "discard", "replay", "discard", "maintain", "maintain"]
    values = [_order(1, 5.0), b"\xff", b'{"order_id": "ord-000002", "amount": "x"}', _order(3, 50_000.0)]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    raw = _expect_config(table_dir, 1000)
    conf = str(write_conf(raw, table_dir / "orders_demo.yml"))
    assert Pipeline.from_config(parse_config(raw), spark, listeners=[]).run().records_quarantined == 3
    for argv in commands:
        argv = argv[1:]
        argv = [conf if a == "conf/orders_demo.yml" else a for a in argv]
        assert main(argv) == 0, argv
        # a replay's dry run: its selection, then its outcomes, each a head and at most SHOWN_GROUPS + 1 lines
        most = 2 * (SHOWN_GROUPS + 2) if argv[0] == "replay" and "--dry-run" in argv else 4
        assert 1 <= len(capsys.readouterr().out.strip().splitlines()) <= most, argv
    statuses = {r[0] for r in spark.read.format("delta").load(str(table_dir / "quarantine")).select("status").collect()}
    assert "discarded" in statuses and "open" in statuses
