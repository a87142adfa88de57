"""OffsetWatermark: when a Kafka stream's failed rows may be appended instead of MERGEd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quarantine.sinks.offset_watermark import OffsetWatermark
from tests.helpers import kafka_df


def test_an_empty_or_missing_table_has_passed_at_once(spark: Any, table_dir: Path) -> None:
    assert OffsetWatermark.load(spark, str(table_dir / "none"), "p").passed


def test_a_topic_partition_is_passed_once_a_batch_reads_up_to_its_highest_offset(spark: Any) -> None:
    wm = OffsetWatermark({("t", 0): 10, ("t", 1): 5})
    cols = wm.observed()
    assert len(cols) == 2 and not wm.passed
    wm.advance({"_q_watermark:0": 10, "_q_watermark:1": 3})  # t-1 not reached yet
    assert wm.ahead == {("t", 1): 5}
    wm.observed()
    wm.advance({"_q_watermark:0": None})  # the batch read nothing of t-1
    assert wm.ahead == {("t", 1): 5}
    wm.observed()
    wm.advance({"_q_watermark:0": 6})
    assert wm.passed


def test_the_watermark_is_the_highest_offset_per_topic_partition_of_this_pipeline_only(
    spark: Any, table_dir: Path
) -> None:
    from quarantine.config import parse_config
    from quarantine.pipeline import Pipeline

    q = str(table_dir / "quarantine")
    for name, start, n in (("mine", 3, 5), ("other", 99, 1)):
        cfg = {
            "pipeline": name,
            "source": {"format": "delta", "path": str(table_dir / "src")},
            "target": {"table": str(table_dir / f"target_{name}")},
            "errors": {"tolerance": "all", "deadletterqueue.table.name": q},
            "stages": [{"name": "decode", "type": "decode_utf8"}],
        }
        df = kafka_df(spark, [b"\xff"] * n, topic="t", partition=1, start_offset=start)  # bad UTF-8
        Pipeline.from_config(parse_config(cfg), spark, listeners=[]).start_run().process_batch(df, 0)
    assert OffsetWatermark.load(spark, q, "mine").ahead == {("t", 1): 7}
