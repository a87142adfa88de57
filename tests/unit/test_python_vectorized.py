"""The vectorized python stage's search for the bad rows of a failing batch, without Spark.

``ArrowCalls.run(values, skip)`` is what the stage's Arrow UDF calls on the
executors, so these tests call it directly with pyarrow arrays. The contract:

* every row not skipped gets exactly one of result and error, and a skipped row
  is never passed to the function;
* a row gets the same outcome as a call of the function on that row alone: its
  result, or the error of its own one-row call (class, message, retriable, attempts);
* every call sees a fresh ``RangeIndex``;
* retries are per call, before any splitting, and counted on the call's first row;
* the number of calls is bounded (:func:`call_bound`), so a mostly-clean batch
  never degrades into one call per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import DataType, DoubleType, StructField, StructType

from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.stages.python import PythonMode, _stage_policy
from quarantine.stages.python.arrow_batch import ArrowCalls


class TransientError(Exception):
    """An error a retry could fix."""


def call_bound(n: int, k: int) -> int:
    """Calls the search may make for ``k`` bad rows among ``n`` (a pure, row-wise function).

    The module docstring of :mod:`quarantine.stages.python.bad_rows` states it:
    ``3 + 2⌈log2(n+1)⌉ + 2k(log2(2n/k) + 1)``; one call when nothing fails.
    """
    if k == 0:
        return 1
    return 3 + 2 * math.ceil(math.log2(n + 1)) + math.floor(2 * k * (math.log2(2 * n / k) + 1))


def runner(
    fn: Callable[[Any], Any],
    returns: DataType | None = None,
    *,
    nullable: bool = False,
    retry: RetryPolicy | None = None,
    retriable: tuple[type[BaseException], ...] = (),
) -> ArrowCalls:
    return ArrowCalls(
        stage="s",
        kind="transform",
        fn=fn,
        mode=PythonMode.VECTORIZED,
        returns=returns or DoubleType(),
        nullable=nullable,
        stacktrace=False,
        retriable=retriable,
        retry=_stage_policy(retry, retriable),
    )


def rows(out: pa.Array) -> list[dict[str, Any]]:
    return list(out.to_pylist())


def no_skip(n: int) -> pa.Array:
    return pa.array(np.zeros(n, dtype=bool))


class Calls:
    """Wraps a vectorized function: records each call's input values, checks its index."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.inputs: list[list[Any]] = []
        self.bad_index = 0

    def __call__(self, s: Any) -> Any:
        if not s.index.equals(pd.RangeIndex(len(s))):
            self.bad_index += 1
        self.inputs.append(s.tolist() if isinstance(s, pd.Series) else s.to_dict("records"))
        return self.fn(s)

    @property
    def count(self) -> int:
        return len(self.inputs)


def parse(s: pd.Series) -> pd.Series:
    """Row-wise, with every kind of failure, each message naming the failing values:

    ``bad…`` raises ValueError; ``none`` gives NaN (NullResult unless nullable);
    ``typo`` gives a string (ResultTypeMismatch); anything else is ``float``.
    """
    text = s.astype(object)
    bad = text[text.map(lambda v: isinstance(v, str) and v.startswith("bad"))]
    if len(bad):
        raise ValueError(f"cannot parse {bad.tolist()}")
    return text.map(lambda v: "x" if v == "typo" else np.nan if v in ("none", None) else float(v))


def one_by_one(r: ArrowCalls, values: pa.Array, skip: list[bool]) -> list[dict[str, Any]]:
    """The reference: every row not skipped run alone (its one-row call), skipped rows empty."""
    out = []
    for i, skipped in enumerate(skip):
        if skipped:
            out.append({"result": None, "error": None, "retries": 0, "undeclared": None})
        else:
            out.extend(rows(r.run(values.slice(i, 1), pa.array([False]))))
    return out


# ---------------------------------------------------------------------- the contract


_GOOD = ["1.5", "2", "-3", "0.25"]
_POISON = ["bad", "none", "typo", None]


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[str | None], list[bool]]:
    n = draw(st.integers(1, 90))
    kinds = draw(st.lists(st.sampled_from(["good", "good", "good", "poison", "unique"]), min_size=n, max_size=n))
    values: list[str | None] = []
    for i, kind in enumerate(kinds):
        if kind == "good":
            values.append(draw(st.sampled_from(_GOOD)))
        elif kind == "poison":  # a few repeated poison values
            values.append(draw(st.sampled_from(_POISON)))
        else:  # poison that never repeats
            values.append(f"bad{i}")
    skip = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return values, skip


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), nullable=st.booleans(), clustered=st.booleans())
def test_every_row_gets_what_its_own_one_row_call_gives(
    batch: tuple[list[str | None], list[bool]], nullable: bool, clustered: bool
) -> None:
    values, skip = batch
    if clustered:  # poison runs together (a bad partition) rather than scattered
        order = sorted(range(len(values)), key=lambda i: values[i] in _GOOD)
        values = [values[i] for i in order]
    skipped = ["SKIPPED" if s else v for v, s in zip(values, skip, strict=True)]  # never to be seen by fn
    arr = pa.array(skipped, type=pa.string())
    calls = Calls(parse)
    got = rows(runner(calls, nullable=nullable).run(arr, pa.array(skip)))
    want = one_by_one(runner(parse, nullable=nullable), arr, skip)
    assert got == want
    assert not any("SKIPPED" in inp for inp in calls.inputs)
    assert calls.bad_index == 0
    for row, s in zip(got, skip, strict=True):
        assert s or (row["result"] is None) != (row["error"] is None) or (nullable and row["error"] is None)
    n = len(skip) - sum(skip)
    k = sum(row["error"] is not None for row in got)
    assert calls.count <= call_bound(n, k) if n else calls.count == 0


def test_a_bad_rows_message_is_that_of_its_one_row_call() -> None:
    values = pa.array(["1", "bad", "2", "3", "bad", "4"])
    out = rows(runner(parse).run(values, no_skip(6)))
    assert [r["result"] for r in out] == [1.0, None, 2.0, 3.0, None, 4.0]
    errors = [r["error"] for r in out if r["error"] is not None]
    assert [(e["error_class"], e["message"], e["retriable"], e["attempts"]) for e in errors] == [
        ("ValueError", "cannot parse ['bad']", False, 1)
    ] * 2


def test_struct_input_is_searched_too() -> None:
    """A struct input arrives as a DataFrame; its failing batches are searched the same way."""
    n = 300
    amount = [float(i) for i in range(n)]
    quantity = [0 if i % 7 == 3 else 2 for i in range(n)]
    values = pa.StructArray.from_arrays([pa.array(amount), pa.array(quantity)], names=["amount", "quantity"])

    def unit_price(df: pd.DataFrame) -> pd.Series:
        if (df["quantity"] == 0).any():
            raise ZeroDivisionError(f"quantity 0 in {int((df['quantity'] == 0).sum())} row(s)")
        return df["amount"] / df["quantity"]

    calls = Calls(unit_price)
    skip = [i % 5 == 0 for i in range(n)]
    got = rows(runner(calls).run(values, pa.array(skip)))
    assert got == one_by_one(runner(unit_price), values, skip)
    assert calls.bad_index == 0
    bad = sum(1 for i in range(n) if i % 7 == 3 and not skip[i])
    assert calls.count <= call_bound(n - sum(skip), bad)


def test_a_function_that_fails_a_value_only_sometimes_still_gives_one_outcome_per_row() -> None:
    """Not row-wise (it fails the first call that holds ``x``): no guarantee of which
    outcome, but every row gets exactly one, and results are the function's."""
    failed: list[bool] = []

    def first_x_fails(s: pd.Series) -> pd.Series:
        if not failed and (s == "x").any():
            failed.append(True)
            raise ValueError("x, once")
        return s.map(lambda v: 7.0 if v == "x" else float(v))

    values = pa.array(["x" if i % 10 == 0 else str(i) for i in range(200)])
    out = rows(runner(first_x_fails).run(values, no_skip(200)))
    assert all((r["result"] is None) != (r["error"] is None) for r in out)
    assert [r["result"] for r in out] == [7.0 if i % 10 == 0 else float(i) for i in range(200)]


def test_a_function_that_changes_its_argument_in_place_changes_no_other_call() -> None:
    def parse_then_scribble(s: pd.Series) -> pd.Series:
        bad = bool(s.str.startswith("bad").any())
        out = None if bad else s.astype(float)
        s.iloc[:] = "bad, scribbled"  # in place, on the argument it was given
        if out is None:
            raise ValueError("bad row")
        return out

    out = rows(runner(parse_then_scribble).run(pa.array(["1", "bad", "2", "3"]), no_skip(4)))
    assert [r["result"] for r in out] == [1.0, None, 2.0, 3.0]


# ---------------------------------------------------------------------- cost


def _poisoned(n: int, positions: list[int], same_value: bool) -> pa.Array:
    vals = [f"{i}.5" for i in range(n)]
    for j, i in enumerate(positions):
        vals[i] = "bad" if same_value else f"bad{j}"
    return pa.array(vals)


def test_a_clean_batch_is_one_call() -> None:
    calls = Calls(parse)
    out = rows(runner(calls).run(_poisoned(10_000, [], True), no_skip(10_000)))
    assert calls.count == 1
    assert out[9_999] == {"result": 9999.5, "error": None, "retries": 0, "undeclared": None}


@pytest.mark.parametrize(
    ("layout", "positions", "same_value", "at_most"),
    [
        # bisection made 27, 1527 and 1527 calls here; one call per row would be 10,001
        ("one bad row", [4_321], False, 35),
        ("1% scattered, all different", list(range(0, 10_000, 100)), False, 1_100),
        ("1% scattered, one repeated value", list(range(0, 10_000, 100)), True, 150),
        ("1% in one run", list(range(6_000, 6_100)), False, 180),
    ],
)
def test_calls_stay_near_the_number_of_bad_rows(
    layout: str, positions: list[int], same_value: bool, at_most: int
) -> None:
    n = 10_000
    calls = Calls(parse)
    out = rows(runner(calls).run(_poisoned(n, positions, same_value), no_skip(n)))
    assert [i for i, r in enumerate(out) if r["error"] is not None] == positions
    assert calls.count <= min(at_most, call_bound(n, len(positions))), layout
    assert sum(len(inp) == 1 for inp in calls.inputs) <= 2 * len(positions) + 2, "one-row calls"


def test_a_batch_where_every_row_fails_costs_about_one_call_per_row() -> None:
    n = 1_000
    calls = Calls(parse)
    out = rows(runner(calls).run(pa.array(["bad"] * n), no_skip(n)))
    assert all(r["error"]["message"] == "cannot parse ['bad']" for r in out)
    assert calls.count <= n + 2 * math.ceil(math.log2(n)) + 2


# ---------------------------------------------------------------------- retries


def _policy(timeout_ms: int = 2_000, min_attempts: int = 1) -> RetryPolicy:
    return RetryPolicy(
        timeout_ms=timeout_ms,
        initial_backoff_ms=0,
        max_delay_ms=1,
        jitter=0.0,
        retriable=RetriableClassifier.of(["TransientError"], include_delta=False),
        min_attempts=min_attempts,
    )


class FailingCalls:
    """Raises TransientError on the given call numbers (1-based), else runs ``fn``."""

    def __init__(self, fn: Callable[[Any], Any], failing: set[int]) -> None:
        self.fn = fn
        self.failing = failing
        self.sizes: list[int] = []
        self.firsts: list[Any] = []

    def __call__(self, s: pd.Series) -> Any:
        self.sizes.append(len(s))
        self.firsts.append(s.iloc[0])
        if len(self.sizes) in self.failing:
            raise TransientError(f"call {len(self.sizes)} timed out")
        return self.fn(s)


def test_a_transient_outage_is_retried_on_the_whole_batch_not_split() -> None:
    n = 500
    fn = FailingCalls(parse, {1, 2})
    out = rows(runner(fn, retry=_policy()).run(_poisoned(n, [], True), no_skip(n)))
    assert fn.sizes == [n, n, n]
    assert all(r["error"] is None for r in out)
    assert [r["retries"] for r in out] == [2] + [0] * (n - 1)


def test_retries_come_before_splitting_and_a_bad_row_keeps_its_own_attempts() -> None:
    n = 500
    fn = FailingCalls(parse, {1, 2})
    out = rows(runner(fn, retry=_policy()).run(_poisoned(n, [100, 300], False), no_skip(n)))
    assert fn.sizes[:3] == [n, n, n], "the whole batch is retried before it is split"
    assert all(size < n for size in fn.sizes[3:])
    errors = {i: r["error"] for i, r in enumerate(out) if r["error"] is not None}
    assert sorted(errors) == [100, 300]
    outcomes = [(e["error_class"], e["retriable"], e["attempts"]) for e in errors.values()]
    assert outcomes == [("ValueError", False, 1)] * 2
    assert sum(r["retries"] for r in out) == 0, "the retried call failed for good: no success to count"


def test_a_retried_call_inside_the_search_counts_its_retries_on_its_first_row() -> None:
    n = 500
    fn = FailingCalls(parse, {2})  # the first call of the search
    out = rows(runner(fn, retry=_policy()).run(_poisoned(n, [400], False), no_skip(n)))
    assert fn.sizes[1] == fn.sizes[2] < n, "the failing search call is retried as it is"
    first_row = [f"{i}.5" for i in range(n)].index(fn.firsts[1])
    assert [i for i, r in enumerate(out) if r["retries"]] == [first_row]
    assert out[first_row]["retries"] == 1
    assert [i for i, r in enumerate(out) if r["error"] is not None] == [400]


def test_a_row_that_keeps_failing_transiently_reports_retriable_and_its_attempts() -> None:
    def down_for_bad(s: pd.Series) -> pd.Series:
        if (s == "bad").any():
            raise TransientError("service unavailable")
        return s.astype(float)

    out = rows(
        runner(down_for_bad, retry=_policy(timeout_ms=1, min_attempts=3), retriable=(TransientError,)).run(
            pa.array(["1", "bad", "2"]), no_skip(3)
        )
    )
    assert out[0]["result"] == 1.0 and out[2]["result"] == 2.0
    e = out[1]["error"]
    assert (e["error_class"], e["retriable"]) == ("TransientError", True)
    assert e["attempts"] >= 3


def test_nulls_are_errors_of_their_one_row_call_unless_nullable() -> None:
    values = pa.array(["1", "none", "2", None])
    strict = rows(runner(parse).run(values, no_skip(4)))
    assert [r["error"]["error_class"] if r["error"] else None for r in strict] == [
        None, "NullResult", None, "NullResult"
    ]
    assert strict[1]["error"]["message"].startswith("function returned None/NaN for 1 of 1 row(s)")
    lenient = rows(runner(parse, nullable=True).run(values, no_skip(4)))
    assert [(r["result"], r["error"]) for r in lenient] == [(1.0, None), (None, None), (2.0, None), (None, None)]


def test_struct_results_and_wrong_lengths() -> None:
    returns = StructType([StructField("x", DoubleType())])

    def wrong_length(s: pd.Series) -> pd.DataFrame:
        return pd.DataFrame({"x": s.astype(float)}).iloc[:-1] if len(s) > 2 else pd.DataFrame({"x": s.astype(float)})

    out = rows(runner(wrong_length, returns).run(pa.array(["1", "2", "3", "4"]), no_skip(4)))
    assert [r["result"] for r in out] == [{"x": 1.0}, {"x": 2.0}, {"x": 3.0}, {"x": 4.0}]


@pytest.mark.parametrize("mode", [PythonMode.ROW, PythonMode.VECTORIZED])
def test_a_string_python_cannot_read_fails_its_row_alone_without_calling_the_function(mode: PythonMode) -> None:
    """A STRING holding bytes that are not UTF-8 (Spark's CAST of BINARY does not check) cannot be
    handed to the function: that row is an UnreadableInput error, the others run, the task does not fail."""
    data = b"1.5\xff2"
    offsets = pa.array([0, 3, 4, 5], type=pa.int32())
    values = pa.Array.from_buffers(pa.string(), 3, [None, offsets.buffers()[1], pa.py_buffer(data)])
    seen: list[Any] = []

    def fn(x: Any) -> Any:
        seen.append(x.tolist() if isinstance(x, pd.Series) else x)
        return x.astype(float) if isinstance(x, pd.Series) else float(x)

    r = runner(fn)
    out = rows(ArrowCalls(**{**r.__dict__, "mode": mode}).run(values, no_skip(3)))
    assert [o["result"] for o in out] == [1.5, None, 2.0]
    error = out[1]["error"]
    assert error["error_class"] == "UnreadableInput"
    assert error["message"].startswith("the input cannot be handed to Python (") and "the function was not called" in (
        error["message"]
    )
    assert all("\ufffd" not in str(s) for s in seen) and len(seen) >= 1
