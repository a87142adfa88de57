"""The chaining rule: a chain of stages applied to a DataFrame, one result column per stage.

A record whose earlier stage failed is not run again: its column for every later
stage carries the *first* error unchanged and a null result, so the last stage's
``error`` (:func:`final_error`) is the error that sends the record to quarantine,
and its ``result`` (:func:`final_result`) what goes to the target. A stage Spark
cannot analyse over the frame is named with its option (:class:`StageAnalysisError`).
The stages themselves follow :mod:`quarantine.stage`'s contract.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from quarantine.columns import HIDDEN_PREFIX, VALUE
from quarantine.errors import ConfigError, StageDefinitionError
from quarantine.schema import ERROR_STRUCT, KAFKA_SOURCE_SCHEMA
from quarantine.stage import (
    BatchWideStageError,
    ReportsDrift,
    ReportsRetries,
    Stage,
    StageContext,
    drift_columns,
    retry_columns,
)
from quarantine.unlogged import unlogged_analysis

__all__ = ["StageAnalysisError", "apply_stages", "final_error", "final_result", "stage_input"]

_SOURCE_COLUMNS = frozenset(KAFKA_SOURCE_SCHEMA.fieldNames())


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
        return F.col(VALUE)
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
    ran out of the driver's heap. A predicate on a ``Generate``'s output is never pushed
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
