"""The runner's ways through a batch give the same tables and reports (quarantine.batch.run, quarantine.batch.writes).

A policy that may stop a batch counts it first (a noop pass builds the cache),
then writes; one that goes on whatever the counts (``errors.tolerance=all``, no
limits) writes the target while counting, with no extra pass (except in a stream
after a batch with failed records: counted first, its two commits are made at
once), and, when every stage is deterministic, without caching the batch (its
stages run again for the failed rows, checked against the first run). All must
split, count, close and report alike, on new records, re-runs and re-sent
micro-batches; a stage that claims determinism falsely fails the batch before
quarantine is written, and loses nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import quarantine.batch.writes as writes_module
from quarantine.batch.writes import BatchMode, BatchWriter
from quarantine.columns import ErrorKind
from quarantine.config import parse_config
from quarantine.errors import InconsistentBatchError
from quarantine.listeners.events import BatchReport
from quarantine.pipeline import Pipeline
from quarantine.stage import Stage, StageContext, outcome
from tests.helpers import kafka_df, orders_config

GOOD = [b'{"order_id":"a","amount":1.5}', b'{"order_id":"b","amount":2}']
POISON = [b"\xff\xfe", b'{"order_id":"c"', b'{"order_id":"d","amount":"x"}', b"", None]


def _pipeline(spark: Any, d: Path, stages: list[Stage] | None = None, **errors: Any) -> Pipeline:
    cfg = orders_config(d, pipeline="paths", **errors)
    return Pipeline.from_config(parse_config(cfg), spark, listeners=[], stages=stages)


def _append(spark: Any, d: Path, values: list[bytes | None], start: int = 0) -> None:
    kafka_df(spark, values, start_offset=start).write.format("delta").mode("append").save(str(d / "source"))


def _tables(spark: Any, d: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    target = spark.read.format("delta").load(str(d / "target"))
    q = spark.read.format("delta").load(str(d / "quarantine"))
    return (
        sorted(tuple(r) for r in target.select("_source_offset", "order_id", "amount").collect()),
        sorted(tuple(r) for r in q.select("offset", "stage", "error_class", "status", "value").collect()),
    )


def _figures(report: BatchReport) -> tuple[Any, ...]:
    metrics = {k: v for k, v in report.metrics.items() if "time" not in k and "last" not in k}
    return (report.records_in, report.records_ok, report.records_quarantined,
            report.quarantined_by_stage, report.quarantined_by_topic, metrics)


@pytest.fixture
def count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many noop counting passes ran (one entry per pass)."""
    calls: list[int] = []
    real = BatchWriter._count_pass

    def spy(self: BatchWriter, split: Any, observed: Any) -> Any:
        calls.append(1)
        return real(self, split, observed)

    monkeypatch.setattr(BatchWriter, "_count_pass", spy)
    return calls


def test_both_ways_split_count_and_report_a_stream_alike(
    spark: Any, tmp_path: Path, count_passes: list[int]
) -> None:
    reports: dict[str, list[BatchReport]] = {}
    tables = {}
    ways = {"write_then_count": {}, "count_then_write": {"tolerance.limit": "1000000000"}}
    for way, errors in ways.items():
        d = tmp_path / way
        _append(spark, d, [b"x"])  # the pipeline's source (not read: the batches are handed in)
        run = _pipeline(spark, d, **errors).start_run("query")
        before = len(count_passes)
        first = run.process_batch(kafka_df(spark, GOOD + POISON), 0, BatchMode.micro_batch())
        second = run.process_batch(
            kafka_df(spark, [b'{"order_id":"e","amount":5}', b"\xc3"], start_offset=7), 1, BatchMode.micro_batch()
        )
        reports[way] = [first, second]
        tables[way] = _tables(spark, d)
        # one counting pass per batch where the policy can stop the batch; where it cannot, none
        # for the first (written while counted) and one for the batch after a batch with failed
        # records (counted first, so its two commits are made at once)
        assert len(count_passes) - before == (1 if way == "write_then_count" else 2)
    assert [_figures(r) for r in reports["write_then_count"]] == [_figures(r) for r in reports["count_then_write"]]
    assert tables["write_then_count"] == tables["count_then_write"]
    target, quarantine = tables["write_then_count"]
    assert [t[0] for t in target] == [0, 1, 7]
    assert [q[0] for q in quarantine] == [2, 3, 4, 5, 6, 8]


def test_a_batch_run_and_its_re_run_split_and_report_the_same_whichever_way(
    spark: Any, tmp_path: Path, count_passes: list[int]
) -> None:
    reports: dict[str, list[BatchReport]] = {}
    tables = {}
    for way, errors in {"all": {}, "limited": {"tolerance.limit": "1000000000"}}.items():
        d = tmp_path / way
        _append(spark, d, GOOD + POISON)
        before = len(count_passes)
        first = _pipeline(spark, d, **errors).run().batches[0]
        # a run that creates the target under a policy that cannot stop it counts while it
        # appends (issue 36); a policy that may stop it counts first
        assert len(count_passes) - before == (0 if way == "all" else 1)
        _append(spark, d, [b'{"order_id":"e","amount":5}', b"\xc3"], start=len(GOOD + POISON))
        # the whole source again: the new records and those still open in quarantine, not the delivered ones
        before = len(count_passes)
        second = _pipeline(spark, d, **errors).run(full=True).batches[0]
        assert len(count_passes) - before == 1  # into an existing target (a MERGE): counted first
        reports[way] = [first, second]
        tables[way] = _tables(spark, d)
    assert [_figures(r) for r in reports["all"]] == [_figures(r) for r in reports["limited"]]
    assert tables["all"] == tables["limited"]
    assert (reports["all"][1].records_in, reports["all"][1].records_quarantined) == (7, 6)


def _txn_commits(table: Path) -> list[bool]:
    """Per commit of a Delta table that adds files, in order: whether it carries a transaction
    identifier (txn)."""
    logs = [f.read_text() for f in sorted((table / "_delta_log").glob("*.json"))]
    return ['"txn"' in text for text in logs if '"add"' in text]


def test_a_re_sent_micro_batch_that_delta_skips_is_still_counted(
    spark: Any, tmp_path: Path, count_passes: list[int]
) -> None:
    """A target without the source coordinates (``target.source_columns: false``) keeps
    ``txnAppId``/``txnVersion`` on every append: a micro-batch sent again under the same
    txnVersion appends nothing, so the target write runs no job and observes nothing: the
    batch is counted over its cache instead (the stream runner counts first the first batch
    after a start, which is where this happens)."""
    _append(spark, tmp_path, GOOD + POISON)
    cfg = orders_config(tmp_path, pipeline="paths")
    cfg["source"]["streaming"] = True
    cfg["target"] |= {"source_columns": False, "checkpoint": str(tmp_path / "checkpoint")}
    pipeline = Pipeline.from_config(parse_config(cfg), spark, listeners=[])
    run = pipeline.start_run("query-1")
    source = spark.read.format("delta").load(str(tmp_path / "source"))
    first = run.process_batch(source, 7, BatchMode.micro_batch())
    assert count_passes == []  # written while counted
    # as if the offsets were not committed and a new driver (a run that has seen no batch yet)
    # sent the batch again
    again = pipeline.start_run("query-1").process_batch(source, 7, BatchMode.micro_batch())
    assert count_passes == [1]  # the skipped append observed nothing; counted over the cache
    resumed = run.process_batch(source, 7, BatchMode.micro_batch(resumed=True))
    assert count_passes == [1, 1]  # counted first: the way a stream's first batch goes
    assert _figures(first) == _figures(again) == _figures(resumed)
    target = spark.read.format("delta").load(str(tmp_path / "target"))
    assert sorted(r[0] for r in target.select("order_id").collect()) == ["a", "b"]  # appended once
    q = spark.read.format("delta").load(str(tmp_path / "quarantine"))
    assert sorted(r[0] for r in q.select("offset").collect()) == [2, 3, 4, 5, 6]  # quarantined once
    assert all(_txn_commits(tmp_path / "target"))


def test_a_stream_appends_plainly_and_its_first_batch_after_a_restart_leaves_out_what_the_tables_hold(
    spark: Any, tmp_path: Path
) -> None:
    """A target that keeps the source coordinates (the default) is appended without transaction
    identifiers (issue 36): only the first micro-batch after a (re)start can hold records the
    tables already have (the streaming engine plans batch N+1 after it committed batch N), and
    that batch is compared with the tables by coordinates and content. So a batch re-sent after
    a crash between its commits, even one first written by a plain append, adds nothing twice."""
    _append(spark, tmp_path, [b"x"])  # the pipeline's source (not read: the batches are handed in)
    pipeline = _pipeline(spark, tmp_path)
    run = pipeline.start_run("query-1")
    run.process_batch(kafka_df(spark, GOOD + POISON), 5, BatchMode.micro_batch(resumed=True))
    later = kafka_df(spark, [b'{"order_id":"e","amount":5}', b"\xc3", b'{"order_id":"f","amount":6}'], start_offset=7)
    run.process_batch(later, 6, BatchMode.micro_batch())
    # batch 6's target append carried no txn: Delta rebuilt no snapshot state to check it
    assert _txn_commits(tmp_path / "target")[-1] is False
    # a new driver (same query id, nothing committed after batch 6's writes) sends batch 6 again
    again = pipeline.start_run("query-1").process_batch(later, 6, BatchMode.micro_batch(resumed=True))
    target, quarantine = _tables(spark, tmp_path)
    assert [t[0] for t in target] == [0, 1, 7, 9]  # each once
    assert [q[0] for q in quarantine] == [2, 3, 4, 5, 6, 8]  # each once
    assert again.records_ok == 0 and again.records_quarantined == 1  # the open one ran again
    assert [q[3] for q in quarantine if q[0] == 8] == ["open"]


class CoinFlip(Stage):
    """Fails about half the records whose value starts with "flip", differently each time it runs,
    and claims otherwise."""

    name = "coin"
    kind = ErrorKind.VALIDATE
    input = "value"
    deterministic = True  # the lie under test

    def evaluate(self, value: Any, ctx: StageContext) -> Any:
        flips = value.startswith(F.lit(b"flip")) & (F.rand() < 0.5)
        return outcome(value, F.coalesce(flips, F.lit(False)), self.error("Tails", "the coin said no"))


def _source(spark: Any, prefix: str, start: int, n: int = 200) -> Any:
    return kafka_df(spark, [f"{prefix}{i}".encode() for i in range(n)], start_offset=start)


def test_after_a_clean_batch_the_next_is_not_cached_and_a_lying_stage_fails_it_before_quarantine(
    spark: Any, tmp_path: Path, count_passes: list[int]
) -> None:
    run = _pipeline(spark, tmp_path, stages=[CoinFlip()]).start_run()
    calm = run.process_batch(_source(spark, "calm", 0), 0)  # first batch: cached (nothing known yet)
    assert (calm.records_in, calm.records_quarantined) == (200, 0)
    with pytest.raises(InconsistentBatchError, match="not deterministic") as info:
        run.process_batch(_source(spark, "flip", 200), 1)  # after a clean one: stages run twice
    assert "Nothing was written to" in str(info.value)
    assert not (tmp_path / "quarantine").exists()  # no record in both tables
    target, _ = _tables_any(spark, tmp_path)
    assert 200 < len(target) < 400
    # the records the first pass failed are in neither table: running the batch again runs them again
    again = _pipeline(spark, tmp_path, stages=[Heads()]).start_run().process_batch(_source(spark, "flip", 200), 0)
    assert again.records_in == 400 - len(target)
    target, quarantine = _tables_any(spark, tmp_path)
    assert sorted(target) == list(range(400)) and quarantine == []
    # each run's first batch is cached, and counted first unless it creates the target (then
    # its append counts it: the first run's); the batch after a clean one is neither
    assert count_passes == [1]


class Heads(CoinFlip):
    """The coin, fixed: passes every record, every time."""

    def evaluate(self, value: Any, ctx: StageContext) -> Any:
        return outcome(value, F.lit(False), self.error("Tails", "the coin said no"))


def test_a_stage_that_is_not_deterministic_keeps_every_batch_cached(spark: Any, tmp_path: Path) -> None:
    """Undeclared stages (the default, and the python stage) get one outcome per record, cached."""
    undeclared = type("Undeclared", (CoinFlip,), {"deterministic": False})()
    run = _pipeline(spark, tmp_path, stages=[undeclared]).start_run()
    run.process_batch(_source(spark, "calm", 0), 0)
    report = run.process_batch(_source(spark, "flip", 200), 1)
    target, quarantine = _tables_any(spark, tmp_path)
    assert 0 < report.records_quarantined == len(quarantine) and report.records_ok + 200 == len(target)
    assert sorted(target + quarantine) == list(range(400))


@pytest.mark.parametrize("first", ["target", "quarantine"])
def test_a_batch_keeps_its_outcomes_whichever_table_commits_first(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """A batch run reads the tables it writes (it leaves out delivered and closed records): the
    first commit must not make the other write run the batch again. The two writes run at once,
    so which one commits first is up to timing (a 2-partition session lost records 1 run in 4):
    here each order is forced in turn, with a stage that gives a record a new outcome per run."""
    def one_then_other(calls: list[Any]) -> list[Any]:  # calls are [quarantine write, target write]
        if first == "quarantine" or len(calls) < 2:
            return [call() for call in calls]
        target_done = calls[1]()
        return [calls[0](), target_done]

    monkeypatch.setattr(writes_module, "_all_of", one_then_other)
    undeclared = type("Undeclared", (CoinFlip,), {"deterministic": False})()
    run = _pipeline(spark, tmp_path, stages=[undeclared]).start_run()
    batches = [("calm", 0), ("flip", 200), ("flip", 400)]
    reports = [run.process_batch(_source(spark, prefix, start), i) for i, (prefix, start) in enumerate(batches)]
    target, quarantine = _tables_any(spark, tmp_path)
    assert sum(r.records_quarantined for r in reports) == len(quarantine) > 0
    assert sum(r.records_ok for r in reports) == len(target)
    assert sorted(target + quarantine) == list(range(600))  # each record in one table, once


def test_the_stages_that_ship_say_whether_they_are_deterministic(spark: Any, tmp_path: Path) -> None:
    pipeline = _pipeline(spark, tmp_path)
    assert [s.deterministic for s in pipeline.stages] == [True, True]
    from quarantine.stage import Stage as Base
    from quarantine.stages.python import PythonStage

    assert Base.deterministic is False and PythonStage.deterministic is False


def _tables_any(spark: Any, d: Path) -> tuple[list[int], list[int]]:
    """Offsets in the target and in quarantine (any payload)."""
    q = d / "quarantine"
    target = [r[0] for r in spark.read.format("delta").load(str(d / "target")).select("_source_offset").collect()]
    quarantined = (
        [r[0] for r in spark.read.format("delta").load(str(q)).select("offset").collect()] if q.exists() else []
    )
    return target, quarantined


def test_a_stream_batch_after_one_with_failed_records_makes_its_two_commits_at_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_passes: list[int]
) -> None:
    """Under a policy that goes on whatever the counts, a stream's micro-batch is written while
    counted (one job) unless the batch before it failed records: then it most likely fails some
    too, and the target and quarantine commits made at once cost one commit's latency, where
    the target write then a quarantine write from its cache cost two (benchmarks/README.md,
    streaming). After a clean batch it goes back to writing while counting."""
    together: list[int] = []
    real = writes_module._all_of

    def spy(calls: Any) -> Any:
        together.append(len(calls))
        return real(calls)

    monkeypatch.setattr(writes_module, "_all_of", spy)
    _append(spark, tmp_path, [b"x"])
    run = _pipeline(spark, tmp_path).start_run("query")
    run.process_batch(kafka_df(spark, GOOD + POISON), 0, BatchMode.micro_batch())
    assert (count_passes, together) == ([], [])  # the first: written while counted
    run.process_batch(
        kafka_df(spark, [b'{"order_id":"e","amount":5}', b"\xc3"], start_offset=7), 1, BatchMode.micro_batch()
    )
    assert (count_passes, together) == ([1], [2])  # counted first, both commits at once
    run.process_batch(kafka_df(spark, GOOD, start_offset=9), 2, BatchMode.micro_batch())
    assert (count_passes, together) == ([1, 1], [2, 1])  # still counted first: no failed record, one write
    run.process_batch(kafka_df(spark, [b"\xc3"], start_offset=11), 3, BatchMode.micro_batch())
    assert (count_passes, together) == ([1, 1], [2, 1])  # after a clean batch: written while counted
    target, quarantine = _tables(spark, tmp_path)
    assert [t[0] for t in target] == [0, 1, 7, 9, 10]
    assert [q[0] for q in quarantine] == [2, 3, 4, 5, 6, 8, 11]
