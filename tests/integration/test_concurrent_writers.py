"""Concurrent writers, as real processes: nothing lost, nothing doubled.

Each writer is its own OS process with its own Spark driver, as two jobs are (the
child drivers of :mod:`tests.support.drivers`, started once per test worker and
reused, as a cluster runs one job after another). The writers build their
pipeline, then wait on a file barrier so their writes really overlap. Each may succeed or fail cleanly (a
:class:`~quarantine.errors.QuarantineError`, never a raw Py4J/Delta error);
afterwards a re-run completes, and the ledger is checked: every source record
is in exactly one of the target and the quarantine table (by topic, partition,
offset), none twice, and quarantined bytes are the source's bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from tests.support.crash import write_conf
from tests.support.drivers import CHILD_SPARK, DriverPool, Job
from tests.support.kafka import (
    ORDER_SCHEMA_DDL,
    ProducedRecord,
    ledger,
    order_records,
)

_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# One writer: build the pipeline, warm the JVM, meet the others at the barrier, run.
_DRIVER = """
import json, sys, time, traceback
from pathlib import Path
from quarantine.config import load_config
from quarantine.errors import QuarantineError
from quarantine.pipeline import Pipeline

conf, barrier, n, action = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pipe = Pipeline.from_config(load_config(str(conf)))
pipe.spark.range(10).count()
(barrier / conf.name).touch()
deadline = time.monotonic() + 900
while len(list(barrier.iterdir())) < n and time.monotonic() < deadline:
    time.sleep(0.05)
try:
    if action == "replay":
        from quarantine.runners.replay import replay
        r = replay(pipe)
        out = {"selected": r.selected, "replayed": r.replayed, "still_failing": r.still_failing}
    elif action.startswith("forget:"):
        from quarantine.ops.forget import forget
        f = forget(pipe, where=action.removeprefix("forget:"), reason="race")
        out = {"matched": f.total}
    else:
        s = pipe.run()
        out = {"in": s.records_in, "ok": s.records_ok, "quarantined": s.records_quarantined}
except Exception as exc:
    clean = isinstance(exc, QuarantineError)
    print("FAILED " + json.dumps({"clean": clean, "error": f"{type(exc).__name__}: {exc}"[:3000]}))
    traceback.print_exc()
    sys.exit(1)
print("RESULT " + json.dumps(out))
"""


def source_records(topic: str, count: int, *, seed: int, poison_rate: float = 0.25) -> list[ProducedRecord]:
    """Order events on 2 partitions of ``topic`` (a quarter poison), with their offsets."""
    offsets: dict[int, int] = {}
    out = []
    for r in order_records([topic], 2, count, poison_rate=poison_rate, seed=seed):
        p = r.partition or 0
        off = offsets.get(p, 0)
        offsets[p] = off + 1
        out.append(ProducedRecord(topic, p, off, r.key, r.value, r.headers))
    return out


def write_source(spark: Any, records: Sequence[ProducedRecord], path: Path, *, mode: str = "overwrite") -> None:
    """A Kafka-shaped Delta table holding ``records``, as Spark's Kafka source would read them."""
    rows = [
        (r.key, r.value, r.topic, r.partition, r.offset, _T0 + dt.timedelta(seconds=r.offset), 0,
         list(r.headers) if r.headers is not None else None)
        for r in records
    ]
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").mode(mode).save(str(path))


def pipeline_conf(
    name: str, source: Path, *, target: Path, quarantine: Path,
) -> dict[str, Any]:
    """A batch pipeline over a Kafka-shaped Delta source (the e2e order stages)."""
    return {
        "pipeline": name,
        "source": {"format": "delta", "path": str(source)},
        "target": {"table": str(target)},
        "errors": {
            "tolerance": "all", "deadletterqueue.table.name": str(quarantine),
            "retry.initial.backoff.ms": 100, "retry.delay.max.ms": 2000,
        },
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json", "options": {
                "schema": ORDER_SCHEMA_DDL, "required": ["order_id", "amount", "currency"]}},
        ],
        "spark": {"conf": dict(CHILD_SPARK)},
    }


def run_at_once(
    drivers: DriverPool, confs: Sequence[Path], barrier: Path, action: str | Sequence[str] = "run"
) -> dict[str, dict[str, Any]]:
    """Run one writer per config, each in its own child driver, released together;
    each one's RESULT or FAILED. ``action``: ``run``, ``replay`` or ``forget:<where>``, for every
    writer or one per config.

    A writer that fails must fail cleanly: with a :class:`QuarantineError`.
    """
    barrier.mkdir()
    actions = [action] * len(confs) if isinstance(action, str) else list(action)
    done = drivers.run_at_once([Job(_DRIVER, (conf, barrier, len(confs), a)) for conf, a in zip(confs, actions,
                                                                                               strict=True)])
    out: dict[str, dict[str, Any]] = {}
    for conf, result in zip(confs, done, strict=True):
        name = conf.name
        line = next(
            (ln for ln in result.stdout.splitlines() if ln.startswith(("RESULT ", "FAILED "))), None
        )
        tail = "\n".join(ln for ln in result.stderr.splitlines() if not ln.lstrip().startswith("at "))[-4000:]
        assert line is not None, f"writer {name} exited {result.returncode} without a result:\n{tail}"
        verdict, _, payload = line.partition(" ")
        result = json.loads(payload)
        if verdict == "FAILED":
            assert result["clean"], f"writer {name} failed with a raw error:\n{result['error']}\n{tail}"
            print(f"writer {name} failed cleanly: {result['error'][:500]}")
        out[name] = {"ok": verdict == "RESULT", **result}
    return out


def assert_exactly_once(
    spark: Any, produced: Sequence[ProducedRecord], *, target: Path, quarantine: Path,
    pipeline: str | Sequence[str],
) -> None:
    book = ledger(spark, produced, target=str(target), quarantine=str(quarantine), pipeline=pipeline)
    assert book.exactly_once, book.describe()
    assert book.in_target + book.in_quarantine == len(produced), book.describe()
    assert book.in_quarantine > 0 and book.in_target > 0, book.describe()


def rerun(spark: Any, raw: dict[str, Any]) -> None:
    """The re-run after the race (in this process): it must complete."""
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()


# ---------------------------------------------------------------------- the tests


@pytest.mark.timeout(1800)  # two or three Spark drivers at once: slow on a crowded machine
def test_two_batch_runs_of_one_pipeline_creating_its_tables_at_once_lose_and_double_nothing(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    records = source_records("conc-orders", 300, seed=11)
    write_source(spark, records, table_dir / "source")
    raw = pipeline_conf(
        "conc_orders", table_dir / "source", target=table_dir / "target", quarantine=table_dir / "quarantine"
    )
    confs = [write_conf(raw, table_dir / f"run{i}.yml") for i in (1, 2)]

    results = run_at_once(child_drivers, confs, table_dir / "barrier")

    assert any(r["ok"] for r in results.values()), results
    rerun(spark, raw)
    assert_exactly_once(
        spark, records, target=table_dir / "target", quarantine=table_dir / "quarantine", pipeline="conc_orders"
    )


@pytest.mark.timeout(1800)  # two or three Spark drivers at once: slow on a crowded machine
def test_two_batch_runs_of_one_pipeline_over_existing_tables_lose_and_double_nothing(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    first = source_records("conc-orders", 400, seed=12)
    raw = pipeline_conf(
        "conc_orders", table_dir / "source", target=table_dir / "target", quarantine=table_dir / "quarantine"
    )
    # the tables exist (a first run over half the records); then two runs over all of them race
    write_source(spark, first[::2], table_dir / "source")
    rerun(spark, raw)
    write_source(spark, first, table_dir / "source")
    confs = [write_conf(raw, table_dir / f"run{i}.yml") for i in (1, 2)]

    results = run_at_once(child_drivers, confs, table_dir / "barrier")

    assert any(r["ok"] for r in results.values()), results
    rerun(spark, raw)
    assert_exactly_once(
        spark, first, target=table_dir / "target", quarantine=table_dir / "quarantine", pipeline="conc_orders"
    )


@pytest.mark.timeout(1800)  # two or three Spark drivers at once: slow on a crowded machine
def test_two_pipelines_sharing_one_target_and_one_quarantine_table_lose_and_double_nothing(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    produced: list[ProducedRecord] = []
    raws = []
    for name, topic, seed in (("conc_orders", "conc-orders", 13), ("conc_payments", "conc-payments", 14)):
        records = source_records(topic, 300, seed=seed)
        produced += records
        write_source(spark, records, table_dir / f"{name}_source")
        raws.append(pipeline_conf(
            name, table_dir / f"{name}_source", target=table_dir / "target",
            quarantine=table_dir / "quarantine",
        ))
    confs = [write_conf(raw, table_dir / f"{raw['pipeline']}.yml") for raw in raws]

    results = run_at_once(child_drivers, confs, table_dir / "barrier")

    assert any(r["ok"] for r in results.values()), results
    for raw in raws:
        rerun(spark, raw)
    assert_exactly_once(
        spark, produced, target=table_dir / "target", quarantine=table_dir / "quarantine",
        pipeline=["conc_orders", "conc_payments"],
    )


def assert_replay_resolved_correctly(
    spark: Any, produced: Sequence[ProducedRecord], *, target: Path, quarantine: Path, pipeline: str,
) -> int:
    """After replays: each record in exactly one of target and *open* quarantine rows;
    every ``replayed`` row's record really is in the target; no coordinates twice
    in the quarantine table; quarantined bytes are the source's. Returns the replayed rows."""
    book = ledger(
        spark, produced, target=str(target), quarantine=str(quarantine), pipeline=pipeline, statuses=("open",)
    )
    assert book.exactly_once, book.describe()
    everything = ledger(spark, produced, target=str(target), quarantine=str(quarantine), pipeline=pipeline)
    assert not everything.bytes_mismatch, everything.describe()
    q = spark.read.format("delta").load(str(quarantine)).where(f"pipeline = '{pipeline}'")
    rows = q.select("topic", "partition", "offset", "status", "run_id").collect()
    coords = [(r[0], r[1], r[2]) for r in rows]
    assert len(coords) == len(set(coords)), "a coordinate is in the quarantine table twice"
    in_target = {
        (r[0], r[1], r[2])
        for r in spark.read.format("delta").load(str(target))
        .select("_source_topic", "_source_partition", "_source_offset").collect()
    }
    replayed_not_in_target = [r for r in rows if r["status"] == "replayed" and (r[0], r[1], r[2]) not in in_target]
    assert not replayed_not_in_target, (
        f"{len(replayed_not_in_target)} row(s) marked replayed whose record is not in the target "
        f"(they still fail, and must be open): {replayed_not_in_target[:5]}"
    )
    open_in_target = [r for r in rows if r["status"] == "open" and (r[0], r[1], r[2]) in in_target]
    assert not open_in_target, f"open rows whose record is in the target: {open_in_target[:5]}"
    return sum(1 for r in rows if r["status"] == "replayed")


@pytest.mark.timeout(1800)  # two or three Spark drivers at once: slow on a crowded machine
def test_two_replays_of_one_pipeline_at_once_resolve_each_row_once_and_correctly(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    records = source_records("conc-orders", 300, seed=15)
    write_source(spark, records, table_dir / "source")
    raw = pipeline_conf(
        "conc_orders", table_dir / "source", target=table_dir / "target", quarantine=table_dir / "quarantine"
    )
    rerun(spark, raw)
    # the fix being replayed: order_id is no longer required (the missing_field poison passes)
    fixed = {**raw, "target": {**raw["target"]}}
    fixed["stages"] = [raw["stages"][0], {
        "name": "parse_order", "type": "json",
        "options": {"schema": ORDER_SCHEMA_DDL, "required": ["amount", "currency"]},
    }]
    confs = [write_conf(fixed, table_dir / f"replay{i}.yml") for i in (1, 2)]

    results = run_at_once(child_drivers, confs, table_dir / "barrier", action="replay")

    assert any(r["ok"] for r in results.values()), results
    again = replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]))
    assert again.replayed == 0, again.render()  # the races left nothing open that now passes
    replayed = assert_replay_resolved_correctly(
        spark, records, target=table_dir / "target", quarantine=table_dir / "quarantine", pipeline="conc_orders"
    )
    assert replayed > 0


@pytest.mark.timeout(1800)  # three Spark drivers at once: slow on a crowded machine
def test_two_forgets_and_a_run_at_once_lose_nothing_and_leave_every_forgotten_row_erased(
    spark: Any, table_dir: Path, child_drivers: DriverPool
) -> None:
    from quarantine.ops.forget import forget

    records = source_records("conc-forget", 400, seed=17)
    write_source(spark, records[:300], table_dir / "source")
    raw = pipeline_conf(
        "conc_forget", table_dir / "source", target=table_dir / "target", quarantine=table_dir / "quarantine"
    )
    rerun(spark, raw)
    write_source(spark, records[300:], table_dir / "source", mode="append")  # new records for the racing run
    wheres = ["partition = 0 AND offset < 100", "partition = 1 AND offset < 100"]
    confs = [write_conf(raw, table_dir / name) for name in ("forget0.yml", "forget1.yml", "run.yml")]

    results = run_at_once(child_drivers, confs, table_dir / "barrier",
                          action=[f"forget:{wheres[0]}", f"forget:{wheres[1]}", "run"])

    for where, conf in zip(wheres, confs, strict=False):
        if not results[conf.name]["ok"]:  # failed cleanly (retries spent): the request is made again
            forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), where=where, reason="again")
    if not results["run.yml"]["ok"]:
        rerun(spark, raw)
    q = spark.read.format("delta").load(str(table_dir / "quarantine")).where("pipeline = 'conc_forget'")
    forgotten = q.where(" OR ".join(f"({w})" for w in wheres))
    assert forgotten.count() > 0
    assert forgotten.where("key IS NOT NULL OR value IS NOT NULL OR message IS NOT NULL OR status = 'open' "
                           "OR exists(error_history, h -> h.message IS NOT NULL)").count() == 0
    erased = {(r[0], r[1], r[2]) for r in forgotten.select("topic", "partition", "offset").collect()}
    book = ledger(spark, records, target=str(table_dir / "target"), quarantine=str(table_dir / "quarantine"),
                  pipeline="conc_forget")
    assert not (book.duplicates or book.lost or book.unexpected), book.describe()
    assert set(book.bytes_mismatch) == erased, book.describe()  # the forgotten rows alone lost their bytes
    assert book.in_target > 0 and book.in_quarantine > len(erased)
    # the source still holds every record: a re-run changes neither table's records
    before = book.in_target, book.in_quarantine
    rerun(spark, raw)
    again = ledger(spark, records, target=str(table_dir / "target"), quarantine=str(table_dir / "quarantine"),
                   pipeline="conc_forget")
    assert (again.in_target, again.in_quarantine) == before and set(again.bytes_mismatch) == erased
