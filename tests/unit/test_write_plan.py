"""The write plan as a table: each kind of batch and what it is written with (pure)."""

from __future__ import annotations

import pytest

from quarantine.batch.write_plan import BatchFacts, Hold, TargetWrite, WritePlan, write_plan

M, MB, A, AT = TargetWrite.MERGE, TargetWrite.MERGE_BOUNDED, TargetWrite.APPEND, TargetWrite.APPEND_TXN
N, C, K = Hold.NONE, Hold.CACHE, Hold.CHECKPOINT

#: facts -> (settle, count first, rerun, hold, target, append quarantine)
CASES: list[tuple[str, BatchFacts, tuple[bool, bool, bool, Hold, TargetWrite, bool]]] = [
    ("batch run, first, into an existing target", BatchFacts(), (False, True, False, K, M, False)),
    ("batch run creating the target, policy cannot stop", BatchFacts(target_exists=False),
     (False, False, False, K, M, False)),
    ("batch run creating the target, tolerance none", BatchFacts(target_exists=False, may_stop=True),
     (False, True, False, K, M, False)),
    ("batch run of what is new since the last run", BatchFacts(bounded=True), (False, True, False, K, MB, False)),
    ("batch run with an expectation stage", BatchFacts(judging=True, target_exists=False),
     (False, True, False, K, M, False)),
    ("replay", BatchFacts(replaying=True), (False, True, False, K, M, False)),
    ("stream, first batch of a new query", BatchFacts(streaming=True), (False, False, False, C, A, False)),
    ("stream after a clean batch, deterministic stages", BatchFacts(streaming=True, last_failed=False),
     (False, False, True, N, A, False)),
    ("stream after a clean batch, a stage not deterministic",
     BatchFacts(streaming=True, last_failed=False, deterministic=False), (False, False, False, C, A, False)),
    ("stream after a batch that failed records", BatchFacts(streaming=True, last_failed=True),
     (False, True, False, C, A, False)),
    ("stream restarted, target keeps coordinates", BatchFacts(streaming=True, resumed=True),
     (True, True, False, K, A, False)),
    ("stream restarted, target without coordinates",
     BatchFacts(streaming=True, resumed=True, keeps_coordinates=False), (False, True, False, C, AT, False)),
    ("stream from a new checkpoint inside what the tables hold",
     BatchFacts(streaming=True, overlapping=True, last_failed=False), (True, False, False, K, A, False)),
    ("kafka stream past the quarantine table's offsets", BatchFacts(streaming=True, watermark_passed=True),
     (False, False, False, C, A, True)),
]


@pytest.mark.parametrize(("facts", "expected"), [(f, e) for _, f, e in CASES], ids=[n for n, _, _ in CASES])
def test_each_kind_of_batch_gets_its_write_plan(
    facts: BatchFacts, expected: tuple[bool, bool, bool, Hold, TargetWrite, bool]
) -> None:
    assert write_plan(facts) == WritePlan(*expected)
