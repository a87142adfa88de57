"""``python``: run a user's Python function as a stage, Arrow-batched, one error per bad row.

The function is given by dotted path in YAML (``function: mypkg.orders.enrich``)
or as an object from a notebook (:func:`python_stage`). It runs inside one
Arrow UDF (:func:`pyspark.sql.functions.arrow_udf`) that receives a whole
Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10,000 by
default) and returns the stage's whole ``STRUCT<result: T, error: ERROR_STRUCT>``
column, so there is no per-row Spark or pickle overhead and an exception never
fails the task. This module wires the stage into Spark and builds it; the
batch itself is run by :mod:`quarantine.stages.python.arrow_batch`.

Modes:

``row`` (default)
    ``fn(value) -> value`` is called once per element, in a Python loop over the
    batch, each call inside its own ``try``. An element whose call raises becomes
    an error: ``error_class`` is the exception's class name, ``message`` is
    ``str(exc)``, ``stacktrace`` is kept only when the pipeline asks for it.
    Cost: one Python call per row plus Arrow↔Python conversion of the batch;
    a poison row costs exactly what a good row costs, so prefer this mode for
    dirty inputs.

``vectorized``
    ``fn(pd.Series) -> pd.Series`` (same length, row *i* of the output depending
    only on row *i* of the input) is called on the whole batch. If that call
    raises (or returns the wrong length, values that do not convert to
    ``returns``, or NULLs when ``nullable`` is false), the batch is searched for
    its bad rows by calling the function on parts of it, each part with a fresh
    ``RangeIndex`` as if it were the whole batch. A row gets an error only when
    its own one-row call fails, and it gets that call's error; every other row
    gets its result from a call that succeeded. The search and its cost model
    (no bad row → 1 call): :mod:`quarantine.stages.python.bad_rows`. A function
    whose output for a row depends on other rows (a batch mean, a rank) must
    not run in this mode: the search changes the batches it sees.

Inputs: a plain column arrives as its Python value (row mode) or a
``pd.Series`` (vectorized). A struct input (e.g. the ``json`` stage's result)
arrives as a ``dict`` per row in row mode and as a ``pd.DataFrame`` with one
column per field in vectorized mode. A NULL input is passed as ``None``
(row mode) or as a row of nulls.

Results: ``returns`` is a Spark DDL type (``INT``, ``DECIMAL(10,2)``,
``a INT, b STRING`` for a struct). A struct result is a ``dict`` (or a named
``Row``, or a tuple in field order) per row, or (vectorized) a ``pd.DataFrame``
with those columns. A result that is None (or NaN in pandas) is an error
``NullResult`` unless ``nullable: true``; a result that does not convert to
``returns`` is an error ``ResultTypeMismatch``; a struct result that leaves out a
field ``returns`` declares is an error ``MissingResultField`` naming them (unless
``missing_fields: as_null``: NULL), an explicit None being a NULL; a returned field
``returns`` does not declare is not in the result, and is reported per row as the
stage's schema drift (:class:`quarantine.stage.ReportsDrift`; under extend, an input
field handed back unchanged is not). An input Python cannot be given (a STRING that
is not UTF-8) is an error ``UnreadableInput`` and the function is not called.
Naive ``datetime`` results for TIMESTAMP are read as UTC.

Output: ``output: extend`` (the default) over a struct input makes the stage's result
the input's fields with each returned field set on them (replaced in place, with its
declared type, or added after them; a scalar ``returns`` is one field named after the
stage), so ``returns`` declares only what the function adds or changes, and a field an
earlier stage gains reaches later stages without touching this one. Over any other
input, and with ``output: replace``, the result is what the function returns alone.
The merge is Spark's (the UDF returns only the declared fields): :func:`extended`
is its type, which :mod:`quarantine.lineage` reads before Spark runs.

Chaining: Spark evaluates a UDF on every row before any ``CASE WHEN`` around it,
so the stage passes :attr:`StageContext.skip` into the UDF and never calls the
function on a row an earlier stage failed.

Retries: when :attr:`StageContext.retry` is a :class:`quarantine.errorhandling.retry.RetryPolicy`
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
    output: extend | replace             # default extend (a struct input's fields + the returned)
    missing_fields: quarantine | as_null # a declared field the result leaves out; default quarantine
    nullable: false                      # None results are errors unless true
    retriable: [requests.Timeout]        # exception classes marked retriable
    path: lib                            # the module's folder; default the config file's

Finding the function: a config file's stage imports its module from ``path`` first (by
default the config file's folder, so ``sensors.py`` beside ``pipeline.yml`` needs no
``PYTHONPATH``), then from ``sys.path``. A module found in that folder, and the modules
beside it that it imports, are pickled by value with the UDF (cloudpickle), so Spark's Python
workers run it without importing it (local Spark, a Spark Connect server, a cluster). Its
other imports are by reference: they must be installed where the workers run (see
:func:`resolve_callable`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import ConfigDict, Field

from quarantine.columns import ErrorKind
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import ConfigError
from quarantine.stage import HIDDEN_PREFIX, Declaration, Stage, StageContext, StageOptions, StageType
from quarantine.stages.python.arrow_batch import (
    RETRIES,
    UNDECLARED,
    ArrowCalls,
    MissingFields,
    PythonErrorClass,
    PythonMode,
    PythonOutput,
    arrow_type,
    call_struct,
)
from quarantine.values.options import EXCEPTIONS, MODULE_FOLDER
from quarantine.values.spark import parse_spark_type
from quarantine.values.types import BOOL, TEXT, choice, member

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "MissingFields",
    "PythonErrorClass",
    "PythonMode",
    "PythonOutput",
    "PythonStage",
    "extended",
    "from_spec",
    "python_stage",
    "resolve_callable",
]


class PythonOptions(StageOptions):
    """Options of a ``python`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("path",)

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"function": "sensors.to_fahrenheit", "returns": "fahrenheit DOUBLE"},
        {"function": "mypkg.scoring.score", "returns": "DOUBLE", "mode": "vectorized"},
        {"function": "sensors.enrich", "returns": "reading_id BIGINT, celsius DOUBLE, fahrenheit DOUBLE",
         "output": "replace"},
    ]})

    function: Annotated[str, TEXT] = Field(examples=["sensors.enrich"])
    """The function's dotted path (module.fn, pkg.module.fn or pkg.module:Class.method); the module is
    imported from path (default the config's folder) first, then from the installed packages."""
    returns: Annotated[str, TEXT] = Field(examples=["fahrenheit DOUBLE", "DECIMAL(10,2)"])
    """What the function returns, as a Spark type: DOUBLE, 'DECIMAL(10,2)', ARRAY<INT>, or a struct as a DDL field
    list ('fahrenheit DOUBLE, band STRING') or STRUCT<...>. With output: extend (the default) over a struct input,
    the fields the function adds (or changes); with output: replace, every field the result holds. The last stage's
    result is the target's row: a struct's fields become its columns, any other type one column named after the
    stage."""
    mode: Annotated[PythonMode, choice(PythonMode)] = PythonMode.ROW
    """row: fn(value) per row (a struct is a dict, the result a value or dict); vectorized: fn(pandas.Series
    or, for a struct, pandas.DataFrame) per Arrow batch, returning a Series (or DataFrame) of the same length."""
    nullable: Annotated[bool, BOOL] = False
    """A None result is a success (NULL result) instead of a NullResult error."""
    retriable: Annotated[Any, EXCEPTIONS] = Field(None, examples=[["TimeoutError", "mypkg.errors.Throttled"]])
    """Exception classes whose errors are marked retriable (builtins or dotted paths)."""
    output: Annotated[PythonOutput, choice(PythonOutput)] = PythonOutput.EXTEND
    """extend: a struct input's fields plus the returned ones (each returned field set on the input: replaced in
    place or added after it; a scalar returns is one field named after the stage), so returns declares only what
    the function adds or changes; over an input that is not a struct, as replace. replace: the function's result
    alone (the input's fields it does not return are not in it)."""
    missing_fields: Annotated[MissingFields, choice(MissingFields)] = MissingFields.QUARANTINE
    """A struct result (a dict, a Row, a DataFrame) that leaves out a field returns declares: quarantine (the record
    fails, MissingResultField naming the fields) or as_null (the field is NULL). An explicit None is NULL either way."""
    path: Annotated[str | None, MODULE_FOLDER] = Field(None, validate_default=True, examples=["lib"])
    """The folder the function's module is imported from first (a relative one is read from the config's
    folder); default the config file's folder. A module found there is shipped to Spark's Python workers with
    the function, so neither needs PYTHONPATH."""


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
        output: ``extend`` (a struct input's fields plus the returned ones) or ``replace``.
        missing_fields: what a struct result leaving out a declared field does (``quarantine``, ``as_null``).
    """

    name: str
    fn: Callable[..., Any]
    returns: DataType
    mode: PythonMode = PythonMode.ROW
    input: str | None = None
    nullable: bool = False
    retriable: tuple[type[BaseException], ...] = ()
    kind: ErrorKind = field(default=ErrorKind.TRANSFORM)
    output: PythonOutput = PythonOutput.EXTEND
    missing_fields: MissingFields = MissingFields.QUARANTINE

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The result's type: ``returns``, or under ``output: extend`` over a struct input, that input
        with the returned fields (:func:`extended`); None when an extended input's type is not known."""
        from pyspark.sql.types import StructType

        if self.output is PythonOutput.REPLACE:
            return self.returns
        if isinstance(input_type, StructType):
            return extended(input_type, self.returns, self.name)
        return None if input_type is None else self.returns

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(f"stage {self.name}: function", self.fn, "a callable")
        arrow_type(self.returns, f"stage {self.name}: returns")

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.functions import arrow_udf
        from pyspark.sql.types import StructType

        input_type = ctx.type_of(value)
        extend = self.output is PythonOutput.EXTEND and isinstance(input_type, StructType)
        runner = ArrowCalls(
            stage=self.name,
            kind=self.kind.value,
            fn=self.fn,
            mode=self.mode,
            returns=self.returns,
            nullable=self.nullable,
            stacktrace=ctx.stacktrace,
            retriable=self.retriable,
            retry=_stage_policy(ctx.retry, self.retriable),
            output=PythonOutput.EXTEND if extend else PythonOutput.REPLACE,
            missing_fields=self.missing_fields,
        )
        # The type hints of ArrowCalls.run (pa.Array, pa.Array -> pa.Array) make it a SCALAR Arrow UDF.
        factory: Any = arrow_udf  # its stubs insist on functionType; hints are preferred at runtime
        udf = factory(runner.run, call_struct(self.returns))
        # computed once per row (its result, error, retries and undeclared fields are read separately)
        call = ctx.once(_CALL, udf(value, ctx.skip))
        if not extend:
            out: Column = call.dropFields(RETRIES, UNDECLARED)  # one reference: the UDF runs once per row unhoisted
            return out
        assert isinstance(input_type, StructType)
        result, error = call.getField("result"), call.getField("error")
        merged = F.struct(*[
            _extended_field(name, value, result, self.returns, self.name).alias(name)
            for name in extended(input_type, self.returns, self.name).fieldNames()
        ])
        return F.struct(F.when(error.isNull(), merged).alias("result"), error.alias("error"))

    def retries(self, column: Column) -> Column:
        """Retries of this row's successful call (see :class:`quarantine.stage.ReportsRetries`)."""
        from pyspark.sql import functions as F

        return F.col(f"{HIDDEN_PREFIX}{self.name}_{_CALL}").getField(RETRIES)

    def undeclared(self, column: Column) -> Column:
        """The fields this row's result returned that ``returns:`` does not declare, and which are
        therefore not in the stage's result (see :class:`quarantine.stage.ReportsDrift`)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        if not isinstance(self.returns, StructType):  # a scalar result has no fields to leave out
            return F.lit(None).cast("array<string>")
        return F.col(f"{HIDDEN_PREFIX}{self.name}_{_CALL}").getField(UNDECLARED)


def extended(input_type: StructType, returns: DataType, stage: str) -> StructType:
    """The result type of ``output: extend``: ``input_type``'s fields, each returned field of ``returns``
    in place of the input's of that name (its declared type) or after them; a ``returns`` that is not a
    struct is one field named after the ``stage``."""
    from pyspark.sql.types import StructField, StructType

    added = returns.fields if isinstance(returns, StructType) else [StructField(stage, returns)]
    fields = {f.name: f for f in input_type.fields}
    for f in added:
        fields[f.name] = StructField(f.name, f.dataType)
    return StructType(list(fields.values()))


def _extended_field(name: str, value: Column, result: Column, returns: DataType, stage: str) -> Column:
    """One field of an extended result: the returned one when ``returns`` declares it, else the input's."""
    from pyspark.sql.types import StructType

    if isinstance(returns, StructType):
        return result.getField(name) if name in returns.fieldNames() else value.getField(name)
    return result if name == stage else value.getField(name)


_CALL = "call"


def _stage_policy(retry: object | None, retriable: tuple[type[BaseException], ...]) -> RetryPolicy | None:
    """The pipeline's retry policy, also treating the stage's ``retriable`` classes as retriable."""
    if not isinstance(retry, RetryPolicy):
        return None
    if not retriable:
        return retry
    names = {f"{c.__module__}.{c.__qualname__}" for c in retriable}
    classifier = replace(retry.retriable, names=retry.retriable.names | names)
    return replace(retry, retriable=classifier)


# ---------------------------------------------------------------------- building


def resolve_callable(path: object, key: str, *, folder: str | None = None) -> Callable[..., Any]:
    """Import ``pkg.mod.fn`` (or ``pkg.mod:fn``, or ``pkg.mod.Class.method``), from ``folder`` first.

    A module found in ``folder`` (a python stage's ``path`` option: by default the config
    file's folder) is imported with that folder first on ``sys.path``, then registered with
    cloudpickle to be pickled by value, with every module this import loaded from that folder
    (``_import``): the function and those modules' code travel with the UDF, so Spark's
    Python workers need not import them.
    Anything else is imported from ``sys.path`` (installed packages, ``PYTHONPATH``) and
    pickled by reference, so it must be importable where the workers run.

    Args:
        path: the dotted path as configured.
        key: the config key, for errors (``stages[3].options.function``).
        folder: the folder to import from first; None for ``sys.path`` alone.

    Raises:
        ConfigError: naming ``key`` when the module does not import (saying where it was
            looked for and what to set), the attribute does not exist, or it is not callable.
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
            obj: Any = _import(module_name, folder)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing and missing != module_name and not module_name.startswith(missing + "."):  # its own import
                raise ConfigError(
                    key, path, f"an importable function (importing {module_name} raised ModuleNotFoundError: {exc})"
                ) from None
            last_error = exc
            continue
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
    top = candidates[-1][0].split(".")[0]
    where = f"{folder} (the stage's path option: the config file's folder unless set), then " if folder else ""
    option = key.rpartition(".")[0] + ".path" if "." in key else "path"
    raise ConfigError(
        key,
        path,
        f"an importable function ({last_error}; looked in {where}sys.path: the installed packages and PYTHONPATH). "
        f"Put {top}.py (or the package {top}/) beside the config, set {option} to the folder holding it, "
        "or install it",
    )


def _import(module_name: str, folder: str | None) -> Any:
    """``module_name`` imported with ``folder`` first on ``sys.path``; what it brought from there pickled by value.

    Every module this import loaded from ``folder`` (the one named, and the modules beside it that
    it imports) is registered with cloudpickle, whether or not ``folder`` was on ``sys.path``
    already: the driver's ``sys.path`` says nothing of Spark's Python workers' (``spark-pipelines``
    and ``spark-submit`` put the folder they run in on the driver's alone).
    """
    from pyspark import cloudpickle

    if folder is None:
        return importlib.import_module(module_name)
    folder = os.path.abspath(folder)
    before = set(sys.modules)
    importlib.invalidate_caches()
    sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(folder)
    new_tops = {name.split(".")[0] for name in set(sys.modules) - before} | {module_name.split(".")[0]}
    for name in sorted(new_tops):
        top = sys.modules.get(name)
        origin = getattr(top, "__file__", None)
        if top is not None and origin is not None and os.path.abspath(origin).startswith(folder + os.sep):
            cloudpickle.register_pickle_by_value(top)  # type: ignore[no-untyped-call]  # workers get its code
    return module


def _exception_classes(raw: object, key: str, folder: str | None = None) -> tuple[type[BaseException], ...]:
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
            cls = resolve_callable(name, k, folder=folder)
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
    output: PythonOutput | str = PythonOutput.EXTEND,
    missing_fields: MissingFields | str = MissingFields.QUARANTINE,
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
        output: ``"extend"`` (default: a struct input's fields plus the returned ones) or ``"replace"``.
        missing_fields: ``"quarantine"`` (default: a struct result leaving out a declared field fails the
            record) or ``"as_null"``.

    Raises:
        ConfigError: ``fn`` is not callable, or ``returns``/``mode``/``output``/``missing_fields`` is not valid.
    """
    from pyspark.sql.types import DataType

    rtype = returns if isinstance(returns, DataType) else parse_spark_type(returns, "returns")
    return PythonStage(
        name=name,
        fn=fn,
        returns=rtype,
        mode=_choice(PythonMode, mode, "mode"),
        input=input,
        nullable=nullable,
        retriable=tuple(retriable),
        output=_choice(PythonOutput, output, "output"),
        missing_fields=_choice(MissingFields, missing_fields, "missing_fields"),
    )


_E = TypeVar("_E", bound=StrEnum)


def _choice(enum: type[_E], value: object, key: str) -> _E:
    """``value`` as a member of ``enum`` (:func:`~quarantine.values.types.member`, as the config reads it).

    Raises:
        ConfigError: naming ``key`` and the allowed values.
    """
    found = member(enum, value)
    if found is None:
        raise ConfigError(key, value, " | ".join(enum))
    return found


def from_spec(spec: Declaration, options: PythonOptions) -> PythonStage:
    """The stage ``spec`` declares, from its validated options (see the module docstring).

    Raises:
        ConfigError: naming ``stages[i].options.<key>``: the function does not import,
            ``returns`` is not a Spark type Arrow carries, a retriable class is not an exception.
    """
    returns = parse_spark_type(options.returns, spec.key("options.returns"))
    arrow_type(returns, spec.key("options.returns"))
    return PythonStage(
        name=spec.name,
        fn=resolve_callable(options.function, spec.key("options.function"), folder=options.path),
        returns=returns,
        mode=options.mode,
        input=spec.input,
        nullable=options.nullable,
        retriable=_exception_classes(options.retriable, spec.key("options.retriable"), options.path),
        output=options.output,
        missing_fields=options.missing_fields,
    )


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "python", PythonOptions, from_spec, "A Python function by dotted path, Arrow-batched (transform)."
)
