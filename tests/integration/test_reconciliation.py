"""Reconciliation: every source record of every generation in exactly one place (issue 34).

One pipeline lives through what real teams do to it: a fix replayed, the topic
recreated (the source overwritten), a new generation appended, the target deleted
and rebuilt, the quarantine table deleted, a second pipeline pointed at the same
target, a replay racing a run. After each step the tables are read back: every
record (coordinates and content) of every generation written so far is in the
target or open/discarded in quarantine, exactly once, or the step was refused
before it wrote anything.
"""

from __future__ import annotations

import datetime as dt
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.config import parse_config
from quarantine.errors import TablesDisagreeError
from quarantine.identity import fingerprint
from quarantine.ops.rebuild import rebuild_target
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from tests.helpers import kafka_rows, orders_config


def _generation(tag: str, start: int, n: int, later: dt.timedelta) -> list[tuple[Any, ...]]:
    """Offsets ``start``..: every 5th invalid UTF-8, every 5th+2 a fractional amount, every 5th+4 no order_id."""
    values = []
    for i in range(start, start + n):
        if i % 5 == 3:
            values.append(b"\xff" + tag.encode())
        elif i % 5 == 4:
            values.append(b'{"amount":1,"tag":"%s-%d"}' % (tag.encode(), i))
        else:
            amount = b"2.5" if i % 5 == 2 else b"1"
            values.append(b'{"order_id":"%s-%d","amount":%s}' % (tag.encode(), i, amount))
    return [(*r[:5], r[5] + later, *r[6:]) for r in kafka_rows(values, start_offset=start)]


def _conf(d: Path, amount: str, required: bool = True, name: str = "recon") -> dict[str, Any]:
    conf = orders_config(d, pipeline=name)
    conf["stages"][1]["options"] = {"schema": f"order_id STRING, amount {amount}",
                                    **({"required": ["order_id"]} if required else {})}
    return conf


def _pipe(spark: Any, conf: dict[str, Any]) -> Pipeline:
    return Pipeline.from_config(parse_config(conf), spark, listeners=[])


def _assert_every_record_in_one_place(
    spark: Any, d: Path, generations: list[list[tuple[Any, ...]]], *, complete: bool = True
) -> None:
    """Each record of ``generations`` in the target or open/discarded in quarantine, exactly once;
    with ``complete``, the tables hold no other record either."""
    records = spark.createDataFrame([r for g in generations for r in g], KAFKA_SOURCE_SCHEMA).select(
        "offset", fingerprint().alias("fp"))
    target = spark.read.format("delta").load(str(d / "target")).select(
        F.col("_source_offset").alias("offset"), F.col("_source_fingerprint").alias("fp"), F.lit("target").alias("at"))
    quarantine = spark.read.format("delta").load(str(d / "quarantine")).where("status != 'replayed'").select(
        "offset", F.col("fingerprint").alias("fp"), F.concat(F.lit("quarantine "), "status").alias("at"))
    places = target.unionByName(quarantine)
    found = records.join(places, ["offset", "fp"], "left").groupBy("offset", "fp").agg(
        F.count("at").alias("n"), F.collect_list("at").alias("at"))
    wrong = found.where("n != 1").collect()
    assert not wrong, f"records not in exactly one place: {[r.asDict() for r in wrong]}"
    if complete:
        assert places.count() == records.count(), "a table holds a record no generation has"


def test_every_record_of_every_generation_is_in_one_place_or_was_refused_before_any_write(
    spark: Any, table_dir: Path
) -> None:
    source = str(table_dir / "source")
    gen1 = _generation("g1", 0, 10, dt.timedelta(0))
    spark.createDataFrame(gen1, KAFKA_SOURCE_SCHEMA).write.format("delta").save(source)
    _pipe(spark, _conf(table_dir, "INT")).run()  # 4 to the target; 2, 7 (fractional), 3, 8, 4, 9 open
    assert replay(_pipe(spark, _conf(table_dir, "DOUBLE"))).replayed == 2  # the fix for 2 and 7
    _assert_every_record_in_one_place(spark, table_dir, [gen1])

    # the target is deleted: a run is refused before any write; rebuild-target loses nothing
    shutil.rmtree(table_dir / "target")
    with pytest.raises(TablesDisagreeError):
        _pipe(spark, _conf(table_dir, "DOUBLE")).run()
    assert not (table_dir / "target").exists()
    assert rebuild_target(_pipe(spark, _conf(table_dir, "DOUBLE"))).reopened == 2
    _assert_every_record_in_one_place(spark, table_dir, [gen1])

    # the topic is recreated: offsets 0.. again, other bytes (the source overwritten)
    gen2 = _generation("g2", 0, 10, dt.timedelta(days=1))
    spark.createDataFrame(gen2, KAFKA_SOURCE_SCHEMA).write.format("delta").mode("overwrite").save(source)
    reused = _pipe(spark, _conf(table_dir, "DOUBLE")).run()
    assert reused.quarantined_by_stage() == {"source": 10}
    _assert_every_record_in_one_place(spark, table_dir, [gen1, gen2])

    # a third generation appended at new offsets
    gen3 = _generation("g3", 10, 10, dt.timedelta(days=2))
    spark.createDataFrame(gen3, KAFKA_SOURCE_SCHEMA).write.format("delta").mode("append").save(source)
    _pipe(spark, _conf(table_dir, "DOUBLE")).run()
    _assert_every_record_in_one_place(spark, table_dir, [gen1, gen2, gen3])

    # a second pipeline on the same topic and target: refused before any write
    with pytest.raises(TablesDisagreeError, match="pipeline other would write topic orders"):
        _pipe(spark, _conf(table_dir, "DOUBLE", name="other")).run()

    # a replay racing a run, both with the fix (order_id no longer required): g1's 4 and 9
    # (only in quarantine now) and g3's 14 and 19 (also in the source) pass
    fixed = _conf(table_dir, "DOUBLE", required=False)
    with ThreadPoolExecutor(2) as pool:
        racing = [pool.submit(lambda: replay(_pipe(spark, fixed))), pool.submit(lambda: _pipe(spark, fixed).run())]
        results = [f.result() for f in racing]
    wrote = results[0].report.records_ok + results[1].records_ok  # type: ignore[union-attr]
    said = [(r.report.records_in, r.report.records_ok, r.report.already_in_target) for r in results[:1]] + [
        (results[1].records_in, results[1].records_ok, results[1].already_in_target)]  # type: ignore[union-attr]
    assert wrote == 4, f"the two commits together inserted each fixed record once, and said so: {said}"
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 16
    _assert_every_record_in_one_place(spark, table_dir, [gen1, gen2, gen3])

    # the quarantine table is deleted: a new one is started, nothing is duplicated; g1's records
    # that were only in it (3 and 8) are gone with it, as the operator chose
    shutil.rmtree(table_dir / "quarantine")
    _pipe(spark, fixed).run()
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == 16
    _assert_every_record_in_one_place(spark, table_dir, [gen2, gen3], complete=False)
