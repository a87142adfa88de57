"""A replay while the pipeline's stream is running, over a real broker, as real processes.

The stream (``quarantine run``, processing-time trigger) keeps writing the target
and the quarantine table while ``quarantine replay`` — its own process, with a
fixed parser — re-runs the open rows. Either side may fail cleanly and be run
again; at the end every record is in exactly one of the target and the *open*
quarantine rows, every ``replayed`` row's record really is in the target, and
no coordinates are anywhere twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import load_config, parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from tests.integration.test_concurrent_writers import assert_replay_resolved_correctly
from tests.support import KafkaBroker, ProducedRecord, kafka_pipeline_conf, order_records, produce
from tests.support.crash import batch_files, write_conf
from tests.support.drivers import CHILD_SPARK
from tests.support.kafka import ORDER_SCHEMA_DDL

REPO = Path(__file__).resolve().parents[2]
PIPELINE = "orders_conc_replay"

#: The concurrent replay's write retries: a conflict retried every 0.1-2 s for 30 s, not the
#: default 0.3-60 s backoff over a 120 s budget. The stream commits to the quarantine table
#: every few seconds while the replay runs, so the replay's MERGE conflicts on most attempts;
#: with the defaults it slept through 8 attempts and failed cleanly after 190 s (most of the
#: test's 277 s). Here it makes more attempts in less time, and either outcome (it wins a
#: gap, or fails cleanly and the re-run resolves) is still the race it was; the stream keeps
#: the defaults (it must not fail).
REPLAY_RETRY = {"retry.timeout": 30_000, "retry.initial.backoff.ms": 100, "retry.delay.max.ms": 2_000}


def _wait_for(what: str, ok: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert proc.poll() is None, f"the stream exited ({proc.returncode}) before {what}:\n{_tail(log)}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s:\n{_tail(log)}"
        time.sleep(0.5)


def _tail(log: Path, n: int = 40) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return "\n".join(ln for ln in lines if not ln.lstrip().startswith("at "))[-6000:]


@pytest.mark.timeout(2400)  # three Spark drivers at once, then a drain and a re-run: slow on 2 cores
def test_a_replay_while_the_stream_runs_resolves_each_row_once_and_correctly(
    spark: Any, kafka_broker: KafkaBroker, new_topics: Callable[..., list[str]], tmp_path: Path
) -> None:
    (topic,) = new_topics("conc-replay", partitions=2)
    records = order_records([topic], 2, 3000, poison_rate=0.25, seed=21)
    produced: list[ProducedRecord] = produce(kafka_broker.bootstrap, records[:300])

    stream = kafka_pipeline_conf(
        kafka_broker.bootstrap, tmp_path, topics=[topic], pipeline=PIPELINE,
        processing_time="1 second", max_offsets_per_trigger=100, spark_conf=CHILD_SPARK,
    )
    # the fix the replay brings: order_id is no longer required (missing_field poison passes)
    fixed = {**stream, "errors": {**stream["errors"], **REPLAY_RETRY}, "stages": [stream["stages"][0], {
        "name": "parse_order", "type": "json",
        "options": {"schema": ORDER_SCHEMA_DDL, "required": ["amount", "currency"]},
    }]}
    stream_yml = write_conf(stream, tmp_path / "stream.yml")
    replay_yml = write_conf(fixed, tmp_path / "replay.yml")
    # the drain reads everything left in one batch (not 100 records at a time)
    drain_source = {k: v for k, v in stream["source"].items() if k != "max.offsets.per.trigger"}
    final_yml = write_conf({**stream, "source": drain_source, "trigger": "available_now"}, tmp_path / "final.yml")
    env = {**os.environ, "QUARANTINE_SPARK_LOG_LEVEL": "ERROR", "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "stream.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quarantine", "run", "--conf", str(stream_yml)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    replay_proc: subprocess.Popen[str] | None = None
    try:
        checkpoint = tmp_path / "checkpoint"
        _wait_for("first committed batch", lambda: len(batch_files(checkpoint, "commits")) >= 2, proc, log, 900)
        # the replay starts while the stream works through the rest (100 records a batch) …
        replay_proc = subprocess.Popen(
            [sys.executable, "-m", "quarantine", "replay", "--conf", str(replay_yml)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        # … and more records arrive, for the stream to write, for as long as the replay runs
        more: list[ProducedRecord] = []
        replay_done = threading.Event()

        def trickle() -> None:
            for i in range(300, len(records), 20):
                more.extend(produce(kafka_broker.bootstrap, records[i:i + 20]))
                if replay_done.wait(3):
                    return

        producer = threading.Thread(target=trickle)
        producer.start()
        try:
            stdout, stderr = replay_proc.communicate(timeout=1500)
        finally:
            replay_done.set()
            producer.join()
        produced += more
        assert proc.poll() is None, f"the stream failed while the replay ran:\n{_tail(log)}"
        # either side may fail, but cleanly: the CLI's one-line error, no raw traceback
        if replay_proc.returncode != 0:
            assert "quarantine: run failed:" in stderr and "Traceback" not in stderr, stderr[-6000:]
            print(f"the concurrent replay failed cleanly: {stderr.strip().splitlines()[-1]}")
        else:
            print(stdout.strip().splitlines()[-1])
        # the stream writes on after the replay (it plans a batch only when records arrive)
        first_batches = len(batch_files(checkpoint, "commits"))
        produced += produce(kafka_broker.bootstrap, order_records([topic], 2, 40, poison_rate=0.25, seed=22))
        _wait_for(
            "batch after the replay", lambda: len(batch_files(checkpoint, "commits")) > first_batches,
            proc, log, 600,
        )
    finally:
        if replay_proc is not None and replay_proc.poll() is None:
            replay_proc.kill()
        os.killpg(proc.pid, 9)
        proc.wait(60)

    # the drain: a new driver (this test's session) finishes the stream from its checkpoint
    Pipeline.from_config(load_config(final_yml), spark, listeners=[]).run()
    # the re-run: replays what the stream quarantined after the first replay selected its rows
    again = replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]))
    print(again.render())

    replayed = assert_replay_resolved_correctly(
        spark, produced, target=tmp_path / "target", quarantine=tmp_path / "quarantine", pipeline=PIPELINE
    )
    assert replayed > 0
