"""Every record in exactly one table, on the data people really have.

Duplicate and NULL coordinates, re-runs after a stage changed, discarded rows,
replay racing another writer, bounded history, and SQL-safe pipeline names.
Each test is named for the guarantee it backs (README "Guarantees").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.errors import TableWriteError, ToleranceExceededError
from quarantine.listeners.events import BatchReport, RunInfo, RunStatus
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard, replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sinks.quarantine import HISTORY_FIRST, HISTORY_LATEST, merge_quarantine, quarantine_rows
from tests.helpers import kafka_df, kafka_rows


def _config(d: Path, schema: str = "id STRING", name: str = "integrity", **errors: Any) -> dict[str, Any]:
    return {
        "pipeline": name,
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": schema, "required": ["id"]}},
        ],
    }


def _pipe(spark: Any, d: Path, schema: str = "id STRING", **errors: Any) -> Pipeline:
    return Pipeline.from_config(parse_config(_config(d, schema, **errors)), spark, listeners=[])


def _source(spark: Any, d: Path, rows: list[tuple[Any, ...]]) -> None:
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").mode("append").save(str(d / "source"))


def _tables(spark: Any, d: Path) -> tuple[list[Any], list[Any]]:
    t = spark.read.format("delta").load(str(d / "target")).collect()
    q = spark.read.format("delta").load(str(d / "quarantine")).collect() if (d / "quarantine").exists() else []
    return t, q


def _assert_disjoint_and_complete(target: list[Any], quarantine: list[Any], expected: set[tuple[Any, ...]]) -> None:
    """Each expected coordinate in exactly one table, once (NULL-safe tuples)."""
    t = [(r["_source_topic"], r["_source_partition"], r["_source_offset"]) for r in target]
    q = [(r["topic"], r["partition"], r["offset"]) for r in quarantine]
    assert len(t) == len(set(t)), f"duplicate target rows: {t}"
    assert len(q) == len(set(q)), f"duplicate quarantine rows: {q}"
    assert not set(t) & set(q), f"in both tables: {set(t) & set(q)}"
    assert set(t) | set(q) == expected


# ------------------------------------------------------------------ duplicates (point 2)


def test_same_coordinates_and_same_bytes_are_one_record_and_reruns_still_succeed(
    spark: Any, table_dir: Path
) -> None:
    good = kafka_rows([b'{"id":"a"}', b'{"id":"b"}'])
    bad = kafka_rows([b"\xff"], start_offset=2)
    # a twice-loaded file: every row, good and bad, is in the source twice
    _source(spark, table_dir, good + bad + good + bad)
    first = _pipe(spark, table_dir).run()
    assert (first.records_in, first.records_ok, first.records_quarantined) == (3, 2, 1)
    second = _pipe(spark, table_dir).run(full=True)  # failed "for good" with multiple source rows matched
    assert second.records_quarantined == 1
    target, quarantine = _tables(spark, table_dir)
    _assert_disjoint_and_complete(target, quarantine, {("orders", 0, 0), ("orders", 0, 1), ("orders", 0, 2)})


def test_same_coordinates_with_different_bytes_are_quarantined_as_a_conflict(spark: Any, table_dir: Path) -> None:
    one = kafka_rows([b'{"id":"a"}', b'{"id":"b"}'])
    other = kafka_rows([b'{"id":"A"}'])  # offset 0 again, other bytes
    _source(spark, table_dir, one + other)
    summary = _pipe(spark, table_dir).run()
    # two records share offset 0: neither is dropped, each is quarantined with its own row
    assert (summary.records_in, summary.records_ok, summary.records_quarantined) == (3, 1, 2)
    target, quarantine = _tables(spark, table_dir)
    assert [(r["_source_offset"]) for r in target] == [1]
    assert sorted((r["offset"], r["stage"], r["error_class"], bytes(r["value"])) for r in quarantine) == [
        (0, "source", "ConflictingDuplicate", b'{"id":"A"}'), (0, "source", "ConflictingDuplicate", b'{"id":"a"}'),
    ]
    assert all("2 records with different key/value/headers/timestamp" in r["message"] for r in quarantine)
    assert len({r["fingerprint"] for r in quarantine}) == 2
    _pipe(spark, table_dir).run()  # and a re-run neither fails nor adds anything
    target2, quarantine2 = _tables(spark, table_dir)
    assert (len(target2), len(quarantine2)) == (1, 2)


# ------------------------------------------------------------------ NULL coordinates (point 3)


def test_records_without_partition_or_offset_get_a_stable_key_and_reruns_add_nothing(
    spark: Any, table_dir: Path
) -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [
        (b"k1", b'{"id":"a"}', "orders", None, None, t0, 0, None),
        (b"k2", b'{"id":"b"}', "orders", 0, None, t0, 0, None),
        (b"k3", b"\xff", None, None, None, t0, 0, None),
        (b"k4", b'{"id":"d"}', "orders", 0, 7, t0, 0, None),
    ]
    _source(spark, table_dir, rows)
    first = _pipe(spark, table_dir).run()
    assert (first.records_ok, first.records_quarantined) == (3, 1)
    for _ in range(2):
        _pipe(spark, table_dir).run()
    target, quarantine = _tables(spark, table_dir)
    assert len(target) == 3 and len(quarantine) == 1
    synthetic = [r["_source_offset"] for r in target if r["_source_offset"] != 7]
    assert len(synthetic) == 2 and all(o < 0 for o in synthetic)
    assert quarantine[0]["offset"] < 0 and quarantine[0]["topic"] is None


# ------------------------------------------------------------------ disjoint tables (point 4)


def test_a_rerun_with_a_stricter_stage_does_not_quarantine_records_already_in_the_target(
    spark: Any, table_dir: Path
) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1","n":1}', b'{"id":"2","n":2.5}']))
    _pipe(spark, table_dir, "id STRING").run()
    stricter = _pipe(spark, table_dir, "id STRING, n INT").run()  # 2.5 now fails
    assert stricter.records_quarantined == 0
    target, quarantine = _tables(spark, table_dir)
    _assert_disjoint_and_complete(target, quarantine, {("orders", 0, 0), ("orders", 0, 1)})


def test_a_discarded_record_stays_discarded_when_the_batch_reruns(spark: Any, table_dir: Path) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1"}', b"\xff"]))
    pipe = _pipe(spark, table_dir)
    pipe.run()
    assert discard(pipe, "offset = 1", "test producer garbage") == 1
    _pipe(spark, table_dir).run()
    _, quarantine = _tables(spark, table_dir)
    (row,) = quarantine
    assert row["status"] == "discarded" and row["resolution"] == "discarded: test producer garbage"
    assert len(row["error_history"]) == 1


def test_a_rerun_that_now_passes_an_open_record_moves_it_to_the_target_and_closes_it(
    spark: Any, table_dir: Path
) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1","n":1}', b'{"id":"2","n":2.5}']))
    _pipe(spark, table_dir, "id STRING, n INT").run()
    summary = _pipe(spark, table_dir, "id STRING, n DOUBLE").run()
    target, quarantine = _tables(spark, table_dir)
    assert len(target) == 2
    (row,) = quarantine
    assert row["status"] == "replayed" and f"run {summary.run.run_id}" in row["resolution"]


def test_a_discarded_record_that_would_now_pass_is_not_written_to_the_target(spark: Any, table_dir: Path) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1","n":1}', b'{"id":"2","n":2.5}']))
    pipe = _pipe(spark, table_dir, "id STRING, n INT")
    pipe.run()
    discard(pipe, "offset = 1", "not wanted")
    _pipe(spark, table_dir, "id STRING, n DOUBLE").run()
    target, quarantine = _tables(spark, table_dir)
    assert [r["_source_offset"] for r in target] == [0]
    assert quarantine[0]["status"] == "discarded"


# ------------------------------------------------------------------ history (point 5)


def test_error_history_keeps_the_first_and_latest_entries_and_counts_them_all(spark: Any, table_dir: Path) -> None:
    def failed(message: str) -> Any:
        return kafka_df(spark, [b"\xff"]).withColumn(
            "_q_error",
            F.struct(
                F.lit("decode").alias("stage"), F.lit("deserialize").alias("kind"), F.lit("E").alias("error_class"),
                F.lit(message).alias("message"), F.lit(None).cast("string").alias("stacktrace"),
                F.lit(False).alias("retriable"), F.lit(1).alias("attempts"),
            ),
        )

    name = str(table_dir / "quarantine")
    runs = HISTORY_FIRST + HISTORY_LATEST + 5
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i in range(runs):  # each failure another message: each an entry
        rows = quarantine_rows(
            failed(f"bad {i}"), pipeline="p", run_id=f"run{i}", batch_id=0, now=t0 + dt.timedelta(hours=i)
        )
        merge_quarantine(spark, name, rows, pipeline="p")
    (row,) = spark.read.format("delta").load(name).collect()
    history = [h["run_id"] for h in row["error_history"]]
    expected = [f"run{i}" for i in range(HISTORY_FIRST)] + [f"run{i}" for i in range(runs - HISTORY_LATEST, runs)]
    assert history == expected
    assert row["error_count"] == runs


# ------------------------------------------------------------------ replay (points 1, 6)


class _Listener:
    """A RunListener that does nothing; tests override ``on_batch``."""

    def on_run_start(self, run: RunInfo) -> None: ...

    def on_run_end(self, run: RunInfo, status: RunStatus, error: BaseException | None) -> None: ...

    def on_batch(self, report: BatchReport) -> None: ...


class _Interloper(_Listener):
    """A listener that, right after replay's batch, lets another run of the pipeline write (once)."""

    def __init__(self, other: Pipeline) -> None:
        self.other = other
        self.ran = False

    def on_batch(self, report: BatchReport) -> None:
        if not self.ran:
            self.ran = True
            self.other.run()


def test_replay_marks_replayed_only_the_records_that_passed_even_when_another_writer_interleaves(
    spark: Any, table_dir: Path
) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1","n":1.5}', b"\xff"]))
    _pipe(spark, table_dir, "id STRING, n INT").run()
    fixed = _pipe(spark, table_dir, "id STRING, n DOUBLE")
    # the pipeline re-runs (new run id) between replay's write and its status update
    fixed = replace(fixed, listeners=[_Interloper(_pipe(spark, table_dir, "id STRING, n INT"))])
    result = replay(fixed)
    assert (result.replayed, result.still_failing) == (1, 1)
    target, quarantine = _tables(spark, table_dir)
    by_offset = {r["offset"]: r for r in quarantine}
    assert by_offset[1]["status"] == "open", "still failing, yet marked replayed"
    assert by_offset[0]["status"] == "replayed"
    _assert_disjoint_and_complete(target, [by_offset[1]], {("orders", 0, 0), ("orders", 0, 1)})


def test_replay_under_a_fail_handler_leaves_still_failing_records_open(spark: Any, table_dir: Path) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1","n":1.5}', b"\xff"]))
    _pipe(spark, table_dir, "id STRING, n INT").run()
    strict = _pipe(spark, table_dir, "id STRING, n DOUBLE", **{"handler.deserialize": "fail", "tolerance": "none"})
    result = replay(strict)
    assert (result.replayed, result.still_failing) == (1, 1)
    _, quarantine = _tables(spark, table_dir)
    by_offset = {r["offset"]: r for r in quarantine}
    # failed the same way again: counted, no second entry
    assert by_offset[1]["status"] == "open" and len(by_offset[1]["error_history"]) == 1
    assert by_offset[1]["error_count"] == 2


# ------------------------------------------------------------------ SQL-safe names (point 15)


def test_a_pipeline_name_with_quotes_and_backslashes_is_a_literal_not_sql(spark: Any, table_dir: Path) -> None:
    _source(spark, table_dir, kafka_rows([b"\xff"]))
    plain = _pipe(spark, table_dir)
    plain.run()
    odd_name = "x\\' OR true OR '\\"
    # a name the loader refuses, set past validation (model_copy), as a caller's code could
    odd = replace(plain, config=plain.config.model_copy(update={"pipeline": odd_name}))
    odd.run()
    odd.run()  # a re-run matches its own row by the literal name
    _, quarantine = _tables(spark, table_dir)
    assert sorted(r["pipeline"] for r in quarantine) == sorted(["integrity", odd_name])
    plain_row = next(r for r in quarantine if r["pipeline"] == "integrity")
    assert len(plain_row["error_history"]) == 1, "the other pipeline's MERGE touched this row"


# ------------------------------------------------------------------ metrics before failing (point 16)


class _Collect(_Listener):
    def __init__(self) -> None:
        self.batches: list[BatchReport] = []

    def on_batch(self, report: BatchReport) -> None:
        self.batches.append(report)


def test_a_batch_that_breaches_tolerance_publishes_its_metrics_before_failing(spark: Any, table_dir: Path) -> None:
    _source(spark, table_dir, kafka_rows([b'{"id":"1"}', b"\xff"]))
    collect = _Collect()
    pipe = replace(_pipe(spark, table_dir, tolerance="none"), listeners=[collect])
    with pytest.raises(ToleranceExceededError):
        pipe.run()
    (report,) = collect.batches
    assert (report.records_in, report.records_quarantined) == (2, 1)
    assert report.metrics["total-record-errors"] == 1
    assert report.metrics["tolerance-breaches"] == 1
    assert not (table_dir / "target").exists()


# ------------------------------------------------------------------ clear write errors (point 11)


def test_a_target_write_that_delta_rejects_names_the_table_the_batch_and_what_to_do(
    spark: Any, table_dir: Path
) -> None:
    # the table's owner added a CHECK constraint the new record breaks: Delta refuses the MERGE (a retyped
    # column no longer reaches Delta: it is refused before any write, tests/integration/test_target_schema.py)
    _source(spark, table_dir, kafka_rows([b'{"id":1}']))
    _pipe(spark, table_dir, "id INT").run()
    spark.sql(f"ALTER TABLE delta.`{table_dir / 'target'}` ADD CONSTRAINT id_positive CHECK (id > 0)")
    _source(spark, table_dir, kafka_rows([b'{"id":-1}'], start_offset=1))
    with pytest.raises(TableWriteError) as info:
        _pipe(spark, table_dir, "id INT").run()
    text = str(info.value)
    assert str(table_dir / "target") in text and "batch 0" in text
    assert "id_positive" in text and "INTERNAL_ERROR" not in text
    assert "\n\tat " not in text and "py4j" not in text.lower()


def test_a_source_that_cannot_be_read_names_the_key_and_the_path_without_a_java_stack(
    spark: Any, table_dir: Path
) -> None:
    from quarantine.errors import SourceError

    with pytest.raises(SourceError) as info:
        _pipe(spark, table_dir).run()  # no source table was written
    text = str(info.value)
    assert "source.path" in text and str(table_dir / "source") in text
    assert "\n\tat " not in text and "py4j" not in text.lower()
