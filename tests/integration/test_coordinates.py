"""The identity rules' narrow check (:mod:`quarantine.identity`): exact, and skipped only when it may be.

The end-to-end rules (copies dropped, conflicts quarantined, unkeyed records keyed)
are in ``test_record_integrity``; these tests hold the check that decides whether a
batch needs them: :func:`suspect_groups` counts distinct offsets in bitmaps, so
every ``long`` must map to its own bucket and bit, negative and extreme ones too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from quarantine.identity import VARIANTS, identified, identify, suspect_groups, unique_coordinates
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from tests.helpers import kafka_rows

_MIN, _MAX = -(2**63), 2**63 - 1
_B = 32768  # offsets per bitmap bucket
#: offsets at every edge of the bucket/bit mapping: zero, both signs, both ends of a bucket, the long's ends
EDGES = sorted(
    {0, 1, -1, _B - 1, _B, _B + 1, -_B + 1, -_B, -_B - 1, 2 * _B, 2 * _B + 1, -2 * _B, -2 * _B - 1,
     2**47 * _B, -(2**47) * _B, _MIN, _MIN + 1, _MIN + _B, _MAX, _MAX - 1, _MAX - _B}
)


def _frame(spark: Any, coords: list[tuple[str | None, int | None, int | None]]) -> DataFrame:
    rows = [
        (row[0], row[1], topic, partition, offset, *row[5:])
        for row, (topic, partition, offset) in zip(kafka_rows([b"v"] * len(coords)), coords, strict=True)
    ]
    return spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)


def test_distinct_offsets_at_every_bucket_edge_are_told_apart_and_each_repeated_one_is_found(spark: Any) -> None:
    # partition 0: every edge once (no suspect); partition i: every edge once, edge i twice
    coords: list[tuple[str | None, int | None, int | None]] = [("t", 0, o) for o in EDGES]
    for i, edge in enumerate(EDGES, start=1):
        coords += [("t", i, o) for o in EDGES] + [("t", i, edge)]
    suspect = {r["partition"] for r in suspect_groups(_frame(spark, coords)).collect()}
    assert suspect == set(range(1, len(EDGES) + 1))


def test_null_partitions_and_offsets_are_suspect_and_null_topics_are_one_topic(spark: Any) -> None:
    df = _frame(spark, [(None, 0, 1), (None, 0, 2), ("t", None, 1), ("u", 0, None), ("u", 0, 5), ("v", 0, 1)])
    suspect = {(r["topic"], r["partition"]) for r in suspect_groups(df).collect()}
    assert suspect == {("t", None), ("u", 0)}
    assert unique_coordinates(_frame(spark, [(None, 0, 1), (None, 0, 2), ("t", 0, 1)]))
    assert not unique_coordinates(_frame(spark, [(None, 0, 1), (None, 0, 1)]))


# keyed rows only (NULLs are held above); small pools, so most examples repeat some coordinates
_OFFSET = st.one_of(st.sampled_from(EDGES), st.integers(-3, 3), st.integers(_MIN, _MAX))
_COORD = st.tuples(st.sampled_from(["a", None]), st.sampled_from([0, 1]), _OFFSET)


# Each example is one Spark job; the edges are covered above, these mix them at random.
@settings(
    max_examples=12, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(coords=st.lists(_COORD, min_size=0, max_size=12))
def test_unique_coordinates_agrees_with_an_exact_count(spark: Any, coords: list[Any]) -> None:
    expected = all(p is not None and o is not None for _, p, o in coords) and len(set(coords)) == len(coords)
    assert unique_coordinates(_frame(spark, coords)) is expected


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_a_batch_the_rules_do_not_change_is_not_shuffled_and_one_they_change_is_identified(spark: Any) -> None:
    clean = _frame(spark, [("t", 0, o) for o in range(5)] + [("t", 1, 0), (None, 0, 0)])
    out = identified(clean)
    assert "Exchange" not in _plan(out) and "Window" not in _plan(out)
    assert sorted(out.columns) == sorted([*clean.columns, VARIANTS])
    assert {r[VARIANTS] for r in out.collect()} == {1} and out.count() == clean.count()

    for dirty in (
        clean.union(clean.limit(1)),  # a copy
        _frame(spark, [("t", 0, 1), ("t", None, 1)]),  # unkeyed
    ):
        got = identified(dirty)
        assert "Window" in _plan(got)
        assert sorted(map(tuple, got.collect())) == sorted(map(tuple, identify(dirty).collect()))
