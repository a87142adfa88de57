"""MLflow outages never stop the data: a real ``mlflow server`` killed, paused and restarted mid-run.

The tracker is driven with synthetic batch reports (the listener contract is
the subject here); every ``on_batch`` must return within a bounded time while
the server is down or hanging, buffered points must reach the server after the
restart, and points beyond ``buffer_max`` must be counted as dropped and
reported as ``mlflow-dropped-points``.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from quarantine.config import BreachAction, MlflowConfig
from quarantine.errorhandling.breach import Breach
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.listeners.mlflow import MlflowTracker, mlflow_metrics
from tests.e2e.mlflow_fixtures import MlflowServer, mlflow_server

__all__ = ["mlflow_server"]

_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_RUN = RunInfo(
    pipeline="orders_demo",
    run_id="r" * 32,
    source="orders",
    config={
        "pipeline": "orders_demo",
        "source": {"format": "kafka", "topics": ["orders"], "options": {"kafka.sasl.jaas.config": "[redacted]"}},
        "errors": {"tolerance": "all"},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    },
    started_at=_T0,
)


def _report(batch_id: int, *, breach: bool = False) -> BatchReport:
    breaches = (
        Breach(
            name="expect_column_mean_to_be_between:amount",
            action=BreachAction.WARN,
            message="expect_column_mean_to_be_between(column=amount, min_value=1, max_value=10): found 250.1",
            details={"success": False, "result": {"observed_value": 250.1}},
        ),
    ) if breach else ()
    return BatchReport(
        run=_RUN,
        batch_id=batch_id,
        records_in=100 + batch_id,
        records_ok=90,
        records_quarantined=10 + batch_id,
        quarantined_by_stage={"check": 10 + batch_id},
        quarantined_by_expectation={"expect_column_values_to_be_between:amount": 3},
        metrics={"total-record-failures": float(10 + batch_id), "total-retries": 0.0},
        breaches=breaches,
        untranslated_expectations=("expect_column_mean_to_be_between:amount",),
        sample_messages=({"stage": "check", "error_class": "x", "message": "bad", "value": b"secret-bytes"},),
        finished_at=_T0 + dt.timedelta(seconds=batch_id),
    )


def _timed_batch(tracker: MlflowTracker, batch_id: int, **kw: bool) -> float:
    t = time.monotonic()
    tracker.on_batch(_report(batch_id, **kw))
    return time.monotonic() - t


def test_batches_flow_through_outage_and_buffered_metrics_arrive(mlflow_server: MlflowServer) -> None:
    per_batch = len(mlflow_metrics(_report(0)))
    cfg = MlflowConfig(
        enabled=True, tracking_uri=mlflow_server.url, experiment="outage-test",
        http_timeout_s=3, http_max_retries=0, buffer_max=4 * per_batch,
    )
    tracker = MlflowTracker(cfg, reconnect_interval_s=1.0)
    tracker.on_run_start(_RUN)
    assert tracker.available and tracker.mlflow_run_id is not None
    for b in range(2):
        _timed_batch(tracker, b, breach=(b == 1))
    assert tracker.buffered_points == 0

    # 1) the server hangs (SIGSTOP): each batch waits at most ~one HTTP timeout, then skips MLflow
    mlflow_server.pause()
    hung = [_timed_batch(tracker, b) for b in (2, 3)]
    assert not tracker.available
    assert hung[0] < cfg.http_timeout_s + 3.0, hung
    assert hung[1] < 1.0, hung  # within reconnect_interval_s: no MLflow call at all

    # 2) the server is killed: refused connections, batches keep flowing fast
    mlflow_server.kill()
    down = []
    for b in range(4, 8):
        time.sleep(1.1)  # past reconnect_interval_s, so every batch probes the dead server
        down.append(_timed_batch(tracker, b))
    assert max(down) < cfg.http_timeout_s + 3.0, down
    # 6 batches (2..7) buffered into room for 4: the oldest 2 batches' points dropped
    assert tracker.dropped_points == 2 * per_batch
    assert tracker.buffered_points == 4 * per_batch

    # 3) the server comes back: the next batch flushes everything buffered
    mlflow_server.start()
    time.sleep(1.1)
    _timed_batch(tracker, 8, breach=True)
    assert tracker.available and tracker.buffered_points == 0
    tracker.on_run_end(_RUN, RunStatus.SUCCEEDED, None)

    client = MlflowClient(tracking_uri=mlflow_server.url)
    run = client.get_run(tracker.mlflow_run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["status"] == "succeeded"
    assert run.data.tags["pipeline"] == "orders_demo"
    assert run.data.tags["source"] == "orders"
    assert run.data.params["errors.tolerance"] == "all"
    assert run.data.params["source.options.kafka.sasl.jaas.config"] == "[redacted]"
    steps = sorted(m.step for m in client.get_metric_history(run.info.run_id, "records_in"))
    assert steps == [0, 1, 4, 5, 6, 7, 8]  # 2 and 3 were the dropped (oldest) points
    values = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "records_quarantined")}
    assert values[6] == 16.0
    dropped = client.get_metric_history(run.info.run_id, "mlflow-dropped-points")
    assert [m.value for m in dropped] == [float(2 * per_batch)]
    per_expectation = "quarantined.expectation.expect_column_values_to_be_between.amount"
    assert [m.value for m in client.get_metric_history(run.info.run_id, per_expectation)][-1] == 3.0
    assert client.get_metric_history(run.info.run_id, "tolerance_breaches.warn")
    arts = {a.path for a in client.list_artifacts(run.info.run_id, "breaches/batch-000008")}
    assert arts == {"breaches/batch-000008/expect_column_mean_to_be_between.amount.json"}
    sample = client.download_artifacts(run.info.run_id, "samples/batch-000008.json")
    with open(sample, encoding="utf-8") as fh:
        text = fh.read()
    assert "secret-bytes" not in text and '"message": "bad"' in text


def test_run_end_while_down_counts_drops_and_returns(mlflow_server: MlflowServer) -> None:
    cfg = MlflowConfig(enabled=True, tracking_uri=mlflow_server.url, experiment="down-at-end", http_timeout_s=3)
    tracker = MlflowTracker(cfg, reconnect_interval_s=0.0)
    tracker.on_run_start(_RUN)
    mlflow_server.kill()
    tracker.on_batch(_report(0))
    t = time.monotonic()
    tracker.on_run_end(_RUN, RunStatus.FAILED, RuntimeError("password=hunter2 boom"))
    assert time.monotonic() - t < cfg.http_timeout_s + 3.0
    assert tracker.dropped_points == len(mlflow_metrics(_report(0)))
    assert tracker.buffered_points == 0


class _TimedListener:
    """Delegates to a listener and adds up the wall time spent in it."""

    def __init__(self, inner: MlflowTracker) -> None:
        self.inner = inner
        self.seconds = 0.0

    def _timed(self, method: str, *args: Any) -> None:
        t = time.monotonic()
        try:
            getattr(self.inner, method)(*args)
        finally:
            self.seconds += time.monotonic() - t

    def on_run_start(self, run: RunInfo) -> None:
        self._timed("on_run_start", run)

    def on_batch(self, report: BatchReport) -> None:
        self._timed("on_batch", report)

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None:
        self._timed("on_run_end", run, status, error)


def test_pipeline_run_with_mlflow_down_writes_its_data(
    mlflow_server: MlflowServer, spark: Any, tmp_path: Path
) -> None:
    from quarantine.config import parse_config
    from quarantine.pipeline import Pipeline
    from tests.helpers import kafka_df

    d = tmp_path / "tables"
    kafka_df(spark, [b'{"id": "1"}', b"{", b'{"id": "3"}']).write.format("delta").save(str(d / "source"))
    cfg = parse_config({
        "pipeline": "mlflow_outage",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [{"name": "decode", "type": "decode_utf8"},
                   {"name": "parse", "type": "json", "options": {"schema": "id STRING"}}],
        "mlflow": {"enabled": True, "tracking_uri": mlflow_server.url, "experiment": "pipeline-outage",
                   "http_timeout_s": 3, "buffer_max": 5},
    })
    mlflow_server.kill()
    tracker = MlflowTracker(cfg.mlflow, reconnect_interval_s=0.0)
    timing = _TimedListener(tracker)
    summary = Pipeline.from_config(cfg, spark, listeners=[timing]).run()
    assert (summary.batches[0].records_ok, summary.batches[0].records_quarantined) == (2, 1)
    assert spark.read.format("delta").load(str(d / "quarantine")).count() == 1
    # every metric point of the batch was buffered (5 kept, the rest dropped), then dropped at run end
    assert tracker.dropped_points == len(mlflow_metrics(summary.batches[0]))
    assert tracker.mlflow_run_id is None
    # the time MLflow cost the run (Spark's own time depends on the machine's load)
    assert timing.seconds < 3 * (cfg.mlflow.http_timeout_s + 2), timing.seconds

    # the server is back: the next run of the same pipeline is logged
    mlflow_server.start()
    tracker2 = MlflowTracker(cfg.mlflow)
    Pipeline.from_config(cfg, spark, listeners=[tracker2]).run(full=True)  # the whole source: its open record too
    run = MlflowClient(tracking_uri=mlflow_server.url).get_run(tracker2.mlflow_run_id)
    assert run.data.tags["status"] == "succeeded"
    assert run.data.metrics["records_quarantined"] == 1.0  # the same bad record, MERGEd again
