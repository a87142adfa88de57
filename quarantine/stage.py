"""The Stage interface, the result column, and the chaining rule.

A stage turns one input column into one result column of type
``STRUCT<result: T, error: ERROR_STRUCT>`` (:func:`quarantine.schema.result_struct`)
named after the stage. Exactly one of ``result`` and ``error`` is non-null — with
one declared exception: a stage built with ``nullable: true`` (``decode_utf8`` of
an optional Kafka key, a ``python`` stage) passes a NULL input on as a NULL
result with a NULL error. ``error IS NULL`` always means success.

Chaining rule: a record whose earlier stage failed is not run again. Its
column for every later stage carries the *first* error unchanged (same
``stage``, ``kind``, ``message``) and a null result, so the last stage's
``error`` is the error that sends the record to quarantine.

Native stages build their column from Spark expressions and are guarded with
``CASE WHEN``. Python stages must honour :attr:`StageContext.skip` themselves,
because Spark evaluates a Python UDF for every row of its input before any
``CASE WHEN`` around it is applied.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from quarantine.errors import ConfigError, QuarantineError, StageDefinitionError
from quarantine.schema import (
    DRIFT_PREFIX,
    ERROR_STRUCT,
    HIDDEN_PREFIX,
    ITEM_SEP,
    KAFKA_SOURCE_SCHEMA,
    RETRIES_PREFIX,
    ErrorKind,
)
from quarantine.unlogged import unlogged_analysis

__all__ = [
    "HIDDEN_PREFIX",
    "BatchWideStageError",
    "ReportsDrift",
    "ReportsRetries",
    "Stage",
    "StageAnalysisError",
    "StageContext",
    "apply_stages",
    "drift_column",
    "drift_column_names",
    "drift_columns",
    "error_column",
    "final_error",
    "final_result",
    "outcome",
    "retry_column",
    "retry_column_names",
    "retry_columns",
    "stage_input",
]

_SOURCE_COLUMNS = frozenset(KAFKA_SOURCE_SCHEMA.fieldNames())


class BatchWideStageError(QuarantineError):
    """A stage asked for a batch-wide count (:meth:`StageContext.batch_count`) on a
    streaming DataFrame, where none can be taken: stage each micro-batch instead."""




@dataclass(frozen=True)
class StageContext:
    """What a stage may need besides its input.

    Attributes:
        skip: a boolean column, true where an earlier stage already failed.
            Python stages must not call user code for those rows.
        stacktrace: keep stack traces in the error struct
            (``errors.deadletterqueue.context.stacktrace.enable``).
        retry: the :class:`quarantine.retry.RetryPolicy` for retriable Python-stage
            failures (``errors.retry.*``), or None.
        hoist: set by :func:`apply_stages`; receives ``(label, expr)`` and returns a
            reference to ``expr`` computed once per row (see :meth:`once`).
        resolve_type: set by :func:`apply_stages`; the Spark type of a column of
            the frame the stage is applied to (see :meth:`type_of`).
        counter: set by :func:`apply_stages`; implements :meth:`batch_count`.
    """

    skip: Column
    stacktrace: bool = False
    retry: object | None = None
    hoist: Callable[[str, Column], Column] | None = None
    resolve_type: Callable[[Column], DataType] | None = None
    counter: Callable[[Column], Column] | None = None

    def batch_count(self, key: Column) -> Column:
        """How many rows of the batch that reach this stage hold ``key``: 1 when no other
        row does, and for a NULL ``key`` (never NULL itself).

        Why: a within-batch check (``expect_column_values_to_be_unique``) needs a count
        over the batch, and a window partitioned by the key shuffles and sorts every
        column of the batch, raw bytes included. Under :func:`apply_stages` only the key
        is aggregated, the keys held more than once are broadcast and joined back, so the
        batch itself is never shuffled (the source is read a second time for the
        aggregate). The repeated keys are held in memory on every executor: a column
        where most values repeat costs memory in proportion. Elsewhere a window count.

        Raises:
            BatchWideStageError: under :func:`apply_stages` on a streaming DataFrame.
        """
        if self.counter is not None:
            return self.counter(key)
        from pyspark.sql import Window

        return F.when(key.isNotNull(), F.count(F.lit(1)).over(Window.partitionBy(key))).otherwise(F.lit(1))

    def type_of(self, column: Column) -> DataType | None:
        """The Spark type of ``column`` (the input or a field of it), or None if unknown.

        Why: a check must be total, and whether a comparison can fail depends on
        the value's type (a STRING against a number, an ARRAY against anything),
        which a Column does not carry. Resolved by analysing the frame (no job);
        None when the stage is evaluated outside :func:`apply_stages`.
        """
        return None if self.resolve_type is None else self.resolve_type(column)

    def once(self, label: str, expr: Column) -> Column:
        """``expr`` evaluated once per row, however often the stage's column refers to it.

        Why: a stage's column sits inside ``CASE WHEN`` branches (the chaining rule,
        :func:`outcome`), and Spark eliminates common subexpressions only where they
        are always evaluated, so an expensive expression (``from_json``, a timestamp
        parse) referenced N times would run N times per row. Under
        :func:`apply_stages`, ``expr`` becomes a hidden column
        (``__q_<stage>_<label>``) computed in a projection before the stage's column
        and NULL for rows an earlier stage failed (they are not run again); the
        hidden columns are dropped once every stage has run. Elsewhere (a stage
        evaluated on its own) ``expr`` is returned as it is: the semantics are the
        same either way. ``expr`` may read values asked for earlier by the same
        stage. Wrap it in ``F.when(condition, ...)`` to compute it only for the
        rows that need it (e.g. those that failed, for an error message).
        """
        return expr if self.hoist is None else self.hoist(label, expr)


class Stage(ABC):
    """One processing step: an input column in, a result-or-error column out.

    Subclasses set :attr:`name`, :attr:`kind` and :attr:`input` and implement
    :meth:`evaluate`. Implementations are pure Column functions: no actions,
    no I/O, no driver-side state.
    """

    #: The stage's name; also its result column's name and the error's ``stage``.
    name: str
    #: What kind of failure this stage reports (``deserialize``, ``transform``…).
    kind: ErrorKind
    #: A source column or an earlier stage's name; None means the previous stage.
    input: str | None = None
    #: Whether the stage gives every record the same outcome each time it runs (pure
    #: expressions of the record). The runner may then run it twice over a batch instead
    #: of caching the batch (:mod:`quarantine.run`); False (the default, and the python
    #: stage's: user code, retries) keeps the batch cached so both writes see one outcome.
    deterministic: bool = False

    @abstractmethod
    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        """Return a column of type ``result_struct(T)`` for this stage.

        Args:
            value: the input value (a source column or the upstream result).
            ctx: skip mask and error-capture settings.

        Returns:
            A struct column with fields ``result`` and ``error``; build it with
            :func:`outcome` and :func:`error_column`.
        """

    def error(
        self,
        error_class: Column | str,
        message: Column | str,
        *,
        retriable: Column | bool = False,
        attempts: Column | int = 1,
        stacktrace: Column | None = None,
    ) -> Column:
        """An ``ERROR_STRUCT`` column for this stage (see :func:`error_column`)."""
        return error_column(
            self.name, self.kind, error_class, message,
            retriable=retriable, attempts=attempts, stacktrace=stacktrace,
        )

    def analysis_problem(self, scope: DataFrame) -> tuple[str, str, str] | None:
        """Which of this stage's options Spark cannot analyse over ``scope``, once applying the
        stage failed analysis: ``(option key, value, why)`` (``options.rules[1].expr``…), or
        None when no option alone is the cause (then the stage is named without one).

        Args:
            scope: the rows the stage is applied to (the source columns and every earlier
                stage's column).
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, kind={self.kind.value!r})"


def _lit(x: Column | str | bool | int | None) -> Column:
    return x if isinstance(x, Column) else F.lit(x)


# ------------------------------------------------------------------ what a stage can report


@runtime_checkable
class ReportsRetries(Protocol):
    """A stage that retries and can say, per row, how many retries it made.

    ``retries(column)`` gets the stage's own result column and returns an
    integer Column: the retries (attempts beyond the first) the stage made for
    that row, successes included; 0 or NULL when none. Used by
    :func:`~quarantine.metrics.observed_counts` so that retried successes count in ``total-retries``
    and ``total-record-failures``.
    """

    name: str

    def retries(self, column: Column) -> Column:
        """Per-row retries this stage made (see the class doc)."""


@runtime_checkable
class ReportsDrift(Protocol):
    """A stage that can say, per row, which fields of the record its schema does not declare.

    ``undeclared(column)`` gets the stage's own result column and returns an
    ``ARRAY<STRING>`` Column: the undeclared field names the row held, NULL or empty
    when none (and for rows the stage did not run: an earlier stage failed). Used by
    :func:`~quarantine.metrics.observed_counts` for ``schema-drift-records`` and
    :func:`~quarantine.metrics.schema_drift`.
    """

    name: str

    def undeclared(self, column: Column) -> Column:
        """Per-row undeclared field names (see the class doc)."""


def retry_column(stage: str) -> str:
    """The name of a stage's per-row retry count column (:func:`retry_columns`)."""
    return f"{RETRIES_PREFIX}{stage}"


def retry_columns(stages: Sequence[Any]) -> list[Column]:
    """Per-row retry counts of the stages that :class:`ReportsRetries` (usually none).

    Pure. :func:`quarantine.stage.apply_stages` adds them beside each such stage's
    column (a stage may read its hidden columns there); the runner's projection of
    the staged frame keeps them by name (:func:`retry_column_names`), so that
    :func:`~quarantine.metrics.observed_counts` can sum them in the one pass.
    """
    return [
        s.retries(F.col(s.name)).cast("bigint").alias(retry_column(s.name))
        for s in stages
        if isinstance(s, ReportsRetries)
    ]


def retry_column_names(stages: Sequence[Any]) -> list[str]:
    """The names of the :func:`retry_columns` of ``stages``, as a staged frame holds them."""
    return [retry_column(s.name) for s in stages if isinstance(s, ReportsRetries)]


def drift_column(stage: str) -> str:
    """The name of a stage's per-row undeclared fields column (:func:`drift_columns`)."""
    return f"{DRIFT_PREFIX}{stage}"


def drift_columns(stages: Sequence[Any]) -> list[Column]:
    """Per-row undeclared fields of the stages that :class:`ReportsDrift`: one STRING column
    each, the sorted names joined by a separator (NULL when none).

    Pure. :func:`quarantine.stage.apply_stages` adds them beside each such stage's column;
    the runner's projection of the staged frame keeps them by name
    (:func:`drift_column_names`), so that :func:`~quarantine.metrics.observed_counts` counts them in the one pass.
    """
    out = []
    for s in stages:
        if isinstance(s, ReportsDrift):
            names = s.undeclared(F.col(s.name))
            joined = F.when(F.size(names) > 0, F.array_join(F.array_sort(names), ITEM_SEP))
            out.append(joined.alias(drift_column(s.name)))
    return out


def drift_column_names(stages: Sequence[Any]) -> list[str]:
    """The names of the :func:`drift_columns` of ``stages``, as a staged frame holds them."""
    return [drift_column(s.name) for s in stages if isinstance(s, ReportsDrift)]


def error_column(
    stage: str,
    kind: ErrorKind,
    error_class: Column | str,
    message: Column | str,
    *,
    retriable: Column | bool = False,
    attempts: Column | int = 1,
    stacktrace: Column | None = None,
) -> Column:
    """Build one ``ERROR_STRUCT`` value."""
    return F.struct(
        F.lit(stage).alias("stage"),
        F.lit(kind.value).alias("kind"),
        _lit(error_class).cast("string").alias("error_class"),
        _lit(message).cast("string").alias("message"),
        (stacktrace if stacktrace is not None else F.lit(None)).cast("string").alias("stacktrace"),
        _lit(retriable).cast("boolean").alias("retriable"),
        _lit(attempts).cast("int").alias("attempts"),
    )


def outcome(result: Column, failed: Column, error: Column) -> Column:
    """``STRUCT<result, error>`` with ``result`` where ``failed`` is false, else ``error``.

    ``failed`` must be non-null (coalesce it) so that exactly one side is set.
    """
    return F.struct(
        F.when(~failed, result).alias("result"),
        F.when(failed, error).alias("error"),
    )


def stage_input(stage: Stage, previous: str | None, earlier: Collection[str]) -> Column:
    """The column ``stage`` reads: its ``input`` (an earlier stage's result, or a source
    column), else the previous stage's result, else ``value`` for the first stage.

    Args:
        stage: the stage.
        previous: the name of the stage before it (None for the first).
        earlier: the names of the stages before it.
    """
    src = stage.input if stage.input is not None else previous
    if src is None:
        return F.col("value")
    return F.col(src).getField("result") if src in earlier else F.col(src)


def _resolve_input(stage: Stage, previous: str | None, df: DataFrame, names: set[str]) -> Column:
    src = stage.input if stage.input is not None else previous
    if src is None or src in names or src in df.columns:
        return stage_input(stage, previous, names)
    raise StageDefinitionError(
        f"stage '{stage.name}': input '{src}' is neither an earlier stage "
        f"({', '.join(sorted(names)) or 'none'}) nor a source column ({', '.join(sorted(_SOURCE_COLUMNS))})"
    )


def apply_stages(
    df: DataFrame, stages: Sequence[Stage], *, stacktrace: bool = False, retry: object | None = None
) -> DataFrame:
    """Add one result column per stage, in order, applying the chaining rule.

    Args:
        df: a Kafka-shaped DataFrame (see :data:`quarantine.schema.KAFKA_SOURCE_SCHEMA`).
        stages: the stages, in order; names must be unique and not source columns.
        stacktrace: keep stack traces in error structs.
        retry: the per-record retry policy handed to stages (``errors.retry.*``).

    Returns:
        ``df`` with a column per stage; :func:`final_error` / :func:`final_result`
        read the outcome of the whole chain.

    Raises:
        StageAnalysisError: Spark cannot analyse a stage over ``df`` (an ``expr`` rule naming
            a column the row does not have…): a ConfigError naming the stage and its option.
    """
    try:
        with unlogged_analysis():  # what fails is raised, in one line; not logged as a 12 KB JSON line too
            return _apply_stages(df, stages, stacktrace=stacktrace, retry=retry)
    except AnalysisException as exc:
        with unlogged_analysis():
            named = _analysis_error(df, stages, exc, stacktrace=stacktrace, retry=retry)
        if named is exc:
            raise
        raise named from exc


class StageAnalysisError(ConfigError):
    """Spark cannot analyse a stage over the rows it is applied to: a config only Spark can judge.

    Its key names the stage by name (``stage 'check' options.rules[1].expr``);
    :meth:`keyed` gives the same error under the stage's config key once its place in
    ``stages:`` is known (:meth:`quarantine.pipeline.Pipeline.transform`).

    Attributes:
        stage: the stage's name.
        option: the option at fault (``options.rules[1].expr``), or None for the stage.
    """

    def __init__(self, stage: str, option: str | None, value: object, allowed: str) -> None:
        self.stage = stage
        self.option = option
        super().__init__(f"stage '{stage}'" + (f" {option}" if option else ""), value, allowed)

    def keyed(self, index: int) -> ConfigError:
        """This error under the config key ``stages[index]`` (and the option's)."""
        return ConfigError(f"stages[{index}]" + (f".{self.option}" if self.option else ""), self.value, self.allowed)


def _analysis_error(
    df: DataFrame, stages: Sequence[Stage], exc: AnalysisException, *, stacktrace: bool, retry: object | None
) -> StageAnalysisError | AnalysisException:
    """The error naming the first stage Spark cannot analyse over ``df`` (found by applying the
    stages one more at a time: analysis only, no job), and its option at fault when the stage can
    tell (:meth:`Stage.analysis_problem`); ``exc`` itself if no stage alone fails."""
    scope = df
    for stage_count, stage in enumerate(stages, start=1):
        try:
            staged = _apply_stages(df, stages[:stage_count], stacktrace=stacktrace, retry=retry)
        except AnalysisException as failed:
            problem = stage.analysis_problem(scope)
            if problem is not None:
                option, value, why = problem
                return StageAnalysisError(stage.name, option, value, f"{why} (stage '{stage.name}')")
            first = (str(failed).strip().splitlines() or [type(failed).__name__])[0]
            return StageAnalysisError(stage.name, None, stage.name, f"a stage Spark can apply ({first})")
        scope = staged
    return exc


def _apply_stages(
    df: DataFrame, stages: Sequence[Stage], *, stacktrace: bool = False, retry: object | None = None
) -> DataFrame:
    if not stages:
        raise StageDefinitionError("a pipeline needs at least one stage")
    names: set[str] = set()
    previous: str | None = None
    upstream_error: Column | None = None
    hidden: list[str] = []
    for stage in stages:
        if stage.name in names or stage.name in df.columns:
            raise StageDefinitionError(
                f"stage name '{stage.name}' is already used by another stage or a source column"
            )
        value = _resolve_input(stage, previous, df, names)
        skip = upstream_error.isNotNull() if upstream_error is not None else F.lit(False)
        once: dict[str, Column] = {}

        def hoist(label: str, expr: Column, *, _stage: str = stage.name, _once: dict[str, Column] = once,
                  _skip: Column = skip) -> Column:
            col = f"{HIDDEN_PREFIX}{_stage}_{label}"
            if col in _once:
                raise StageDefinitionError(f"stage '{_stage}': once('{label}') asked for twice")
            _once[col] = F.when(~_skip, expr)
            return F.col(col)

        def resolve_type(c: Column, *, _df: DataFrame = df) -> DataType:
            return _df.select(c).schema[0].dataType

        counted: list[tuple[str, str, Column]] = []

        def counter(key: Column, *, _stage: str = stage.name, _counted: list[tuple[str, str, Column]] = counted,
                    _skip: Column = skip, _streaming: bool = df.isStreaming) -> Column:
            if _streaming:
                raise BatchWideStageError(f"stage '{_stage}' counts over the batch; a stream is staged per micro-batch")
            n = len(_counted)
            key_col, count_col = f"{HIDDEN_PREFIX}{_stage}_key{n}", f"{HIDDEN_PREFIX}{_stage}_count{n}"
            _counted.append((key_col, count_col, F.when(~_skip, key)))
            return F.coalesce(F.col(count_col), F.lit(1))

        ctx = StageContext(
            skip=skip, stacktrace=stacktrace, retry=retry, hoist=hoist, resolve_type=resolve_type,
            counter=counter,
        )
        own = stage.evaluate(value, ctx)
        for col, expr in once.items():
            # each in its own projection, in the order asked (a later value may read an
            # earlier one), below the stage's: referenced many times, computed once
            df = df.withColumn(col, expr)
            hidden.append(col)
        if counted:
            # the aggregate filters and groups by the key, and the join infers a filter on it:
            # behind the barrier neither is pushed down into (and inlines) the earlier stages
            df = _filter_barrier(df, [s.name for s in stages if s.name in names])
        for key_col, count_col, key in counted:
            df = _join_repeated_keys(df.withColumn(key_col, key), key_col, count_col)
            hidden.extend([key_col, count_col])
        if upstream_error is not None:
            rtype: DataType = df.select(own.getField("result")).schema[0].dataType
            carried = F.struct(
                F.lit(None).cast(rtype).alias("result"), upstream_error.alias("error")
            )
            own = F.when(upstream_error.isNull(), own).otherwise(carried)
        df = df.withColumn(stage.name, own)
        if isinstance(stage, ReportsRetries):
            # a stage's per-row retries may read its hidden columns: kept beside it, by name
            df = df.select("*", *retry_columns([stage]))
        if isinstance(stage, ReportsDrift):
            # a stage's per-row undeclared fields (schema drift) read its hidden columns too
            df = df.select("*", *drift_columns([stage]))
        actual = df.schema[stage.name].dataType
        if not _is_result_struct(actual):
            raise StageDefinitionError(
                f"stage '{stage.name}' produced {actual.simpleString()}; expected "
                f"STRUCT<result: T, error: {ERROR_STRUCT.simpleString()}>"
            )
        names.add(stage.name)
        previous = stage.name
        upstream_error = F.col(stage.name).getField("error")
    if hidden:
        df = df.drop(*hidden)
    return _filter_barrier(df, [s.name for s in stages])


def _join_repeated_keys(df: DataFrame, key_col: str, count_col: str) -> DataFrame:
    """``df`` with ``count_col``: how many rows hold ``key_col``'s value, where more than one
    does (NULL elsewhere). Only the key is aggregated; the repeated keys are broadcast."""
    repeated = (
        df.select(key_col).where(F.col(key_col).isNotNull())
        .groupBy(key_col).agg(F.count(F.lit(1)).alias(count_col))
        .where(F.col(count_col) > 1)
    )
    return df.join(F.broadcast(repeated), on=key_col, how="left")


def _filter_barrier(df: DataFrame, stage_columns: Sequence[str]) -> DataFrame:
    """Re-emit the stage columns through a ``Generate`` so filters on them stay above it.

    Spark pushes a filter down through every projection, replacing each column
    with the expression that defines it (``PushPredicateThroughNonJoin``; see
    SPARK-47672). Each stage's column refers to the one before it several times,
    so a filter on a late stage's ``error`` would be inlined into an expression
    that grows geometrically with the number of stages: planning
    ``staged.where("check_order.error IS NOT NULL")`` over the four demo stages
    ran out of a 3 GiB heap. A predicate on a ``Generate``'s output is never pushed
    below it; ``inline`` of a one-element array yields each row once, unchanged.
    Predicates on the source columns still go down to the scan.
    """
    others = [c for c in df.columns if c not in stage_columns]
    packed = F.inline(F.array(F.struct(*[F.col(c) for c in stage_columns])))
    return df.select(*others, packed)


def _is_result_struct(t: DataType) -> bool:
    from pyspark.sql.types import StructType

    if not isinstance(t, StructType) or t.fieldNames() != ["result", "error"]:
        return False
    err = t["error"].dataType
    return isinstance(err, StructType) and err.fieldNames() == ERROR_STRUCT.fieldNames()


def final_error(stages: Sequence[Stage]) -> Column:
    """The chain's error: the last stage's ``error`` (it carries the first failure)."""
    return F.col(stages[-1].name).getField("error")


def final_result(stages: Sequence[Stage]) -> Column:
    """The chain's result: the last stage's ``result``."""
    return F.col(stages[-1].name).getField("result")
