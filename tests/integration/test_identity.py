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
import yaml

from quarantine.batch.settle import prepare
from quarantine.config import parse_config
from quarantine.errors import CoordinatesReusedError
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
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


def _properties(spark: Any, table: Path) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{table}`").collect()}


def _quarantine_version(spark: Any, d: Path) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, str(d / "quarantine")).history(1).collect()[0]["version"])


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
    assert "warning: 10 record(s) have coordinates that other content holds" in second.render()
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
    # the 10 new records; the 2 old ones open since stay as they are (nothing deciding their outcome changed)
    assert second.records_quarantined == 10
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


# ------------------------------------------------------------------ a rebuilt target (defect 2)


def _amounts_config(d: Path, amount: str) -> dict[str, Any]:
    conf = orders_config(d, pipeline="rebuild")
    conf["stages"][1]["options"]["schema"] = f"order_id STRING, amount {amount}"
    return conf


def _amounts_source(spark: Any, d: Path) -> None:
    """10 records: offsets 2 and 7 have a fractional amount (fail ``amount INT``), offset 3 is not UTF-8."""
    values = [b"\xff" if i == 3 else b'{"order_id":"o-%d","amount":%s}' % (i, b"2.5" if i in (2, 7) else b"1")
              for i in range(10)]
    _write_source(spark, d, kafka_rows(values), "append")


def _settled_target(spark: Any, d: Path) -> None:
    """Run with ``amount INT`` (7 to the target, 3 open), then replay with DOUBLE (2 replayed): target 9."""
    _amounts_source(spark, d)
    Pipeline.from_config(parse_config(_amounts_config(d, "INT")), spark, listeners=[]).run()
    replayed = replay(Pipeline.from_config(parse_config(_amounts_config(d, "DOUBLE")), spark, listeners=[]))
    assert replayed.replayed == 2 and len(_target(spark, d)) == 9


def test_a_run_into_a_deleted_target_is_refused_before_any_write_and_rebuild_target_loses_nothing(
    spark: Any, table_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from quarantine.cli import main
    from quarantine.errors import TablesDisagreeError

    _settled_target(spark, table_dir)
    shutil.rmtree(table_dir / "target")
    fixed = Pipeline.from_config(parse_config(_amounts_config(table_dir, "DOUBLE")), spark, listeners=[])
    q_version = _quarantine_version(spark, table_dir)
    with pytest.raises(TablesDisagreeError, match=r"says 2 record\(s\) of pipeline rebuild were replayed into it"):
        fixed.run()
    assert not (table_dir / "target").exists() and _quarantine_version(spark, table_dir) == q_version
    with pytest.raises(TablesDisagreeError, match="rebuild-target"):
        replay(fixed)

    conf = table_dir / "rebuild.yml"
    conf.write_text(yaml.safe_dump(_amounts_config(table_dir, "DOUBLE")))
    assert main(["rebuild-target", "--conf", str(conf), "--dry-run"]) == 0
    assert "2 replayed record(s) would be reopened" in capsys.readouterr().out
    assert not (table_dir / "target").exists() and _quarantine_version(spark, table_dir) == q_version

    assert main(["rebuild-target", "--conf", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "2 replayed record(s) reopened" in out
    target = sorted(r["_source_offset"] for r in _target(spark, table_dir))
    assert target == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # every good record once, the 2 replayed ones included
    statuses = sorted((r["offset"], r["status"]) for r in _quarantine(spark, table_dir))
    assert statuses == [(2, "replayed"), (3, "open"), (7, "replayed")]
    again = fixed.run()
    assert again.records_ok == 0 and len(_target(spark, table_dir)) == 9


def test_a_dry_run_of_rebuild_target_while_the_target_exists_says_what_would_happen_and_exits_0(
    spark: Any, table_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dry run answers the question "what would a rebuild do": here, refuse until the target is
    moved away, then reopen and write the 2 replayed records. Nothing is written either way; the
    rebuild itself still refuses (exit 1) with the same words."""
    from quarantine.cli import main

    _settled_target(spark, table_dir)
    conf = table_dir / "rebuild.yml"
    conf.write_text(yaml.safe_dump(_amounts_config(table_dir, "DOUBLE")))
    q_version = _quarantine_version(spark, table_dir)
    t_version = spark.sql(f"DESCRIBE HISTORY delta.`{table_dir / 'target'}`").count()

    assert main(["rebuild-target", "--conf", str(conf), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rebuild-target --dry-run (nothing written): ")
    assert f"the target {table_dir / 'target'} exists" in out and "move or delete it first" in out
    assert "2 replayed record(s) would be reopened" in out
    assert main(["rebuild-target", "--conf", str(conf)]) == 1
    assert f"the target {table_dir / 'target'} exists" in capsys.readouterr().err
    assert _quarantine_version(spark, table_dir) == q_version
    assert spark.sql(f"DESCRIBE HISTORY delta.`{table_dir / 'target'}`").count() == t_version


@pytest.mark.parametrize("how", ["deleted and written again", "create or replace"])
def test_a_target_rebuilt_by_other_means_is_refused_before_any_write(spark: Any, table_dir: Path, how: str) -> None:
    """A target rebuilt from the source alone by a plain Spark job exists, but lacks the 2
    records replayed into the old one: the next run says so and writes nothing."""
    from quarantine.errors import TablesDisagreeError

    _settled_target(spark, table_dir)
    t = str(table_dir / "target")
    kept = spark.createDataFrame(
        [r for r in _target(spark, table_dir) if r["_source_offset"] not in (2, 7)],
        spark.read.format("delta").load(t).schema,
    ).localCheckpoint()
    if how == "create or replace":
        kept.createOrReplaceTempView("kept_rows")
        spark.sql(f"CREATE OR REPLACE TABLE delta.`{t}` USING delta AS SELECT * FROM kept_rows")
    else:
        shutil.rmtree(t)
        kept.write.format("delta").save(t)
    fixed = Pipeline.from_config(parse_config(_amounts_config(table_dir, "DOUBLE")), spark, listeners=[])
    q_version = _quarantine_version(spark, table_dir)
    t_version = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").count()
    with pytest.raises(TablesDisagreeError, match=r"does not hold 2 record\(s\) .* replayed into it.*rebuild-target"):
        fixed.run()
    with pytest.raises(TablesDisagreeError, match="rebuild-target"):
        replay(fixed)
    assert _quarantine_version(spark, table_dir) == q_version
    assert spark.sql(f"DESCRIBE HISTORY delta.`{t}`").count() == t_version


def test_a_target_written_before_writers_were_recorded_is_claimed_on_first_use(spark: Any, table_dir: Path) -> None:
    """A target without the writer properties that holds every replayed record is the pipeline's
    own (a table written by an older version): the run goes on and records the writer."""
    from quarantine.sinks.ownership import owners

    _settled_target(spark, table_dir)
    t = str(table_dir / "target")
    keys = [r[0] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{t}`").collect() if r[0].startswith("quarantine.")]
    spark.sql(f"ALTER TABLE delta.`{t}` UNSET TBLPROPERTIES ({', '.join(repr(k) for k in keys)})")
    summary = Pipeline.from_config(parse_config(_amounts_config(table_dir, "DOUBLE")), spark, listeners=[]).run()
    assert summary.records_ok == 0 and len(_target(spark, table_dir)) == 9
    assert owners(spark, t).writes("rebuild")


def test_a_deleted_quarantine_table_starts_a_new_one_says_so_and_duplicates_nothing(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from quarantine.runners.replay import discard

    _settled_target(spark, table_dir)
    fixed = Pipeline.from_config(parse_config(_amounts_config(table_dir, "DOUBLE")), spark, listeners=[])
    discard(fixed, "offset = 3", reason="test")
    shutil.rmtree(table_dir / "quarantine")
    with caplog.at_level("WARNING", logger="quarantine"):
        summary = fixed.run()
    assert "starting a new one for the target" in caplog.text and str(table_dir / "target") in caplog.text
    assert (summary.records_in, summary.records_ok, summary.records_quarantined) == (1, 0, 1)  # offset 3 reopens
    assert len(_target(spark, table_dir)) == 9
    assert [(r["offset"], r["status"]) for r in _quarantine(spark, table_dir)] == [(3, "open")]


# ------------------------------------------------------------------ two pipelines, one target (defect 3)


def _two(d: Path, name: str, source: str, amount: str, **target: Any) -> dict[str, Any]:
    conf = _amounts_config(d, amount)
    conf["pipeline"] = name
    conf["source"]["path"] = str(d / source)
    conf["target"].update(target)
    return conf


def test_a_second_pipeline_writing_a_topic_another_pipeline_writes_into_one_target_is_refused(
    spark: Any, table_dir: Path
) -> None:
    from quarantine.errors import TablesDisagreeError

    _amounts_source(spark, table_dir)
    Pipeline.from_config(parse_config(_two(table_dir, "pa", "source", "INT")), spark, listeners=[]).run()
    owners_after_pa = _properties(spark, table_dir / "target")
    assert owners_after_pa["quarantine.writer.topic.orders"] == "pa"
    versions = _versions(spark, table_dir)
    pc = Pipeline.from_config(parse_config(_two(table_dir, "pc", "source", "DOUBLE")), spark, listeners=[])
    with pytest.raises(TablesDisagreeError, match=r"pipeline pc would write topic orders .* pipeline pa already"):
        pc.run()
    assert _versions(spark, table_dir) == versions  # refused before any write

    # another topic into the same target is another pipeline's to write
    spark.createDataFrame(kafka_rows([b'{"order_id":"p-1","amount":1}'], topic="payments"),
                          KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(table_dir / "payments"))
    pb = Pipeline.from_config(parse_config(_two(table_dir, "pb", "payments", "INT")), spark, listeners=[]).run()
    assert pb.records_ok == 1
    assert _properties(spark, table_dir / "target")["quarantine.writer.topic.payments"] == "pb"


def test_a_target_shared_on_purpose_holds_each_record_once_whichever_pipeline_delivers_it(
    spark: Any, table_dir: Path
) -> None:
    _amounts_source(spark, table_dir)
    pa = _two(table_dir, "pa", "source", "INT", shared=True)
    pc = _two(table_dir, "pc", "source", "DOUBLE", shared=True)
    Pipeline.from_config(parse_config(pa), spark, listeners=[]).run()
    second = Pipeline.from_config(parse_config(pc), spark, listeners=[]).run()
    assert (second.records_in, second.records_ok, second.records_quarantined) == (3, 2, 1)
    for conf in (pa, pc):  # re-runs of either add nothing to the target
        Pipeline.from_config(parse_config(conf), spark, listeners=[]).run()
    offsets = [r["_source_offset"] for r in _target(spark, table_dir)]
    assert sorted(offsets) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    # each pipeline keeps its own quarantine rows: pa's rows for the 2 records pc delivered stay open
    rows = sorted((r["pipeline"], r["offset"], r["status"]) for r in _quarantine(spark, table_dir))
    assert rows == [("pa", 2, "open"), ("pa", 3, "open"), ("pa", 7, "open"), ("pc", 3, "open")]


# ------------------------------------------------------------------ what a run says it wrote (defect 5)


def test_a_run_counts_only_what_its_own_commit_wrote_and_says_what_another_writer_had_settled(
    spark: Any, table_dir: Path
) -> None:
    from quarantine.sinks.target import merge_new_rows

    _amounts_source(spark, table_dir)
    Pipeline.from_config(parse_config(_amounts_config(table_dir, "INT")), spark, listeners=[]).run()  # 2, 3, 7 open
    fixed = Pipeline.from_config(parse_config(_amounts_config(table_dir, "DOUBLE")), spark, listeners=[])
    # another writer (a replay killed before it closed the row) has written offset 2's good row already
    prepared = fixed.split_frame(prepare(fixed, fixed.spark.read.format("delta").load(str(table_dir / "source"))))
    one = fixed.target_rows(prepared).where("_source_offset = 2")
    assert merge_new_rows(spark, one, str(table_dir / "target")) == 1
    summary = fixed.run()
    assert (summary.records_in, summary.records_ok, summary.already_in_target, summary.records_quarantined) == (
        3, 1, 1, 1)
    assert "already in target               1" in summary.render()
    assert sorted(r["_source_offset"] for r in _target(spark, table_dir)) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert sorted((r["offset"], r["status"]) for r in _quarantine(spark, table_dir)) == [
        (2, "replayed"), (3, "open"), (7, "replayed")]
