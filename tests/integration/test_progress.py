"""A long batch says it is alive: progress lines while it runs (issue 13, item 6)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.progress import Progress, spark_progress


def _slow(spark: Any, seconds: float) -> None:
    """A real Spark job of 4 tasks that takes about ``seconds``."""

    nap = F.udf(lambda x: (time.sleep(seconds / 2), x)[1], "long")
    spark.range(4).repartition(4).select(nap("id").alias("id")).agg(F.sum("id")).collect()


def test_lines_come_while_the_work_runs_and_carry_spark_task_counts(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quarantine.progress")
    with Progress(spark, "slow job", every_s=0.5):
        _slow(spark, 4.0)
    lines = [r.getMessage() for r in caplog.records if r.name == "quarantine.progress"]
    assert len(lines) >= 3, lines
    assert all(ln.startswith("slow job: ") and " s so far" in ln for ln in lines)
    assert any("; Spark: " in ln and " tasks (stage" in ln for ln in lines), lines
    caplog.clear()
    time.sleep(1.2)  # the block ended: no more lines
    assert not [r for r in caplog.records if r.name == "quarantine.progress"]


def test_short_work_logs_nothing_and_no_job_means_no_spark_part(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quarantine.progress")
    with Progress(spark, "quick", every_s=30):
        spark.range(3).collect()
    assert not [r for r in caplog.records if r.name == "quarantine.progress"]
    assert spark_progress(spark) == ""


def test_a_batch_run_logs_progress(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import quarantine.runners.batch as batch
    from quarantine.config import parse_config
    from quarantine.pipeline import Pipeline
    from tests.helpers import kafka_df, orders_config

    kafka_df(spark, [b'{"order_id": "a", "amount": 1}', b"not json"]).write.format("delta").save(
        str(tmp_path / "source")
    )
    monkeypatch.setattr(batch, "PROGRESS_EVERY_S", 0.2)
    caplog.set_level(logging.INFO, logger="quarantine.progress")
    config = parse_config(orders_config(tmp_path, "orders_progress"))
    summary = Pipeline.from_config(config, spark, listeners=[]).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 1)
    lines = [r.getMessage() for r in caplog.records if r.name == "quarantine.progress"]
    assert lines and all(ln.startswith("batch run of orders_progress: ") for ln in lines), lines
