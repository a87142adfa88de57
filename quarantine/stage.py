"""The Stage contract: the interface, the result column, what a stage can report, and judging a batch.

A stage turns one input column into one result column of type
``STRUCT<result: T, error: ERROR_STRUCT>`` (:func:`quarantine.schema.result_struct`)
named after the stage. Exactly one of ``result`` and ``error`` is non-null — with
one declared exception: a stage built with ``nullable: true`` (``decode_utf8`` of
an optional Kafka key, a ``python`` stage) passes a NULL input on as a NULL
result with a NULL error. ``error IS NULL`` always means success.

Chaining rule (applied by :func:`quarantine.batch.chain.apply_stages`): a record whose
earlier stage failed is not run again. Its column for every later stage carries
the *first* error unchanged (same ``stage``, ``kind``, ``message``) and a null
result, so the last stage's ``error`` is the error that sends the record to
quarantine.

Native stages build their column from Spark expressions and are guarded with
``CASE WHEN``. Python stages must honour :attr:`StageContext.skip` themselves,
because Spark evaluates a Python UDF for every row of its input before any
``CASE WHEN`` around it is applied.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, create_model

from quarantine.columns import (
    ATTEMPTS,
    DRIFT_PREFIX,
    ERROR_CLASS,
    HIDDEN_PREFIX,
    ITEM_SEP,
    KAFKA_SOURCE_COLUMNS,
    KIND,
    MESSAGE,
    RETRIABLE,
    RETRIES_PREFIX,
    STACKTRACE,
    STAGE,
    ErrorKind,
)
from quarantine.errorhandling.breach import Breach
from quarantine.errors import QuarantineError
from quarantine.values.options import const
from quarantine.values.types import IDENTIFIER, OPTIONAL_TEXT

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

    from quarantine.errorhandling.retry import RetryPolicy

__all__ = [
    "HIDDEN_PREFIX",
    "INPUT",
    "BatchWideStageError",
    "Declaration",
    "Factory",
    "JudgingStage",
    "ReportsDrift",
    "ReportsRetries",
    "Stage",
    "StageContext",
    "StageOptions",
    "StageType",
    "drift_column",
    "drift_column_names",
    "drift_columns",
    "error_column",
    "outcome",
    "retry_column",
    "retry_column_names",
    "retry_columns",
]

_SOURCE_COLUMNS = frozenset(KAFKA_SOURCE_COLUMNS)


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
        retry: the :class:`quarantine.errorhandling.retry.RetryPolicy` for retriable Python-stage
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
        from pyspark.sql import functions as F

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


class Declaration(Protocol):
    """A stage as a config declares it: what a stage type's factory is given beside its validated options.

    :class:`quarantine.config.StageSpec` is one; a factory reads its name, input and
    :meth:`key` (for error messages), never the config package.
    """

    @property
    def name(self) -> str:
        """The stage's name; also its result column's."""

    @property
    def type(self) -> str:
        """The stage type's name (``cast``…)."""

    @property
    def input(self) -> str | None:
        """What the stage reads: a source column or an earlier stage's name; None: the previous stage."""

    @property
    def options(self) -> Mapping[str, Any]:
        """The options as written (paths resolved)."""

    @property
    def validated(self) -> BaseModel | None:
        """The options as its type's model validated them at load; None: validate :attr:`options` now."""

    def key(self, option: str | None = None) -> str:
        """The config path of the stage or one of its options (``stages[2].options.schema``)."""


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
    #: of caching the batch (:mod:`quarantine.batch.run`); False (the default, and the python
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

    def refreshes(self) -> frozenset[str]:
        """The error classes of this stage that :meth:`refreshed` may mend; empty (the default): none.

        Why: a stage whose expressions are built from what a source said when it was built
        (an ``avro`` or ``protobuf`` stage's writer schemas, from a registry) is wrong for a record the source
        learnt about later, and can only say so (``UnknownSchemaId``). A stream then asks the
        stage for a refreshed copy; a stage that answers here is staged per micro-batch (not
        once per query) so that the copy is what the next micro-batch runs.
        """
        return frozenset()

    def refreshed(self, retry: RetryPolicy | None = None) -> Stage | None:
        """A copy of this stage built from what its source says now, or None when nothing changed.

        Called by the streaming runner after a micro-batch in which a record failed this stage
        with one of :meth:`refreshes`'s classes, at most once per micro-batch, after the batch's
        writes are durable. May do I/O (each call under ``retry``, the pipeline's
        ``errors.retry.*``), but never raises for its source: a source that cannot be asked is
        logged and gives None (the records wait in quarantine for a later batch or a replay).
        """
        return None

    #: Whether the stage reads text (a STRING), never the raw BINARY bytes of ``value`` or ``key``
    #: (a ``json`` stage); :func:`quarantine.lineage.check_lineage` refuses one that reads BINARY.
    reads_text: ClassVar[bool] = False

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The type of this stage's result as its declaration fixes it, before Spark runs.

        What :mod:`quarantine.lineage` holds a later stage's reads to, and the target's row
        (:func:`quarantine.lineage.declared_result`).

        Args:
            input_type: the type of what the stage reads, as declared upstream; None when it
                is not declared.

        Returns:
            The result's type; None (the default) when it is only known once Spark runs.
        """
        return None

    def fields_read(self) -> tuple[tuple[str, str], ...]:
        """The fields of its input's struct this stage reads, each with the key of the option
        naming it (``("options.columns.amount", "amount")``); empty (the default): none.

        :func:`quarantine.lineage.check_lineage` holds each to what the input declares.
        """
        return ()

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
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    return x if isinstance(x, Column) else F.lit(x)


# ------------------------------------------------------------------ what a stage can report


@runtime_checkable
class ReportsRetries(Protocol):
    """A stage that retries and can say, per row, how many retries it made.

    ``retries(column)`` gets the stage's own result column and returns an
    integer Column: the retries (attempts beyond the first) the stage made for
    that row, successes included; 0 or NULL when none. Used by
    :func:`~quarantine.metrics.columns.observed_counts` so that retried successes count in ``total-retries``
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
    :func:`~quarantine.metrics.columns.observed_counts` for ``schema-drift-records`` and
    :func:`~quarantine.metrics.observed.schema_drift`.
    """

    name: str

    def undeclared(self, column: Column) -> Column:
        """Per-row undeclared field names (see the class doc)."""


def retry_column(stage: str) -> str:
    """The name of a stage's per-row retry count column (:func:`retry_columns`)."""
    return f"{RETRIES_PREFIX}{stage}"


def retry_columns(stages: Sequence[Any]) -> list[Column]:
    """Per-row retry counts of the stages that :class:`ReportsRetries` (usually none).

    Pure. :func:`quarantine.batch.chain.apply_stages` adds them beside each such stage's
    column (a stage may read its hidden columns there); the runner's projection of
    the staged frame keeps them by name (:func:`retry_column_names`), so that
    :func:`~quarantine.metrics.columns.observed_counts` can sum them in the one pass.
    """
    from pyspark.sql import functions as F

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

    Pure. :func:`quarantine.batch.chain.apply_stages` adds them beside each such stage's column;
    the runner's projection of the staged frame keeps them by name (:func:`drift_column_names`),
    so that :func:`~quarantine.metrics.columns.observed_counts` counts them in the one pass.
    """
    from pyspark.sql import functions as F

    out = []
    for s in stages:
        if isinstance(s, ReportsDrift):
            names = s.undeclared(F.col(s.name))
            # sort_array, not array_sort: the same order (array_join drops NULLs, wherever sorted), and no
            # lambda comparator, which would take the whole projection out of whole-stage code generation
            joined = F.when(F.size(names) > 0, F.array_join(F.sort_array(names), ITEM_SEP))
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
    from pyspark.sql import functions as F

    return F.struct(
        F.lit(stage).alias(STAGE),
        F.lit(kind.value).alias(KIND),
        _lit(error_class).cast("string").alias(ERROR_CLASS),
        _lit(message).cast("string").alias(MESSAGE),
        (stacktrace if stacktrace is not None else F.lit(None)).cast("string").alias(STACKTRACE),
        _lit(retriable).cast("boolean").alias(RETRIABLE),
        _lit(attempts).cast("int").alias(ATTEMPTS),
    )


def outcome(result: Column, failed: Column, error: Column) -> Column:
    """``STRUCT<result, error>`` with ``result`` where ``failed`` is false, else ``error``.

    ``failed`` must be non-null (coalesce it) so that exactly one side is set.
    """
    from pyspark.sql import functions as F

    return F.struct(
        F.when(~failed, result).alias("result"),
        F.when(failed, error).alias("error"),
    )


#: The column of the frame :meth:`JudgingStage.judge` gets.
INPUT = "input"


class JudgingStage(Stage):
    """A stage that also judges the records that reached it as one batch.

    Implementations keep :class:`~quarantine.stage.Stage`'s contract for the
    per-row outcome; :meth:`judge` may run Spark actions over the frame it is
    given (it is read from the persisted batch), and must not write anything.
    """

    @abstractmethod
    def judge(self, inputs: DataFrame, batch_id: int) -> tuple[Breach, ...] | None:
        """The stage's verdict on one batch.

        Args:
            inputs: one row per record of the batch that reached the stage, one
                column ``input``: the stage's input value.
            batch_id: the batch (or micro-batch) id.

        Returns:
            The breaches (empty: the batch passed), or None when the stage does
            not judge this batch (e.g. it judges every N-th batch).
        """

    def may_quarantine_batch(self) -> bool:
        """Whether a breach may send the whole batch to quarantine (default: no)."""
        return False

    def result_is_input(self) -> bool:
        """Whether the stage's result is its input unchanged where it passes (default: no).

        Then, when the stage is the chain's last, the persisted batch carries its
        input only for the records it failed: the others' input is the chain's result.
        """
        return False

    def check_counts(self, error: Column) -> list[Column]:
        """``observe`` columns over the batch's final error column, read back by
        :meth:`quarantined_by_check` (aliases must start with ``check:<stage>:``)."""
        return []

    def quarantined_by_check(self, counts: Mapping[str, Any]) -> dict[str, int]:
        """Quarantined records per check of this stage, from the observed ``counts``."""
        prefix = f"check:{self.name}:"
        return {k.removeprefix(prefix): int(v) for k, v in counts.items() if k.startswith(prefix) and int(v)}

    def notes(self) -> tuple[str, ...]:
        """What every batch report should say about this stage (e.g. checks made on the batch only)."""
        return ()

    def batch_error(self, breaches: Sequence[Breach]) -> Column:
        """The error of every record of a batch that ``breaches`` (action
        ``quarantine_batch``, at least one) send to quarantine: ``error_class`` =
        the first breach's name up to a ``:``, ``message`` = every breach's message."""
        message = "whole batch quarantined (on_breach=quarantine_batch): " + "; ".join(b.message for b in breaches)
        return self.error(breaches[0].name.split(":", 1)[0], message)


# --------------------------------------------------------------------------- declaring a stage type


class StageOptions(BaseModel):
    """The base of a stage type's options model: frozen, unknown keys refused, attribute docstrings
    as the JSON Schema's descriptions; cross-field rules are its validators (checked at load)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class _Entry(StageOptions):
    name: Annotated[str, IDENTIFIER] = Field(examples=["parse_order"])
    """The stage's name: also the name of its result column, and what a later stage's input names."""
    input: Annotated[str | None, OPTIONAL_TEXT] = Field(None, examples=["value"])
    """What the stage reads: a source column (value, key...) or an earlier stage's name; default the previous stage."""


#: ``factory(declaration, options) -> Stage``: the stage a :class:`Declaration` declares, built
#: from its validated options model.
Factory = Callable[[Declaration, Any], Stage]


@dataclass(frozen=True)
class StageType:
    """One stage type: its name in YAML, its options model, its factory and what it is for.

    Each built-in stage module declares its own beside its code (``STAGE_TYPE``), and
    :data:`quarantine.stages.STAGE_TYPES` lists them: the config loader checks a ``stages:``
    entry's options against :attr:`options`, the JSON Schema and the reference show them, and
    :func:`quarantine.stages.build_stage` calls :attr:`factory` with the validated options.
    What the built stage reads and produces it says itself (:meth:`Stage.produces`,
    :meth:`Stage.fields_read`, :attr:`Stage.reads_text`).
    """

    name: str
    """The ``type:`` value, e.g. ``cast``."""
    options: type[BaseModel]
    """The model of the stage's ``options:`` (a :class:`StageOptions`: frozen, unknown keys refused)."""
    factory: Factory
    """Builds the stage: ``factory(declaration, options)``."""
    summary: str
    """One line: what the stage does and its kind (deserialize, transform, validate…); shown in the schema."""
    options_required: bool = True
    """Whether ``options:`` must be written (False when every option has a default)."""
    declaration: type[BaseModel] = field(init=False, repr=False, compare=False)
    """The model of a whole ``stages:`` entry of this type (name, input, type, options), derived."""

    def __post_init__(self) -> None:
        options: Any = (self.options, ...) if self.options_required else (self.options | None, None)
        model = create_model(
            f"{_camel(self.name)}Stage",
            __base__=_Entry,
            __doc__=self.summary,
            type=(Annotated[str, const(self.name)], ...),
            options=options,
        )
        object.__setattr__(self, "declaration", model)

    def build(self, declared: Declaration, options: BaseModel) -> Stage:
        """The stage ``declared`` declares, built from its validated ``options``."""
        return self.factory(declared, options)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))
