"""A record's identity is its coordinates and its content (issue 34, defect 1).

A recreated topic, or a Kafka-shaped Delta source rewritten, starts its offsets
again at 0 with other bytes. Such a record is a new record: it is never dropped,
never merged into the earlier record's row, and by default quarantined with its own
row (``CoordinatesReused``). Each test is named for the guarantee it backs (README
"Guarantees"), on real Spark and Delta tables.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.errors import CoordinatesReusedError
from quarantine.pipeline import Pipeline
from quarantine.replay import replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from tests.helpers import kafka_rows, orders_config

LEGACY = Path(__file__).resolve().parent.parent / "data" / "legacy_tables"


def _generation(tag: str, n: int = 10, later: dt.timedelta = dt.timedelta(0)) -> list[tuple[Any, ...]]:
    """``n`` records at offsets 0..n-1: offset 3 and 8 are invalid UTF-8, the others pass.

    Their timestamps are :func:`kafka_rows`' plus ``later``: a recreated topic's records are
    newer, but the identity must not rely on it (the default gives every generation the same).
    """
    values = [b"\xff" + tag.encode() if i % 5 == 3 else b'{"order_id":"%s-%d","amount":1}' % (tag.encode(), i)
              for i in range(n)]
    return [(*r[:5], r[5] + later, *r[6:]) for r in kafka_rows(values)]


def _write_source(spark: Any, d: Path, rows: list[tuple[Any, ...]], mode: str) -> None:
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").mode(mode).save(str(d / "source"))


def _pipe(spark: Any, d: Path, **errors: Any) -> Pipeline:
    return Pipeline.from_config(parse_config(orders_config(d, pipeline="identity", **errors)), spark, listeners=[])


def _target(spark: Any, d: Path) -> list[Any]:
    return spark.read.format("delta").load(str(d / "target")).collect()


def _quarantine(spark: Any, d: Path) -> list[Any]:
    return spark.read.format("delta").load(str(d / "quarantine")).collect()


def _versions(spark: Any, d: Path) -> tuple[int, int]:
    from delta.tables import DeltaTable

    return tuple(  # type: ignore[return-value]
        DeltaTable.forPath(spark, str(d / t)).history(1).collect()[0]["version"] for t in ("target", "quarantine")
    )


def _every_record_in_one_place(spark: Any, d: Path, generations: list[list[tuple[Any, ...]]]) -> None:
    """Each source record (coordinates and value) of every generation in exactly one table, once
    (a ``replayed`` quarantine row is the history of a record now in the target)."""
    target = {(r["_source_offset"], r["order_id"]) for r in _target(spark, d)}
    assert len(target) == len(_target(spark, d)), "a record is in the target twice"
    quarantined = [(r["offset"], bytes(r["value"])) for r in _quarantine(spark, d) if r["status"] != "replayed"]
    assert len(set(quarantined)) == len(quarantined), "a record has two quarantine rows"
    for rows in generations:
        for r in rows:
            offset, value = r[4], bytes(r[1])
            in_target = value.startswith(b"{") and (offset, value.split(b'"')[3].decode()) in target
            in_quarantine = (offset, value) in set(quarantined)
            assert in_target != in_quarantine, f"offset {offset} value {value!r}: target {in_target}, " \
                                               f"quarantine {in_quarantine}"


def test_a_rewritten_source_whose_offsets_start_again_loses_no_record(spark: Any, table_dir: Path) -> None:
    old, new = _generation("old"), _generation("new")
    _write_source(spark, table_dir, old, "append")
    first = _pipe(spark, table_dir).run()
    assert (first.records_ok, first.records_quarantined) == (8, 2)
    before = {r["offset"]: r.asDict() for r in _quarantine(spark, table_dir)}

    _write_source(spark, table_dir, new, "overwrite")  # the topic was recreated: offsets 0..9 again
    second = _pipe(spark, table_dir).run()
    assert (second.records_in, second.records_quarantined) == (10, 10)
    assert second.quarantined_by_stage() == {"source": 10}
    rows = _quarantine(spark, table_dir)
    reused = [r for r in rows if r["error_class"] == "CoordinatesReused"]
    assert len(reused) == 10 and len(rows) == 12
    assert all(bytes(r["value"]).startswith((b"{\"order_id\":\"new", b"\xffnew")) for r in reused)
    # the message names where the earlier record is
    by_offset = {r["offset"]: r["message"] for r in reused}
    assert "target table" in by_offset[0] and str(table_dir / "target") in by_offset[0]
    assert "quarantine table" in by_offset[3] and "open" in by_offset[3]
    # an old row's bytes, error and status are changed only by its own record
    for r in rows:
        if r["error_class"] != "CoordinatesReused":
            old_row = before[r["offset"]]
            assert (r["value"], r["error_class"], r["status"], r["error_count"]) == (
                old_row["value"], old_row["error_class"], old_row["status"], old_row["error_count"])
    _every_record_in_one_place(spark, table_dir, [old, new])

    again = _pipe(spark, table_dir).run()  # a re-run adds nothing and moves nothing
    assert again.records_ok == 0
    assert len(_quarantine(spark, table_dir)) == 12 and len(_target(spark, table_dir)) == 8


def test_a_new_generation_appended_to_the_source_loses_no_record(spark: Any, table_dir: Path) -> None:
    old, new = _generation("old"), _generation("new")
    _write_source(spark, table_dir, old, "append")
    _pipe(spark, table_dir).run()
    _write_source(spark, table_dir, new, "append")  # both generations in the source now
    second = _pipe(spark, table_dir).run()
    assert second.records_quarantined == 12  # the 10 new records, and the 2 old ones still open ran again
    rows = _quarantine(spark, table_dir)
    assert {r["error_class"] for r in rows if bytes(r["value"]).find(b"new") >= 0} == {"CoordinatesReused"}
    assert {r["error_class"] for r in rows if bytes(r["value"]).find(b"old") >= 0} == {"InvalidUtf8"}
    assert not any("first of them in byte order" in r["message"] for r in rows)
    _every_record_in_one_place(spark, table_dir, [old, new])


def test_reused_coordinates_can_be_processed_as_new_records_when_the_config_says_so(
    spark: Any, table_dir: Path
) -> None:
    old, new = _generation("old"), _generation("new")
    _write_source(spark, table_dir, old, "append")
    _pipe(spark, table_dir, **{"coordinates.reused": "process"}).run()
    _write_source(spark, table_dir, new, "overwrite")
    second = _pipe(spark, table_dir, **{"coordinates.reused": "process"}).run()
    assert (second.records_ok, second.records_quarantined) == (8, 2)
    assert len(_target(spark, table_dir)) == 16
    rows = _quarantine(spark, table_dir)
    assert len(rows) == 4 and {r["error_class"] for r in rows} == {"InvalidUtf8"}
    _every_record_in_one_place(spark, table_dir, [old, new])


def test_reused_coordinates_fail_the_run_before_any_write_when_the_config_says_so(
    spark: Any, table_dir: Path
) -> None:
    _write_source(spark, table_dir, _generation("old"), "append")
    _pipe(spark, table_dir, **{"coordinates.reused": "fail"}).run()
    versions = _versions(spark, table_dir)
    _write_source(spark, table_dir, _generation("new"), "overwrite")
    with pytest.raises(CoordinatesReusedError, match=r"errors\.coordinates\.reused.*topic=orders partition=0"):
        _pipe(spark, table_dir, **{"coordinates.reused": "fail"}).run()
    assert _versions(spark, table_dir) == versions


def test_a_replay_does_not_move_a_reused_record_into_the_target_unless_the_config_says_process(
    spark: Any, table_dir: Path
) -> None:
    _write_source(spark, table_dir, _generation("old"), "append")
    _pipe(spark, table_dir).run()
    _write_source(spark, table_dir, _generation("new"), "overwrite")
    _pipe(spark, table_dir).run()
    kept = replay(_pipe(spark, table_dir), "error_class = 'CoordinatesReused'")
    assert kept.replayed == 0 and len(_target(spark, table_dir)) == 8
    taken = replay(_pipe(spark, table_dir, **{"coordinates.reused": "process"}),
                   "error_class = 'CoordinatesReused'")
    assert taken.replayed == 8 and len(_target(spark, table_dir)) == 16
    _every_record_in_one_place(spark, table_dir, [_generation("old"), _generation("new")])


def test_tables_written_before_the_fingerprint_compare_their_records_by_bytes_or_timestamp(
    spark: Any, table_dir: Path
) -> None:
    """Tables of fe4a579 (tests/data/legacy_tables/README.md): a quarantine row's fingerprint is
    computed from its raw bytes; a target row without one is compared by its coordinates and
    ``_source_timestamp``."""
    for t in ("source", "target", "quarantine"):
        shutil.copytree(LEGACY / t, table_dir / t)
    conf = parse_config(orders_config(table_dir, pipeline="legacy"))
    same = Pipeline.from_config(conf, spark, listeners=[]).run()  # the same source again
    assert (same.records_ok, same.records_quarantined) == (0, 3)  # only the open records run again
    assert len(_target(spark, table_dir)) == 6 and len(_quarantine(spark, table_dir)) == 4
    # a new generation at the same offsets, produced a day later
    _write_source(spark, table_dir, _generation("new", later=dt.timedelta(days=1)), "overwrite")
    new = Pipeline.from_config(conf, spark, listeners=[]).run()
    rows = _quarantine(spark, table_dir)
    assert {r["offset"] for r in rows if r["error_class"] == "CoordinatesReused"} == set(range(10))
    assert new.records_quarantined == 10 and len(rows) == 14
    assert len(_target(spark, table_dir)) == 6
    assert "fingerprint" in spark.read.format("delta").load(str(table_dir / "quarantine")).columns
