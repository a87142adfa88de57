"""The python stage's executor side: one Arrow batch in, the stage's call column out.

:class:`ArrowCalls` is what the stage's Arrow UDF runs on the executors (its
``run`` is pickled and shipped to the Python workers with the user's function).
It receives a whole Arrow batch of the stage's input and the rows to skip, and
returns ``STRUCT<result: T, error: ERROR_STRUCT, retries: INT, undeclared: ARRAY<STRING>>``
for the batch (:func:`call_struct`):

* a skipped row (an earlier stage failed it) → ``{result: NULL, error: NULL}``;
  the function is not called on it;
* otherwise exactly one of ``result`` and ``error`` is set.

Row mode calls the function once per element, each call in its own ``try``;
vectorized mode calls it on the whole batch and, when that fails, lets
:class:`quarantine.stages.python.bad_rows.BadRowSearch` find the bad rows. An
exception never fails the task.

A struct result is checked against ``returns``: a declared field it leaves out
fails the row (``MissingResultField``) or is NULL (``missing_fields: as_null``);
the fields it returns that ``returns`` does not declare are listed in the row's
``undeclared``. An input Python cannot be given (a STRING that is not UTF-8)
fails its row alone (``UnreadableInput``), the function not called on it.

Errors: ``error_class`` is the exception's class name, or
:class:`PythonErrorClass` for a result that does not fit ``returns``;
``message`` is ``str(exc)``; ``stacktrace`` is kept only when asked for;
``retriable`` and ``attempts`` come from the retry policy's outcome.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from quarantine.errorhandling.retry import RetryOutcome, RetryPolicy, RetryWithToleranceOperator
from quarantine.errorhandling.settings import Tolerance
from quarantine.errors import ConfigError, message_of
from quarantine.schema import result_struct
from quarantine.stages.python.bad_rows import BadRowSearch, to_pandas
from quarantine.values.spark import type_name

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "RETRIES",
    "UNDECLARED",
    "ArrowCalls",
    "MissingFields",
    "PythonErrorClass",
    "PythonMode",
    "PythonOutput",
    "ResultError",
    "arrow_type",
    "call_struct",
    "take_rows",
]

_SNIPPET = 64


class PythonMode(StrEnum):
    """How the function is called: once per element, or once per batch (and on parts of a failing one)."""

    ROW = "row"
    VECTORIZED = "vectorized"


class PythonOutput(StrEnum):
    """What the stage's result is: its input struct plus the returned fields, or what the function returns."""

    EXTEND = "extend"
    """A struct input's fields, each returned field set on it (replaced in place, or added after them); a
    scalar ``returns:`` is one field named after the stage. Over an input that is not a struct, as replace."""
    REPLACE = "replace"
    """What the function returns, alone: the input's fields it does not return are not in the result."""


class MissingFields(StrEnum):
    """What a struct result that leaves out a field ``returns:`` declares does."""

    QUARANTINE = "quarantine"
    """The record fails (``MissingResultField``, naming the fields)."""
    AS_NULL = "as_null"
    """The field is NULL, as an explicit None is."""


class PythonErrorClass(StrEnum):
    """Error classes the stage itself reports (otherwise: the exception's class name)."""

    NULL_RESULT = "NullResult"
    RESULT_TYPE_MISMATCH = "ResultTypeMismatch"
    MISSING_RESULT_FIELD = "MissingResultField"
    UNREADABLE_INPUT = "UnreadableInput"


#: The call struct's field listing, per row, the returned fields ``returns:`` does not declare.
UNDECLARED = "undeclared"
#: The call struct's field counting a successful row's retries.
RETRIES = "retries"


def call_struct(returns: DataType) -> StructType:
    """What the Arrow UDF returns: the result column's fields plus ``retries INT`` and
    ``undeclared ARRAY<STRING>`` (the returned fields ``returns:`` does not declare; NULL when none)."""
    from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

    out = result_struct(returns)
    return StructType([
        *out.fields, StructField(RETRIES, IntegerType()), StructField(UNDECLARED, ArrayType(StringType())),
    ])


def arrow_type(t: DataType, key: str) -> pa.DataType:
    """The Arrow type of ``t``; a ConfigError naming ``key`` when an Arrow UDF cannot return it."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(t)
    except Exception as exc:  # pyspark raises several types for unsupported types
        raise ConfigError(key, type_name(t), f"a type Arrow UDFs can return ({exc})") from None


class ResultError(ValueError):
    """A record the stage itself fails, reported as ``error_class``: the function's output did not fit
    ``returns``, or its input could not be handed to Python (the function was not called)."""

    def __init__(self, error_class: PythonErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(frozen=True)
class ArrowCalls:
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
    #: extend: a returned field that is the input's, handed back unchanged, is not undeclared
    output: PythonOutput = PythonOutput.REPLACE
    missing_fields: MissingFields = MissingFields.QUARANTINE

    def run(self, values: pa.Array, skip: pa.Array) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        todo = np.flatnonzero(~_as_bool(skip))
        retried: dict[int, int] = {}
        undeclared: dict[int, list[str]] = {}
        if self.mode is PythonMode.ROW:
            results, errors = self._run_rows(values, todo, retried, undeclared)
        else:
            results, errors = self._run_vectorized(values, todo, retried, undeclared)
        return self._assemble(len(values), results, errors, retried, undeclared)

    @cached_property
    def _declared(self) -> tuple[str, ...] | None:
        """The fields a struct ``returns:`` declares; None for any other type."""
        from pyspark.sql.types import StructType

        return tuple(self.returns.fieldNames()) if isinstance(self.returns, StructType) else None

    def _fields_of(self, out: Any, given: Any) -> tuple[Any, list[str]]:
        """A row's struct result checked against ``returns:``: the result to convert (missing fields
        filled with None under ``missing_fields: as_null``) and the returned fields it does not
        declare (``given``: the row's input, whose unchanged fields extend does not count).

        Raises:
            ResultError: ``MissingResultField`` naming the declared fields the result leaves out.
        """
        declared = self._declared
        if declared is None:
            return out, []
        if isinstance(out, tuple) and hasattr(out, "__fields__") and hasattr(out, "asDict"):  # a named Row
            out = out.asDict()
        if not isinstance(out, Mapping):
            return out, []  # a tuple: in field order, its length checked by Arrow
        missing = [f for f in declared if f not in out]
        if missing:
            out = self._fill_missing(out, missing)
        extra = [] if len(out) == len(declared) else self._undeclared(out, given)
        return out, extra

    def _fill_missing(self, out: Mapping[str, Any], missing: Sequence[str]) -> dict[str, Any]:
        if self.missing_fields is MissingFields.QUARANTINE:
            raise self._missing(missing)
        return {**out, **dict.fromkeys(missing)}

    def _missing(self, missing: Sequence[str]) -> ResultError:
        names = ", ".join(f"'{m}'" for m in missing)
        them = "it" if len(missing) == 1 else "them"
        return ResultError(
            PythonErrorClass.MISSING_RESULT_FIELD,
            f"the function's result has no {names} (returns: declares {them}; return None for a NULL, "
            f"or set missing_fields: {MissingFields.AS_NULL})",
        )

    def _undeclared(self, out: Mapping[str, Any], given: Any) -> list[str]:
        """The keys of ``out`` that ``returns:`` does not declare; under extend, not the input's own
        fields handed back unchanged (``{**event, …}``)."""
        declared = set(self._declared or ())
        same = self.output is PythonOutput.EXTEND and isinstance(given, Mapping)
        return sorted(
            str(k) for k, v in out.items()
            if k not in declared and not (same and k in given and (v is given[k] or _equal(v, given[k])))
        )

    # ------------------------------------------------------------------ row mode

    def _run_rows(
        self, values: pa.Array, todo: np.ndarray, retried: dict[int, int], undeclared: dict[int, list[str]]
    ) -> tuple[tuple[np.ndarray, pa.Array], dict[int, dict[str, Any]]]:
        at = self._arrow_returns()
        errors: dict[int, dict[str, Any]] = {}
        todo, _, inputs = self._readable(values, todo, errors, _as_python)
        fn = self.fn
        ok_pos: list[int] = []
        ok_val: list[Any] = []
        retrying = self.retry is not None and self.retry.retries_enabled
        checks_fields = self._declared is not None
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
            if out is None:
                if not self.nullable:
                    errors[pos] = self._null_result(x)
                    continue
            elif checks_fields:
                try:
                    out, extra = self._fields_of(out, x)
                except ResultError as exc:
                    errors[pos] = self._error(exc)
                    continue
                if extra:
                    undeclared[pos] = extra
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
        self, values: pa.Array, todo: np.ndarray, retried: dict[int, int], undeclared: dict[int, list[str]]
    ) -> tuple[tuple[np.ndarray, pa.Array], dict[int, dict[str, Any]]]:
        unreadable: dict[int, dict[str, Any]] = {}
        todo, rows, batch = self._readable(values, todo, unreadable, to_pandas)
        search = BadRowSearch(self, rows, todo, retried, batch=batch)
        search.run()
        undeclared.update(search.undeclared)
        return search.results(), {**unreadable, **search.errors}

    def _readable(
        self, values: pa.Array, todo: np.ndarray, errors: dict[int, dict[str, Any]], convert: Callable[[pa.Array], Any]
    ) -> tuple[np.ndarray, pa.Array, Any]:
        """The rows of ``todo`` whose input can be handed to Python, those inputs, and them ``convert``ed
        (to Python values, or pandas).

        A STRING whose bytes are not UTF-8 (Spark's ``CAST`` of a BINARY makes one) fails where Python
        decodes it: converting to Python values raises, and pandas, which keeps strings in Arrow, would
        raise inside the function; so for pandas a batch holding text is validated by Arrow first. Only
        when the batch fails that, or ``convert`` raises, is each row tried alone. Each row that fails
        gets an ``UnreadableInput`` error in ``errors``; the function is not called on it.
        """
        rows = take_rows(values, todo)
        check = convert is to_pandas and _has_text(rows.type)
        try:
            if check:
                rows.validate(full=True)
            return todo, rows, convert(rows)
        except Exception:  # whatever pyarrow or pandas raise for a value: found row by row below
            pass
        keep: list[int] = []
        for j, pos in enumerate(todo.tolist()):
            try:
                one = rows.take(pa.array([j], type=pa.int64()))  # a copy: a slice validates its whole parent
                one.validate(full=True)
                convert(one)
            except Exception as exc:  # whatever pyarrow or pandas raise for the value
                errors[pos] = self._error(ResultError(
                    PythonErrorClass.UNREADABLE_INPUT,
                    f"the input cannot be handed to Python ({type(exc).__name__}: {message_of(exc)}); "
                    "the function was not called",
                ))
                continue
            keep.append(pos)
        kept = np.asarray(keep, dtype=np.int64)
        rows = take_rows(values, kept)
        return kept, rows, convert(rows)

    def _call_vectorized(self, arg: pd.Series | pd.DataFrame, n: int) -> tuple[pa.Array, list[str]]:
        """One call of the function on ``arg`` (``n`` rows): its results and the returned columns
        ``returns:`` does not declare; raises when any row did not work out."""
        out = self.fn(arg)
        out, extra = self._columns_of(out, arg)
        arr = self._from_pandas(out, n)
        if not self.nullable and arr.null_count:
            first = arr.is_null().to_pylist().index(True)
            raise ResultError(
                PythonErrorClass.NULL_RESULT,
                f"function returned None/NaN for {arr.null_count} of {n} row(s) "
                f"(first at row {first} of the call); expected {type_name(self.returns)} "
                "(set nullable: true to allow NULL results)",
            )
        return arr, extra

    def _columns_of(self, out: Any, arg: pd.Series | pd.DataFrame) -> tuple[Any, list[str]]:
        """A vectorized call's struct result checked against ``returns:``, as :meth:`_fields_of` checks a row's:
        a DataFrame's columns, or each dict of a Series."""
        import pandas as pd

        declared = self._declared
        if declared is None:
            return out, []
        if isinstance(out, pd.DataFrame):
            missing = [f for f in declared if f not in out.columns]
            if missing:
                out = out.assign(**self._fill_missing({}, missing))
            extra = [] if len(out.columns) == len(declared) else self._undeclared_columns(out, arg)
            return out, extra
        if isinstance(out, pd.Series) and out.dtype == object:
            given = arg.to_dict("records") if isinstance(arg, pd.DataFrame) else [None] * len(out)
            checked = [
                self._fields_of(v, g) if v is not None else (v, [])
                for v, g in zip(out.tolist(), given, strict=False)
            ]
            extra = sorted({name for _, names in checked for name in names})
            return pd.Series([v for v, _ in checked], index=out.index, dtype=object), extra
        return out, []

    def _undeclared_columns(self, out: pd.DataFrame, arg: pd.Series | pd.DataFrame) -> list[str]:
        """The columns of ``out`` that ``returns:`` does not declare; under extend, not the input's own
        columns handed back unchanged (``DataFrame.assign``)."""
        import pandas as pd

        declared = set(self._declared or ())
        same = self.output is PythonOutput.EXTEND and isinstance(arg, pd.DataFrame)

        def unchanged(name: Any) -> bool:
            return (
                same and name in arg.columns and len(out) == len(arg)
                and out[name].reset_index(drop=True).equals(arg[name].reset_index(drop=True))
            )

        return sorted(str(c) for c in out.columns if c not in declared and not unchanged(c))

    def _from_pandas(self, out: Any, n: int) -> pa.Array:
        # pandas only where a vectorized call's result is read (on the executors): the stage
        # table, and so `quarantine validate`, imports this module without it
        import pandas as pd
        from pyspark.sql.types import StructType

        at = self._arrow_returns()
        size = len(out) if hasattr(out, "__len__") else -1
        if size != n:
            raise ResultError(
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
            raise ResultError(
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
            arrow_type(self.returns, "returns"),
            to_arrow_type(result_struct(self.returns)["error"].dataType),
            to_arrow_type(call_struct(self.returns)),
        )

    def _null_result(self, x: Any) -> dict[str, Any]:
        return self._error(
            ResultError(
                PythonErrorClass.NULL_RESULT,
                f"function returned None for input {_short(x)}; expected "
                f"{type_name(self.returns)} (set nullable: true to allow NULL results)",
            )
        )

    def _mismatch(self, out: Any, exc: BaseException) -> ResultError:
        return ResultError(
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
        error_class = exc.error_class.value if isinstance(exc, ResultError) else type(exc).__name__
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
        undeclared: dict[int, list[str]],
    ) -> pa.Array:
        """Scatter the successes and the errors back to their rows (nulls elsewhere).

        The third field, ``retries``, holds the retries of successful calls (read by
        :meth:`PythonStage.retries` for ``total-retries``; failed rows carry theirs in
        ``error.attempts``); the fourth, ``undeclared``, a successful row's returned fields
        ``returns:`` does not declare (read by :meth:`PythonStage.undeclared`).
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
        names = out_type.field(UNDECLARED).type
        if undeclared:
            extra = pa.array([undeclared.get(pos) for pos in range(n)], type=names)
        else:
            extra = pa.nulls(n, type=names)
        return pa.StructArray.from_arrays(
            [result, error, pa.array(counts, type=pa.int32()), extra], fields=list(out_type)
        )


def take_rows(values: pa.Array, positions: np.ndarray) -> pa.Array:
    """``values[positions]`` (positions ascending); no copy when that is every row."""
    if len(positions) == len(values):
        return values
    return values.take(pa.array(positions, type=pa.int64()))


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


def _has_text(t: pa.DataType) -> bool:
    """Whether values of ``t`` hold a STRING anywhere (inside structs, lists and maps too)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return True
    return any(_has_text(t.field(i).type) for i in range(t.num_fields))


def _as_python(rows: pa.Array) -> list[Any]:
    """``rows`` as Python values (what row mode hands the function)."""
    out: list[Any] = rows.to_pylist()
    return out


def _equal(a: Any, b: Any) -> bool:
    """``a == b`` as a plain bool (False for values that do not compare, or compare to an array)."""
    try:
        return bool(a == b)
    except Exception:  # an array's truth, a type that refuses comparison: not equal
        return False


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
