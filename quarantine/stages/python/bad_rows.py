"""Group testing: find the rows of a failing vectorized batch whose own call fails.

In vectorized mode the function is called on the whole batch first. When that
call fails, :class:`BadRowSearch` calls it on parts of the batch, each part with
a fresh ``RangeIndex`` as if it were the whole batch. A row gets an error only
when its own one-row call fails, and it gets that call's error; every other row
gets its result from a call that succeeded. The order of calls:

* rows are called in order, in groups. A group that succeeds makes the next
  one twice as large. A group that fails is halved towards its first bad row
  (when the left half succeeds the right half holds the failure, and is not
  called), and the next group is as large as the run of good rows just
  before that bad row: scattered poison meets groups about the size of the
  gap between bad rows, a run of poison meets one-row calls;
* rows further on with the same input value as a bad row (a plain input;
  struct inputs are not compared) are set aside and called after the rest,
  one row at a time (growing again if they succeed): poison is often one
  repeated value (``"n/a"``, ``""``), and the rest of the batch then has no
  more of it. Only the order of calls changes.

Cost model, for a batch of *n* rows of which *k* are bad: no bad row → 1
call; otherwise, for a function that fails exactly on calls holding a bad
row, at most ``3 + 2⌈log2(n+1)⌉ + 2k(log2(2n/k) + 1)`` calls, typically
about ``k(log2(n/k) + 3)``, and about ``k + 2⌈log2 n⌉`` when the bad rows
share a few values; a good row is passed about twice (the failed whole call,
then the group that succeeds). Measurements: ``benchmarks/README.md``
(``bench_vectorized_fallback``).

A function whose output for a row depends on other rows (a batch mean, a
rank) must not run in vectorized mode: the search changes the batches it sees.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from quarantine.errorhandling.retry import RetryOutcome

if TYPE_CHECKING:  # pandas is imported where a batch is searched (executors), not with the stage table
    import pandas as pd

__all__ = ["BadRowSearch", "VectorizedCalls", "to_pandas"]


class VectorizedCalls(Protocol):
    """What the search needs of the batch runner (:class:`quarantine.stages.python.arrow_batch.ArrowCalls`)."""

    def _attempt(self, operation: Callable[[], Any]) -> RetryOutcome[Any]:
        """Run one call: retried under the policy when there is one, else once."""

    def _call_vectorized(self, arg: pd.Series | pd.DataFrame, n: int) -> tuple[pa.Array, list[str]]:
        """One call of the function on ``arg`` (``n`` rows): its results and the returned fields
        ``returns:`` does not declare; raises when any row did not work out."""

    def _error(self, exc: BaseException, attempt: RetryOutcome[Any] | None = None) -> dict[str, Any]:
        """The error struct of a failed call, as a dict."""

    def _arrow_returns(self) -> pa.DataType:
        """The Arrow type of the function's results."""


class BadRowSearch:
    """Finds the bad rows of one vectorized batch (see the module docstring).

    Rows are addressed by their position among the batch's rows not skipped
    (*local* positions 0..m-1). The batch is called whole; when that fails it
    is scanned as *streams*, ascending arrays of local positions: the whole
    batch first, then each set of rows set aside for repeating a bad row's
    input value. Every result comes from a call that succeeded on its rows,
    every error from a failed one-row call.
    """

    def __init__(
        self,
        runner: VectorizedCalls,
        inputs: pa.Array,
        todo: np.ndarray,
        retried: dict[int, int],
        *,
        same_values: bool = True,
        batch: pd.Series | pd.DataFrame | None = None,
    ) -> None:
        self.runner = runner
        self.inputs = inputs
        self.todo = todo
        self.retried = retried
        self.same_values = same_values
        self._converted = batch
        self.errors: dict[int, dict[str, Any]] = {}
        #: the rows whose successful call returned fields ``returns:`` does not declare, and those fields
        self.undeclared: dict[int, list[str]] = {}
        self.ok_pos: list[np.ndarray] = []
        self.ok_val: list[pa.Array] = []
        self.streams: deque[np.ndarray] = deque()
        self.batch: pd.Series | pd.DataFrame | None = None
        self._codes: np.ndarray | None = None
        self._counts: np.ndarray | None = None

    def run(self) -> None:
        m = len(self.todo)
        if not m:
            return
        self.batch = self._converted if self._converted is not None else to_pandas(self.inputs)
        whole = np.arange(m)
        failed = self.call(whole)
        if failed is None:
            return
        self.scan(whole, failed)
        while self.streams:
            self.scan(self.streams.popleft(), None)

    def call(self, local: np.ndarray) -> RetryOutcome[Any] | None:
        """Call the function on these rows (retried under the policy); None when it succeeded."""
        n = len(local)
        attempt = self.runner._attempt(partial(self._call_once, local))
        first = int(self.todo[local[0]])
        if attempt.error is None:
            if attempt.attempts > 1:  # one call retried: its retries count once, on its first row
                self.retried[first] = self.retried.get(first, 0) + attempt.attempts - 1
            positions = self.todo[local] if n < len(self.todo) else self.todo
            assert attempt.value is not None  # a call that succeeded returned its results
            values, extra = attempt.value
            self.ok_pos.append(positions)
            self.ok_val.append(values)
            if extra:
                self.undeclared.update(dict.fromkeys(positions.tolist(), extra))
            return None
        if n == 1:
            self.errors[first] = self.runner._error(attempt.error, attempt)
        return attempt

    def _call_once(self, local: np.ndarray) -> tuple[pa.Array, list[str]]:
        assert self.batch is not None
        # a new object per attempt: whatever fn does to its argument, the batch and a retry do not see it
        return self.runner._call_vectorized(_subset(self.batch, local), len(local))

    def scan(self, stream: np.ndarray, failed: RetryOutcome[Any] | None) -> None:
        """Find the bad rows of ``stream``; ``failed``: a failed call of the whole stream, if made."""
        n = len(stream)
        p = 0  # rows before p are done
        group = 1  # the next group's size
        gap = 0  # good rows since the last bad one
        end = n if failed is not None else None  # stream[p:end] holds a failure, when known
        last = failed  # the failed call of stream[p:end], or None when inferred (not called)
        while p < n:
            if end is None:
                hi = min(n, p + group)
                last = self.call(stream[p:hi])
                if last is None:
                    gap += hi - p
                    p, group = hi, group * 2
                    continue
                end = hi
            lo, hi = p, end
            while hi - lo > 1:  # the first bad row of stream[lo:hi]
                mid = (lo + hi) // 2
                left = self.call(stream[lo:mid])
                if left is None:
                    gap += mid - lo
                    lo, last = mid, None
                else:
                    hi, last = mid, left
            if last is None:  # inferred: the row's own call gives its error (or, fn not row-wise, its result)
                last = self.call(stream[lo : lo + 1])
            if last is None:
                gap += 1
            else:
                stream, n = self._set_aside_same_value(stream, lo)
                group, gap = _floor_pow2(gap + 1), 0
            p, end, last = lo + 1, None, None

    def _set_aside_same_value(self, stream: np.ndarray, bad: int) -> tuple[np.ndarray, int]:
        """Move the rows after ``stream[bad]`` with its input value into a stream of their own."""
        if not self.same_values or bad + 1 >= len(stream):
            return stream, len(stream)
        codes, counts = self._value_codes()
        if codes is None or counts is None:
            return stream, len(stream)
        code = codes[stream[bad]]
        if counts[code] < 2:
            return stream, len(stream)
        counts[code] = 0  # set aside once: later rows of this value are all in that stream
        tail = stream[bad + 1 :]
        same = codes[tail] == code
        if not same.any():
            return stream, len(stream)
        self.streams.append(tail[same])
        rest = np.concatenate((stream[: bad + 1], tail[~same]))
        return rest, len(rest)

    def _value_codes(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each row's input value as an integer code, and how often each code occurs (once per batch)."""
        if self._codes is None and self.same_values:
            try:
                encoded = self.inputs.dictionary_encode(null_encoding="encode")
                self._codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
                self._counts = np.bincount(self._codes)
            except (pa.ArrowException, TypeError, ValueError):  # e.g. structs: no dictionary encoding
                self.same_values = False
        return self._codes, self._counts

    def results(self) -> tuple[np.ndarray, pa.Array]:
        """The successful rows' positions (ascending) and results."""
        at = self.runner._arrow_returns()
        if not self.ok_val:
            return np.zeros(0, dtype=np.int64), pa.array([], type=at)
        if len(self.ok_val) == 1:  # a clean batch: its one call
            return self.ok_pos[0], self.ok_val[0]
        pos = np.concatenate(self.ok_pos)
        vals = pa.concat_arrays(self.ok_val)
        if len(pos) > 1 and not bool((pos[1:] > pos[:-1]).all()):  # streams set aside finish later
            order = np.argsort(pos, kind="stable")
            pos, vals = pos[order], vals.take(pa.array(order))
        return pos, vals


def _subset(batch: pd.Series | pd.DataFrame, local: np.ndarray) -> pd.Series | pd.DataFrame:
    """The rows ``local`` (ascending) of the batch, with a fresh RangeIndex as if they were the batch.

    A new object sharing the batch's data (copy-on-write: changing it copies).
    """
    import pandas as pd  # loaded already: ``batch`` is a pandas object

    n = len(local)
    if n == len(batch):
        return batch.copy(deep=False)
    lo = int(local[0])
    part = batch.iloc[lo : lo + n] if int(local[-1]) - lo == n - 1 else batch.take(local)
    part.index = pd.RangeIndex(n)
    return part


def _floor_pow2(x: int) -> int:
    """The largest power of two ≤ ``x`` (1 for x ≤ 1)."""
    return 1 << (max(x, 1).bit_length() - 1)


def to_pandas(values: pa.Array) -> pd.Series | pd.DataFrame:
    """A struct as a DataFrame (one column per field), anything else as a Series."""
    if isinstance(values, pa.StructArray):
        return pa.Table.from_struct_array(values).to_pandas()
    return values.to_pandas()
