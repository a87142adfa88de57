"""``python``: run a user's Python function as a stage, Arrow-batched, one error per bad row.

The function is given by dotted path in YAML (``function: mypkg.orders.enrich``)
or as an object from a notebook (:func:`python_stage`). It runs inside one
Arrow UDF (:func:`pyspark.sql.functions.arrow_udf`) that receives a whole
Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10,000 by
default) and returns the stage's whole ``STRUCT<result: T, error: ERROR_STRUCT>``
column, so there is no per-row Spark or pickle overhead and an exception never
fails the task.

Modes:

``row`` (default)
    ``fn(value) -> value`` is called once per element, in a Python loop over the
    batch, each call inside its own ``try``. An element whose call raises becomes
    an error: ``error_class`` is the exception's class name, ``message`` is
    ``str(exc)``, ``stacktrace`` is kept only when the pipeline asks for it.
    Cost: one Python call per row plus Arrow↔Python conversion of the batch;
    a poison row costs exactly what a good row costs.

``vectorized``
    ``fn(pd.Series) -> pd.Series`` (same length, row *i* of the output depending
    only on row *i* of the input) is called on the whole batch. If that call
    raises (or returns the wrong length, values that do not convert to
    ``returns``, or NULLs when ``nullable`` is false), the batch is searched for
    its bad rows by calling the function on parts of it, each part with a fresh
    ``RangeIndex`` as if it were the whole batch. A row gets an error only when
    its own one-row call fails, and it gets that call's error; every other row
    gets its result from a call that succeeded. The search is group testing:

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
    then the group that succeeds). Measured (pure Python, CPU time, one
    10,000-row batch of strings, ``astype(float)``,
    ``benchmarks/bench_vectorized_fallback.py``, 2 loaded vCPUs): clean 2.3 ms;
    1% poison of one repeated value 127 calls, 12 ms (5x clean); 1% of
    all-distinct values 1,009 calls, 69 ms (30x); 0.1% 37 / 139 calls, 8 / 17 ms;
    10% 1,027 / 7,008 calls, 50 / 430 ms. The first implementation (bisecting a
    failing call down to one row) made 1,527 calls at 1% (105 ms, over 40x);
    calling a failing batch again row by row makes 10,001 calls (~700 ms), fixed
    chunks of 64 rows 6,558 (~480 ms). A one-row call of a pandas function costs
    40-70 µs and every bad row needs its own, so 1% poison cannot cost less than
    about 3x clean here; in Spark the batch's other costs dilute it: 1M rows, 1%
    ``"n/a"`` (``benchmarks/bench_python_stage.py``), 2.27 s against 1.14 s clean
    (2.0x; bisection: 12.1x). Row mode with ``float`` takes 3-6 ms at any of
    these poison rates, so prefer it for dirty inputs. A function whose output
    for a row depends on other rows (a batch mean, a rank) must not run in this
    mode: the search changes the batches it sees.

Inputs: a plain column arrives as its Python value (row mode) or a
``pd.Series`` (vectorized). A struct input (e.g. the ``json`` stage's result)
arrives as a ``dict`` per row in row mode and as a ``pd.DataFrame`` with one
column per field in vectorized mode. A NULL input is passed as ``None``
(row mode) or as a row of nulls.

Results: ``returns`` is a Spark DDL type (``INT``, ``DECIMAL(10,2)``,
``a INT, b STRING`` for a struct). A struct result is a ``dict`` per row, or
(vectorized) a ``pd.DataFrame`` with those columns. A result that is None
(or NaN in pandas) is an error ``NullResult`` unless ``nullable: true``; a
result that does not convert to ``returns`` is an error ``ResultTypeMismatch``.
Naive ``datetime`` results for TIMESTAMP are read as UTC.

Chaining: Spark evaluates a UDF on every row before any ``CASE WHEN`` around it,
so the stage passes :attr:`StageContext.skip` into the UDF and never calls the
function on a row an earlier stage failed.

Retries: when :attr:`StageContext.retry` is a :class:`quarantine.retry.RetryPolicy`
with a budget (``errors.retry.timeout`` ≠ 0), a call that raises a retriable
exception (the policy's classes — ``errors.retry.retriable.exceptions`` — or
this stage's ``retriable`` classes) is retried with backoff and jitter, per row
in row mode and per call (before any splitting) in vectorized mode, so a
transient outage does not explode into one-row calls. The error records
``retriable`` and ``attempts`` (calls made for that row or call). Without a
policy every call is made once and ``retriable`` still marks the error. The
budget is per call: under a long outage, row mode spends up to
``rows x errors.retry.timeout`` per batch, so keep that budget small for
Python stages.

Options::

    function: mypkg.orders.enrich        # or mypkg.orders:enrich
    returns: "DECIMAL(10,2)"
    mode: row | vectorized               # default row
    nullable: false                      # None results are errors unless true
    retriable: [requests.Timeout]        # exception classes marked retriable
"""

from __future__ import annotations

import importlib
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property, partial
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, IntegerType, StructField, StructType

from quarantine.config import StageSpec, Tolerance
from quarantine.errors import ConfigError, message_of
from quarantine.retry import RetryOutcome, RetryPolicy, RetryWithToleranceOperator
from quarantine.schema import ERROR_STRUCT, ErrorKind, result_struct
from quarantine.stage import HIDDEN_PREFIX, Stage, StageContext
from quarantine.stage_types import PythonOptions
from quarantine.stages._values import parse_spark_type, type_name

__all__ = [
    "PythonErrorClass",
    "PythonMode",
    "PythonStage",
    "from_spec",
    "python_stage",
    "resolve_callable",
]

_SNIPPET = 64


class PythonMode(StrEnum):
    """How the function is called: once per element, or once per batch (and on parts of a failing one)."""

    ROW = "row"
    VECTORIZED = "vectorized"


class PythonErrorClass(StrEnum):
    """Error classes the stage itself reports (otherwise: the exception's class name)."""

    NULL_RESULT = "NullResult"
    RESULT_TYPE_MISMATCH = "ResultTypeMismatch"


@dataclass(frozen=True, repr=False)
class PythonStage(Stage):
    """A user function as a stage (see the module docstring for modes and costs).

    Attributes:
        name: stage name.
        fn: the function; must be picklable (module-level, or a closure in a notebook).
        returns: the result type ``T``.
        mode: ``row`` or ``vectorized``.
        input: the column or stage read (default: the previous stage).
        nullable: whether a None result is a success (NULL result) or an error.
        retriable: exception classes whose errors are marked ``retriable``.
        kind: ``transform``.
    """

    name: str
    fn: Callable[..., Any]
    returns: DataType
    mode: PythonMode = PythonMode.ROW
    input: str | None = None
    nullable: bool = False
    retriable: tuple[type[BaseException], ...] = ()
    kind: ErrorKind = field(default=ErrorKind.TRANSFORM)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(f"stage {self.name}: function", self.fn, "a callable")
        _arrow_type(self.returns, f"stage {self.name}: returns")

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql.pandas.functions import arrow_udf

        runner = _BatchRunner(
            stage=self.name,
            kind=self.kind.value,
            fn=self.fn,
            mode=self.mode,
            returns=self.returns,
            nullable=self.nullable,
            stacktrace=ctx.stacktrace,
            retriable=self.retriable,
            retry=_stage_policy(ctx.retry, self.retriable),
        )
        # The type hints of _BatchRunner.run (pa.Array, pa.Array -> pa.Array) make it a SCALAR Arrow UDF.
        factory: Any = arrow_udf  # its stubs insist on functionType; hints are preferred at runtime
        udf = factory(runner.run, _call_struct(self.returns))
        # computed once per row (its result, error and retries are read separately)
        call = ctx.once(_CALL, udf(value, ctx.skip))
        out: Column = call.dropFields("retries")  # one reference: the UDF runs once per row even unhoisted
        return out

    def retries(self, column: Column) -> Column:
        """Retries of this row's successful call (see :class:`quarantine.stage.ReportsRetries`)."""
        return F.col(f"{HIDDEN_PREFIX}{self.name}_{_CALL}").getField("retries")


_CALL = "call"


def _call_struct(returns: DataType) -> StructType:
    """What the Arrow UDF returns: the result column's fields plus ``retries INT``."""
    out = result_struct(returns)
    return StructType([*out.fields, StructField("retries", IntegerType())])


def _arrow_type(t: DataType, key: str) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(t)
    except Exception as exc:  # pyspark raises several types for unsupported types
        raise ConfigError(key, type_name(t), f"a type Arrow UDFs can return ({exc})") from None


class _ResultError(ValueError):
    """The function's output did not fit ``returns`` (reported as ``error_class``)."""

    def __init__(self, error_class: PythonErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(frozen=True)
class _BatchRunner:
    """The code that runs on the executors, one Arrow batch at a time.

    Output rows: skipped → ``{result: NULL, error: NULL}`` (the chaining rule
    replaces them with the upstream error); otherwise exactly one of result
    and error is set.
    """

    stage: str
    kind: str
    fn: Callable[..., Any]
    mode: PythonMode
    returns: DataType
    nullable: bool
    stacktrace: bool
    retriable: tuple[type[BaseException], ...]
    retry: RetryPolicy | None = None

    def run(self, values: pa.Array, skip: pa.Array) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        todo = np.flatnonzero(~_as_bool(skip))
        retried: dict[int, int] = {}
        if self.mode is PythonMode.ROW:
            results, errors = self._run_rows(values, todo, retried)
        else:
            results, errors = self._run_vectorized(values, todo, retried)
        return self._assemble(len(values), results, errors, retried)

    # ------------------------------------------------------------------ row mode

    def _run_rows(
        self, values: pa.Array, todo: np.ndarray, retried: dict[int, int]
    ) -> tuple[tuple[np.ndarray, pa.Array], dict[int, dict[str, Any]]]:
        at = self._arrow_returns()
        inputs = _rows(values, todo).to_pylist()
        fn = self.fn
        ok_pos: list[int] = []
        ok_val: list[Any] = []
        errors: dict[int, dict[str, Any]] = {}
        retrying = self.retry is not None and self.retry.retries_enabled
        for pos, x in zip(todo.tolist(), inputs, strict=True):
            if retrying:
                attempt = self._attempt(partial(fn, x))
                if attempt.error is not None:
                    errors[pos] = self._error(attempt.error, attempt)
                    continue
                if attempt.attempts > 1:
                    retried[pos] = attempt.attempts - 1
                out = attempt.value
            else:  # the hot path: no operator, no closure
                try:
                    out = fn(x)
                except Exception as exc:
                    errors[pos] = self._error(exc)
                    continue
            if out is None and not self.nullable:
                errors[pos] = self._null_result(x)
                continue
            ok_pos.append(pos)
            ok_val.append(out)
        try:
            arr = pa.array(ok_val, type=at)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            arr, ok_pos = self._convert_each(ok_pos, ok_val, errors)
        return (np.asarray(ok_pos, dtype=np.int64), arr), errors

    def _convert_each(
        self, positions: list[int], outs: list[Any], errors: dict[int, dict[str, Any]]
    ) -> tuple[pa.Array, list[int]]:
        """Slow path: find which results do not convert to ``returns``."""

        at = self._arrow_returns()
        keep_pos: list[int] = []
        keep_val: list[Any] = []
        for pos, out in zip(positions, outs, strict=True):
            try:
                pa.array([out], type=at)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                errors[pos] = self._error(self._mismatch(out, exc))
                continue
            keep_pos.append(pos)
            keep_val.append(out)
        return pa.array(keep_val, type=at), keep_pos

    # ------------------------------------------------------------ vectorized mode

    def _run_vectorized(
        self, values: pa.Array, todo: np.ndarray, retried: dict[int, int]
    ) -> tuple[tuple[np.ndarray, pa.Array], dict[int, dict[str, Any]]]:
        search = _Search(self, _rows(values, todo), todo, retried)
        search.run()
        return search.results(), search.errors

    def _call_vectorized(self, arg: pd.Series | pd.DataFrame, n: int) -> pa.Array:
        """One call of the function on ``arg`` (``n`` rows); raises when any row did not work out."""
        out = self.fn(arg)
        arr = self._from_pandas(out, n)
        if not self.nullable and arr.null_count:
            first = arr.is_null().to_pylist().index(True)
            raise _ResultError(
                PythonErrorClass.NULL_RESULT,
                f"function returned None/NaN for {arr.null_count} of {n} row(s) "
                f"(first at row {first} of the call); expected {type_name(self.returns)} "
                "(set nullable: true to allow NULL results)",
            )
        return arr

    def _from_pandas(self, out: Any, n: int) -> pa.Array:
        at = self._arrow_returns()
        size = len(out) if hasattr(out, "__len__") else -1
        if size != n:
            raise _ResultError(
                PythonErrorClass.RESULT_TYPE_MISMATCH,
                f"function returned {type(out).__name__} of length {size} for {n} input row(s); "
                "expected a Series of the same length",
            )
        try:
            if isinstance(out, pd.DataFrame) and isinstance(self.returns, StructType):
                cols = [pa.Array.from_pandas(out[f.name], type=at.field(f.name).type) for f in self.returns.fields]
                return pa.StructArray.from_arrays(cols, fields=list(at))
            if isinstance(out, pd.Series | pd.Index):
                return pa.Array.from_pandas(out, type=at)
            return pa.array(list(out), type=at, from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, KeyError) as exc:
            raise _ResultError(
                PythonErrorClass.RESULT_TYPE_MISMATCH,
                f"function returned values that are not {type_name(self.returns)} ({type(exc).__name__}: {exc})",
            ) from None

    # ------------------------------------------------------------------ both modes

    def _arrow_returns(self) -> pa.DataType:
        return self._arrow_types[0]

    @cached_property
    def _arrow_types(self) -> tuple[pa.DataType, pa.DataType, pa.DataType]:
        """Arrow types of the result, the error struct and the whole column (computed once)."""
        from pyspark.sql.pandas.types import to_arrow_type

        return (
            _arrow_type(self.returns, "returns"),
            to_arrow_type(ERROR_STRUCT),
            to_arrow_type(_call_struct(self.returns)),
        )

    def _null_result(self, x: Any) -> dict[str, Any]:
        return self._error(
            _ResultError(
                PythonErrorClass.NULL_RESULT,
                f"function returned None for input {_short(x)}; expected "
                f"{type_name(self.returns)} (set nullable: true to allow NULL results)",
            )
        )

    def _mismatch(self, out: Any, exc: BaseException) -> _ResultError:
        return _ResultError(
            PythonErrorClass.RESULT_TYPE_MISMATCH,
            f"function returned {_short(out)} ({type(out).__name__}); expected "
            f"{type_name(self.returns)} ({type(exc).__name__}: {exc})",
        )

    def _attempt(self, operation: Callable[[], Any]) -> RetryOutcome[Any]:
        """Run one call: retried under the policy when there is one, else once."""
        if self.retry is not None and self.retry.retries_enabled:
            operator = RetryWithToleranceOperator(self.retry, Tolerance.ALL)
            return operator.execute(operation, name=self.stage)
        try:
            return RetryOutcome(operation(), None, 1)
        except Exception as exc:
            return RetryOutcome(None, exc, 1, self._is_retriable(exc))

    def _is_retriable(self, exc: BaseException) -> bool:
        if self.retriable and isinstance(exc, self.retriable):
            return True
        return self.retry is not None and self.retry.retriable(exc)

    def _error(self, exc: BaseException, attempt: RetryOutcome[Any] | None = None) -> dict[str, Any]:
        error_class = exc.error_class.value if isinstance(exc, _ResultError) else type(exc).__name__
        message = message_of(exc)
        trace = "".join(traceback.format_exception(exc)) if self.stacktrace else None
        return {
            "stage": self.stage,
            "kind": self.kind,
            "error_class": error_class,
            "message": message,
            "stacktrace": trace,
            "retriable": attempt.retriable if attempt is not None else self._is_retriable(exc),
            "attempts": attempt.attempts if attempt is not None else 1,
        }

    def _assemble(
        self,
        n: int,
        results: tuple[np.ndarray, pa.Array],
        errors: dict[int, dict[str, Any]],
        retried: dict[int, int],
    ) -> pa.Array:
        """Scatter the successes and the errors back to their rows (nulls elsewhere).

        The third field, ``retries``, holds the retries of successful calls (read by
        :meth:`PythonStage.retries` for ``total-retries``; failed rows carry theirs in
        ``error.attempts``).
        """
        _, err_type, out_type = self._arrow_types
        ok_pos, ok_val = results
        # Fast path: every row succeeded, in order (no skip, no error) — no scatter.
        result = ok_val if len(ok_pos) == n else ok_val.take(_scatter_index(n, ok_pos))
        if errors:
            err_pos = sorted(errors)
            err_val = pa.array([errors[p] for p in err_pos], type=err_type)
            error = err_val.take(_scatter_index(n, err_pos))
        else:
            error = pa.nulls(n, type=err_type)
        counts = np.zeros(n, dtype=np.int32)
        for pos, k in retried.items():
            counts[pos] = k
        return pa.StructArray.from_arrays([result, error, pa.array(counts, type=pa.int32())], fields=list(out_type))


class _Search:
    """Finds the bad rows of one vectorized batch (the search of the module docstring).

    Rows are addressed by their position among the batch's rows not skipped
    (*local* positions 0..m-1). The batch is called whole; when that fails it
    is scanned as *streams*, ascending arrays of local positions: the whole
    batch first, then each set of rows set aside for repeating a bad row's
    input value. Every result comes from a call that succeeded on its rows,
    every error from a failed one-row call.
    """

    def __init__(
        self,
        runner: _BatchRunner,
        inputs: pa.Array,
        todo: np.ndarray,
        retried: dict[int, int],
        *,
        same_values: bool = True,
    ) -> None:
        self.runner = runner
        self.inputs = inputs
        self.todo = todo
        self.retried = retried
        self.same_values = same_values
        self.errors: dict[int, dict[str, Any]] = {}
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
        self.batch = _to_pandas(self.inputs)
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
            self.ok_pos.append(self.todo[local] if n < len(self.todo) else self.todo)
            self.ok_val.append(attempt.value)
            return None
        if n == 1:
            self.errors[first] = self.runner._error(attempt.error, attempt)
        return attempt

    def _call_once(self, local: np.ndarray) -> pa.Array:
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


def _stage_policy(retry: object | None, retriable: tuple[type[BaseException], ...]) -> RetryPolicy | None:
    """The pipeline's retry policy, also treating the stage's ``retriable`` classes as retriable."""
    if not isinstance(retry, RetryPolicy):
        return None
    if not retriable:
        return retry
    names = {f"{c.__module__}.{c.__qualname__}" for c in retriable}
    classifier = replace(retry.retriable, names=retry.retriable.names | names)
    return replace(retry, retriable=classifier)


def _rows(values: pa.Array, positions: np.ndarray) -> pa.Array:
    """``values[positions]`` (positions ascending); no copy when that is every row."""
    if len(positions) == len(values):
        return values
    return values.take(pa.array(positions, type=pa.int64()))


def _to_pandas(values: pa.Array) -> pd.Series | pd.DataFrame:
    """A struct as a DataFrame (one column per field), anything else as a Series."""
    if isinstance(values, pa.StructArray):
        return pa.Table.from_struct_array(values).to_pandas()
    return values.to_pandas()


def _scatter_index(n: int, positions: Sequence[int] | np.ndarray) -> pa.Array:
    """An index array of length ``n``: row ``positions[j]`` takes ``j``, other rows null."""

    idx = np.full(n, -1, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    idx[pos] = np.arange(len(pos), dtype=np.int64)
    return pa.array(idx, mask=idx < 0)


def _as_bool(skip: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(skip, pa.ChunkedArray):
        skip = skip.combine_chunks()
    filled = skip.fill_null(False) if skip.null_count else skip
    out: np.ndarray = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)
    return out


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


# ---------------------------------------------------------------------- building


def resolve_callable(path: object, key: str) -> Callable[..., Any]:
    """Import ``pkg.mod.fn`` (or ``pkg.mod:fn``, or ``pkg.mod.Class.method``).

    Raises:
        ConfigError: naming ``key`` when the module does not import, the
            attribute does not exist, or it is not callable.
    """
    if not isinstance(path, str) or not path.strip() or "." not in path.replace(":", "."):
        raise ConfigError(key, path, "a dotted path to a function, e.g. mypkg.orders.enrich")
    path = path.strip()
    if ":" in path:
        head, _, tail = path.partition(":")
        candidates = [(head, tail.split("."))]
    else:
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    last_error: BaseException | None = None
    for module_name, attrs in candidates:
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            last_error = exc
            continue
        except Exception as exc:  # the module itself raised while importing
            raise ConfigError(
                key,
                path,
                f"an importable function (importing {module_name} raised {type(exc).__name__}: {exc})",
            ) from None
        try:
            for a in attrs:
                obj = getattr(obj, a)
        except AttributeError:
            raise ConfigError(
                key,
                path,
                f"a function defined in module {module_name} (it has no {'.'.join(attrs)})",
            ) from None
        if not callable(obj):
            raise ConfigError(key, path, f"a callable (found {type(obj).__name__})")
        fn: Callable[..., Any] = obj
        return fn
    raise ConfigError(key, path, f"an importable function ({last_error})")


def _exception_classes(raw: object, key: str) -> tuple[type[BaseException], ...]:
    if raw is None:
        return ()
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list):
        raise ConfigError(key, raw, "a list of exception classes (dotted paths, or builtins)")
    out: list[type[BaseException]] = []
    for j, name in enumerate(names):
        k = f"{key}[{j}]"
        if isinstance(name, str) and "." not in name:
            import builtins

            cls = getattr(builtins, name, None)
        else:
            cls = resolve_callable(name, k)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise ConfigError(k, name, "an exception class, e.g. TimeoutError or requests.Timeout")
        out.append(cls)
    return tuple(out)


def python_stage(
    name: str,
    fn: Callable[..., Any],
    returns: str | DataType,
    mode: PythonMode | str = PythonMode.ROW,
    input: str | None = None,
    *,
    nullable: bool = False,
    retriable: tuple[type[BaseException], ...] = (),
) -> PythonStage:
    """A Python-function stage for notebooks (the same stage YAML's ``type: python`` builds).

    Args:
        name: the stage name (and result column).
        fn: ``fn(value)`` in row mode, ``fn(pd.Series) -> pd.Series`` in vectorized mode.
        returns: the result type, as a DataType or a DDL string (``"DECIMAL(10,2)"``).
        mode: ``"row"`` (default) or ``"vectorized"``.
        input: the column or stage read (default: the previous stage).
        nullable: a None result is a success (NULL result) instead of ``NullResult``.
        retriable: exception classes whose errors are marked retriable.

    Raises:
        ConfigError: ``fn`` is not callable, or ``returns``/``mode`` is not valid.
    """
    rtype = returns if isinstance(returns, DataType) else parse_spark_type(returns, "returns")
    try:
        m = PythonMode(str(mode))
    except ValueError:
        raise ConfigError("mode", mode, "row | vectorized") from None
    return PythonStage(
        name=name,
        fn=fn,
        returns=rtype,
        mode=m,
        input=input,
        nullable=nullable,
        retriable=tuple(retriable),
    )


def from_spec(spec: StageSpec, options: PythonOptions) -> PythonStage:
    """The stage ``spec`` declares, from its validated options (see the module docstring).

    Raises:
        ConfigError: naming ``stages[i].options.<key>``: the function does not import,
            ``returns`` is not a Spark type Arrow carries, a retriable class is not an exception.
    """
    returns = parse_spark_type(options.returns, spec.key("options.returns"))
    _arrow_type(returns, spec.key("options.returns"))
    return PythonStage(
        name=spec.name,
        fn=resolve_callable(options.function, spec.key("options.function")),
        returns=returns,
        mode=PythonMode(options.mode),
        input=spec.input,
        nullable=options.nullable,
        retriable=_exception_classes(options.retriable, spec.key("options.retriable")),
    )
