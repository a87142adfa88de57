"""A Pipeline holds no run state: runs own their id, counts and tolerance (no JVM needed)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from quarantine.config import parse_config
from quarantine.errors import ToleranceExceededError
from quarantine.pipeline import Pipeline
from quarantine.runners.foreach_batch import BatchRunner
from quarantine.stages import build_stages


def _pipeline(**errors: Any) -> Pipeline:
    raw = {
        "pipeline": "runs",
        "source": {"format": "delta", "path": "/tmp/runs-src", "streaming": True},
        "target": {"table": "/tmp/runs-target", "checkpoint": "/tmp/runs-ckpt"},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": "/tmp/runs-q", **errors},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }
    config = parse_config(raw)
    # built as assemble builds it, without a session: nothing here reaches Spark (a None
    # session given to Pipeline.from_config starts a local one)
    pipe = Pipeline(config=config, spark=cast(Any, None), stages=build_stages(config.stages), listeners=[])
    pipe.error_policy = pipe.policy()
    pipe.keys = pipe.key_ring()
    return pipe


def test_the_pipeline_has_no_run_fields() -> None:
    names = {f.name for f in dataclasses.fields(Pipeline)}
    assert not names & {"run_id", "_run", "_run_metrics", "_error_log"}


def test_each_run_has_its_own_id_counts_and_tolerance() -> None:
    pipe = _pipeline(**{"tolerance.limit": 1})
    a, b = pipe.start_run(), pipe.start_run("given-id")
    assert a.run_id != b.run_id and b.run_id == "given-id" == b.info.run_id == b.metrics.run_id
    assert a.tolerance is not b.tolerance and a.metrics is not b.metrics
    now = pipe.clock()
    a.tolerance.check(1, now, batch_id=0)
    with pytest.raises(ToleranceExceededError):
        a.tolerance.check(1, now, batch_id=1)
    b.tolerance.check(1, now, batch_id=0)  # another run's count is its own


def test_the_stream_runner_keeps_one_run_per_query_id_and_never_touches_the_pipeline() -> None:
    pipe = _pipeline()
    before = dict(vars(pipe))
    runner = BatchRunner(pipe)
    first = runner.start("query-1")
    assert runner.start("query-1") is first  # restarted from the same checkpoint: the same run
    second = runner.start("query-2")  # a new checkpoint: a new query id, a new run
    assert second is not first and second.run_id == "query-2"
    after = dict(vars(pipe))
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


class _Plan:
    """A batch's checkpointed plan whose blocks cannot be freed (the JVM side refuses)."""

    def logicalPlan(self) -> Any:  # noqa: N802 (the JVM method's name)
        raise RuntimeError("the block manager is gone")


def test_freeing_a_batch_run_s_checkpoint_never_fails_the_batch(caplog: pytest.LogCaptureFixture) -> None:
    from quarantine.batch.run import _release

    caplog.set_level("WARNING", logger="quarantine")
    _release(cast(Any, type("Held", (), {"_jdf": _Plan()})()), streaming=False)
    assert "could not free the batch's checkpoint blocks" in caplog.text and "block manager is gone" in caplog.text
    # a Spark Connect frame has no JVM handle: its checkpoint goes when the frame is collected
    _release(cast(Any, object()), streaming=False)


def test_a_batch_mode_is_a_batch_run_a_replay_or_a_micro_batch_never_two() -> None:
    from quarantine.batch.writes import BatchMode
    from quarantine.sinks.offset_watermark import OffsetWatermark

    assert (BatchMode.batch_run().streaming, BatchMode.batch_run().replaying) == (False, False)
    assert (BatchMode.replay().streaming, BatchMode.replay().replaying) == (False, True)
    mark = OffsetWatermark({})
    micro = BatchMode.micro_batch(mark, staged=True, resumed=True, overlap=mark)
    assert (micro.streaming, micro.replaying, micro.watermark, micro.staged, micro.resumed) == (
        True, False, mark, True, True
    )
    for mixed in ({"streaming": True, "replaying": True}, {"resumed": True}, {"replaying": True, "watermark": mark}):
        with pytest.raises(ValueError, match="not a batch run, a replay or a micro-batch"):
            BatchMode(**mixed)
