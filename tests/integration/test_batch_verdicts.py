"""A stage that judges the whole batch, known to the runner by the protocol alone (quarantine.batch.verdict).

The expectation stage is one such stage; this one is not GX at all: it passes every
record and judges the batch by its size. The runner must act on its verdicts as it
does on GX's (warn: report and go on; fail: quarantine written, target not, the run
fails; quarantine_batch: every record to quarantine with its raw bytes), count its
checks into the report, and never judge a replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quarantine.batch.settle import prepare
from quarantine.columns import CHECK_INPUT_PREFIX, ErrorKind
from quarantine.config import BreachAction, parse_config
from quarantine.errorhandling.breach import Breach
from quarantine.errors import ExpectationBreachError
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.stage import JudgingStage, StageContext, outcome
from quarantine.stages import build_stages
from tests.helpers import kafka_df, orders_config

GOOD = [b'{"order_id":"a","amount":1.5}', b'{"order_id":"b","amount":2}', b'{"order_id":"c","amount":-1}']
POISON = [b"\xff\xfe"]


@dataclass(frozen=True, repr=False)
class AtLeastRows(JudgingStage):
    """Fails a record whose amount is negative (check ``amount_positive``); judges the batch
    too small when fewer than ``rows`` records reached it."""

    name: str = "size"
    rows: int = 10
    action: BreachAction = BreachAction.WARN
    input: str | None = None
    kind: ErrorKind = field(default=ErrorKind.EXPECTATION)
    passes_through: bool = False
    judged_batches: list[int] = field(default_factory=list)
    judged_rows: list[int] = field(default_factory=list)

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        return outcome(value, value.getField("amount") < 0, self.error("amount_positive", "amount < 0"))

    def judge(self, inputs: DataFrame, batch_id: int) -> tuple[Breach, ...] | None:
        self.judged_batches.append(batch_id)
        n = inputs.count()
        self.judged_rows.append(n)
        assert inputs.columns == ["input"]
        if n >= self.rows:
            return ()
        message = f"{n} record(s) reached {self.name}, fewer than {self.rows}"
        return (Breach(f"min_rows:{self.rows}", self.action, message),)

    def may_quarantine_batch(self) -> bool:
        return self.action is BreachAction.QUARANTINE_BATCH

    def result_is_input(self) -> bool:
        return self.passes_through

    def check_counts(self, error: Column) -> list[Column]:
        return [F.count(F.when(error.getField("stage") == self.name, 1)).alias(f"check:{self.name}:amount_positive")]

    def notes(self) -> tuple[str, ...]:
        return ("min_rows (judged on the batch only)",)


def _pipe(spark: Any, d: Path, stage: AtLeastRows) -> Pipeline:
    kafka_df(spark, GOOD + POISON).write.format("delta").mode("overwrite").save(str(d / "source"))
    config = parse_config(orders_config(d, pipeline="verdicts"))
    return Pipeline.from_config(config, spark, listeners=[], stages=[*build_stages(config.stages), stage])


def _tables(spark: Any, d: Path) -> tuple[list[int], dict[int, tuple[Any, ...]]]:
    target = sorted(r[0] for r in spark.read.format("delta").load(str(d / "target")).select("_source_offset").collect())
    q = spark.read.format("delta").load(str(d / "quarantine"))
    rows = {r["offset"]: (r["stage"], r["error_class"], r["value"]) for r in q.collect()}
    return target, rows


def test_a_warn_verdict_is_reported_and_the_batch_goes_on(spark: Any, table_dir: Path) -> None:
    stage = AtLeastRows(rows=10, action=BreachAction.WARN)
    report = _pipe(spark, table_dir, stage).run().batches[0]
    assert [b.name for b in report.breaches] == ["min_rows:10"]
    assert report.untranslated_expectations == ("min_rows (judged on the batch only)",)
    assert report.quarantined_by_expectation == {"amount_positive": 1}
    assert report.metrics["tolerance-breaches"] == 1
    # the judging stage's cell, not the batch's: an expectation's breach, not an error limit's
    assert report.metrics[f"tolerance-breaches/stage/{stage.name}"] == 1
    assert "tolerance-breaches/stage" not in "".join(k for k in report.metrics if stage.name not in k)
    target, q = _tables(spark, table_dir)
    assert target == [0, 1]
    assert {o: v[:2] for o, v in q.items()} == {2: ("size", "amount_positive"), 3: ("decode", q[3][1])}
    assert stage.judged_batches == [0]


def test_a_fail_verdict_writes_quarantine_and_not_the_target(spark: Any, table_dir: Path) -> None:
    pipe = _pipe(spark, table_dir, AtLeastRows(rows=10, action=BreachAction.FAIL))
    with pytest.raises(ExpectationBreachError, match=r"on_breach=fail.*fewer than 10") as info:
        pipe.run()
    assert [b.name for b in info.value.breaches] == ["min_rows:10"]
    target_exists = (table_dir / "target" / "_delta_log").exists()
    assert not target_exists or _tables(spark, table_dir)[0] == []
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert sorted(r[0] for r in q.select("offset").collect()) == [2, 3]


def test_a_quarantine_batch_verdict_sends_every_record_with_its_raw_bytes(spark: Any, table_dir: Path) -> None:
    report = _pipe(spark, table_dir, AtLeastRows(rows=10, action=BreachAction.QUARANTINE_BATCH)).run().batches[0]
    assert (report.records_in, report.records_ok, report.records_quarantined) == (4, 0, 4)
    target, q = _tables(spark, table_dir)
    assert target == []
    values = GOOD + POISON
    assert {o: v[2] for o, v in q.items()} == {i: bytearray(v) for i, v in enumerate(values)}
    # records that reached the stage carry its batch error; the others keep their own
    assert q[0][:2] == q[1][:2] == ("size", "min_rows")
    assert q[2][:2] == ("size", "amount_positive") and q[3][0] == "decode"


def test_a_batch_large_enough_passes_and_a_replay_is_never_judged(spark: Any, table_dir: Path) -> None:
    stage = AtLeastRows(rows=2, action=BreachAction.FAIL)
    pipe = _pipe(spark, table_dir, stage)
    report = pipe.run().batches[0]
    assert report.breaches == () and report.records_ok == 2
    # the replay's selection (one record reaches the stage: fewer than 2) would breach; it is not judged
    replay(pipe, where="stage = 'size'")
    assert stage.judged_batches == [0]
    q = spark.read.format("delta").load(str(table_dir / "quarantine")).where("offset = 2").first()
    assert q is not None and (q["status"], q["stage"]) == ("open", "size")


@pytest.mark.parametrize("passes_through", [False, True])
def test_a_last_stage_whose_result_is_its_input_carries_it_only_where_it_failed(
    spark: Any, table_dir: Path, passes_through: bool
) -> None:
    stage = AtLeastRows(rows=10, passes_through=passes_through)
    pipe = _pipe(spark, table_dir, stage)
    split = pipe.split_frame(prepare(pipe, spark.read.format("delta").load(str(table_dir / "source"))))
    carried = {r["offset"]: r[0] for r in split.select(f"{CHECK_INPUT_PREFIX}size", "offset").collect()}
    # a and b pass, c fails at the stage, the poison fails upstream (never reaches it)
    assert {o for o, v in carried.items() if v is not None} == ({2} if passes_through else {0, 1, 2})
    report = pipe.run().batches[0]
    # the stage judges the same three records either way: the passing ones are read from the result
    assert stage.judged_rows == [3]
    assert [b.message for b in report.breaches] == ["3 record(s) reached size, fewer than 10"]
