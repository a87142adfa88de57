"""The errant record reporter (KIP-610): custom sinks report failed records to quarantine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.batch.run import Run
from quarantine.config import parse_config
from quarantine.errors import SourceError, ToleranceExceededError
from quarantine.metrics.cells import MetricNames
from quarantine.pipeline import Pipeline
from quarantine.redaction import REDACTED
from quarantine.runners.errant import ErrantRecordReporter
from tests.helpers import kafka_df

SECRET = "s3cr3t-Passw0rd"


class SinkDownError(ConnectionError):
    """What a JDBC driver or an HTTP client might raise."""


def _run(spark: Any, d: Path, tolerance: str = "all", **errors: Any) -> Run:
    """A run (id ``run-1``) of a one-stage pipeline whose sink reports errant records."""
    raw = {
        "pipeline": "reporter_test",
        "source": {"format": "delta", "path": str(d / "source"), "options": {"password": SECRET}},
        "target": {"table": str(d / "target"), "checkpoint": str(d / "checkpoint")},
        "errors": {"tolerance": tolerance, "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }
    return Pipeline.from_config(parse_config(raw), spark, listeners=[]).start_run("run-1")


def _send(row: Any) -> None:
    """A sink that rejects values starting with 'bad' and leaks its credentials in the message."""
    if bytes(row["value"]).startswith(b"bad"):
        raise SinkDownError(f"INSERT failed for {row['offset']}: login bob/{SECRET} refused")


def _quarantine(spark: Any, d: Path) -> Any:
    return spark.read.format("delta").load(str(d / "quarantine"))


def test_reported_records_are_durable_before_the_streaming_batch_completes(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir)
    values = [b"ok-0", b"bad-1", b"ok-2", b"bad-3"]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    seen_before_commit: list[int] = []

    def write_batch(df: Any, batch_id: int) -> None:
        with ErrantRecordReporter(run, batch_id) as report:
            for row in df.collect():
                try:
                    _send(row)
                except Exception as e:
                    report(row, e)
            assert report.pending == 2  # buffered, not yet durable
        # the with block is over, foreachBatch has not returned: the offsets are not committed yet
        seen_before_commit.append(_quarantine(spark, table_dir).count())

    stream = spark.readStream.format("delta").load(str(table_dir / "source"))
    query = (
        stream.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(table_dir / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    assert seen_before_commit == [2]
    rows = {r["offset"]: r for r in _quarantine(spark, table_dir).collect()}
    assert sorted(rows) == [1, 3]
    r = rows[1]
    assert (r["kind"], r["stage"], r["error_class"]) == ("sink", "sink", "SinkDownError")
    assert r["value"] == b"bad-1" and r["key"] == b"k1"  # the raw bytes, as read
    assert (r["run_id"], r["batch_id"], r["status"]) == ("run-1", 0, "open")
    assert SECRET not in r["message"] and REDACTED in r["message"]
    assert run.metrics.value(MetricNames.DEADLETTERQUEUE_PRODUCE_REQUESTS) == 2


def test_a_crash_after_reporting_still_leaves_the_reported_records_durable(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir)
    rows = kafka_df(spark, [b"bad-0", b"ok-1"]).collect()
    with pytest.raises(RuntimeError, match="connection pool closed"), ErrantRecordReporter(run, 7) as report:
        report(rows[0], SinkDownError("rejected"))
        raise RuntimeError("connection pool closed")
    q = _quarantine(spark, table_dir).collect()
    assert [(r["offset"], r["batch_id"], r["error_class"]) for r in q] == [(0, 7, "SinkDownError")]


def test_with_tolerance_none_report_raises_after_the_record_is_quarantined(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir, tolerance="none")
    rows = kafka_df(spark, [b"ok-0", b"bad-1", b"bad-2"]).collect()
    sent: list[int] = []

    with pytest.raises(ToleranceExceededError) as info, ErrantRecordReporter(run, 3) as report:
        for row in rows:
            try:
                _send(row)
                sent.append(row["offset"])
            except Exception as e:
                report(row, e)

    assert sent == [0]  # fail fast: the sink stopped at the first bad record
    assert info.value.limit == "errors.tolerance" and info.value.count == 1
    assert isinstance(info.value.__cause__, SinkDownError)
    q = _quarantine(spark, table_dir).collect()
    assert [(r["offset"], r["kind"]) for r in q] == [(1, "sink")]


def test_an_explicit_continue_handler_for_sink_errors_tolerates_them_under_tolerance_none(
    spark: Any, table_dir: Path
) -> None:
    run = _run(spark, table_dir, tolerance="none", **{"handler.sink": "continue"})
    rows = kafka_df(spark, [b"bad-0", b"bad-1"]).collect()
    with ErrantRecordReporter(run, 0, stage="jdbc") as report:
        for row in rows:
            report(row, SinkDownError("duplicate key"))
    assert report.reported == 2
    assert {(r["stage"], r["kind"]) for r in _quarantine(spark, table_dir).collect()} == {("jdbc", "sink")}


def test_report_failed_quarantines_a_vectorised_sinks_rejects_from_target_rows(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir)
    rejected = spark.createDataFrame(
        [
            ("a", 1.5, "orders", 0, 10, "ORA-00001: unique constraint violated"),
            ("b", 2.0, "orders", 0, 11, f"timeout; password={SECRET}"),
        ],
        "order_id STRING, amount DOUBLE, _source_topic STRING, _source_partition INT, "
        "_source_offset BIGINT, error_message STRING",
    ).withColumn("_source_timestamp", F.current_timestamp())

    with ErrantRecordReporter(run, 5, stage="jdbc") as report:
        assert report.report_failed(rejected) == 2
        assert report.pending == 0  # durable on return
    with ErrantRecordReporter(run, 5, stage="jdbc") as again:  # the batch replayed after a crash
        again.report_failed(rejected)

    rows = {r["offset"]: r for r in _quarantine(spark, table_dir).collect()}
    assert sorted(rows) == [10, 11]
    assert json.loads(rows[10]["value"]) == {"order_id": "a", "amount": 1.5}
    assert (rows[10]["stage"], rows[10]["kind"], rows[10]["error_class"]) == ("jdbc", "sink", "SinkError")
    assert SECRET not in rows[11]["message"] and REDACTED in rows[11]["message"]
    assert all(len(r["error_history"]) == 1 for r in rows.values())  # the replay changed nothing

    with pytest.raises(SourceError, match="_source_offset"), ErrantRecordReporter(run, 6) as bad:
        bad.report({"order_id": "c"}, SinkDownError("x"))


def test_a_record_reported_twice_keeps_both_failures_and_counts_as_kafka_connect_does(
    spark: Any, table_dir: Path
) -> None:
    run = _run(spark, table_dir)
    row = kafka_df(spark, [b"bad-1"]).first()
    with ErrantRecordReporter(run, batch_id=0) as report:
        report(row, SinkDownError("first try: timeout"))
        report(row, SinkDownError("second try: refused"), attempts=2)
        metrics = report.metrics()
    (q,) = _quarantine(spark, table_dir).collect()
    assert [h["message"] for h in q["error_history"]] == ["first try: timeout", "second try: refused"]
    assert q["message"] == "second try: refused" and q["error_count"] == 2
    assert metrics.total(MetricNames.TOTAL_RECORD_FAILURES) == 2
    assert metrics.total(MetricNames.TOTAL_RECORD_ERRORS) == 2
    assert metrics.total(MetricNames.LAST_ERROR_TIMESTAMP) > 0


def test_a_dataframe_reporting_one_record_twice_keeps_both_failures(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir)
    rejected = kafka_df(spark, [b"bad-1"]).unionByName(kafka_df(spark, [b"bad-1"])).withColumn(
        "error_message", F.when(F.monotonically_increasing_id() >= 0, F.lit("rejected")),
    )
    rejected = rejected.withColumn("error_message", F.concat(F.lit("rejected "), F.rand(seed=1).cast("string")))
    with ErrantRecordReporter(run, batch_id=0) as report:
        assert report.report_failed(rejected) == 2
    (q,) = _quarantine(spark, table_dir).collect()
    assert q["error_count"] == 2 and len(q["error_history"]) == 2


def test_an_exception_without_a_message_is_reported_as_no_message_not_none(spark: Any, table_dir: Path) -> None:
    run = _run(spark, table_dir)
    with ErrantRecordReporter(run, batch_id=0) as report:
        report(kafka_df(spark, [b"bad"]).first(), SinkDownError(None))
    (q,) = _quarantine(spark, table_dir).collect()
    assert q["message"] == "SinkDownError raised with no message"
