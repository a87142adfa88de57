"""``expectation``: route rows that fail a GX suite's row-level expectations to quarantine.

YAML::

    - name: expect_order
      type: expectation
      options:
        suite: expectations/orders.json    # relative to the config file's folder
        on_breach: {default: warn, expect_column_mean_to_be_between: fail}
        validate_every: 1

The stage's input is a struct (usually the parsed record); each expectation's
``column`` is a field of it. Translated expectations (see
:mod:`quarantine.expectations.translate`) become one native predicate each,
evaluated in the same pass as the other stages; a row failing any of them gets
an error of kind ``expectation``: ``error_class`` = the first failing
expectation's type, ``message`` = every failing expectation with its column,
arguments and the value found. The result is the input, unchanged.

The whole suite, translated or not, is validated by GX on the batch
(:mod:`quarantine.expectations.validate`, every ``validate_every`` batches);
a failed expectation there is a tolerance breach whose action comes from
``on_breach``. Untranslated expectations are listed by :attr:`untranslated`
and reported in the run summary, never silently ignored.

No value fails the job: the checks are built for the input's type (see
:mod:`quarantine.expectations.translate`), and every ``regex`` of the suite is
compiled by Spark when the stage is built, so a pattern the JVM rejects
(Python's ``(?P<name>…)``) is a :class:`~quarantine.errors.ConfigError` naming
the expectation, its column and the pattern, raised before any data is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from quarantine.config import BreachAction, StageSpec
from quarantine.errors import ConfigError
from quarantine.expectations.suite import ExpectationSpec, Suite, load_suite
from quarantine.expectations.translate import (
    BatchCount,
    RowCheck,
    check_regexes,
    combine,
    translate,
    untranslated_reason,
)
from quarantine.expectations.validate import BreachPolicy, GxValidator, ValidationOutcome, validate_batch
from quarantine.report import Breach
from quarantine.schema import GX_INPUT_PREFIX, ErrorKind
from quarantine.stage import Stage, StageContext, outcome

__all__ = [
    "GX_INPUT_PREFIX",
    "ExpectationBatchResult",
    "ExpectationStage",
    "expectation_counts",
    "expectation_stages",
    "from_spec",
    "keeps_whole_batch",
    "validate_expectations",
    "validation_columns",
    "validation_frame",
]


@dataclass(frozen=True, repr=False)
class ExpectationStage(Stage):
    """Row-level routing for a GX suite, plus what the batch validation needs.

    Attributes:
        name: the stage's name.
        suite: the loaded suite.
        on_breach: what a failed expectation in GX's batch validation does.
        validate_every: run GX's batch validation on every N-th batch (1 = every batch).
        input: the struct column or stage to check (default: the previous stage).
    """

    name: str
    suite: Suite
    on_breach: BreachPolicy = field(default_factory=BreachPolicy)
    validate_every: int = 1
    input: str | None = None
    kind: ErrorKind = field(default=ErrorKind.EXPECTATION)

    def __post_init__(self) -> None:
        if self.validate_every < 1:
            raise ConfigError(
                f"stage {self.name}: options.validate_every", self.validate_every, "an integer ≥ 1"
            )
        # a pattern the JVM cannot compile would fail the job at the first row
        check_regexes(self.suite)

    @property
    def translated(self) -> tuple[ExpectationSpec, ...]:
        """Expectations checked per row (and by GX on the batch)."""
        return tuple(e for e in self.suite.expectations if untranslated_reason(e) is None)

    @property
    def untranslated(self) -> tuple[ExpectationSpec, ...]:
        """Expectations validated by GX on the batch only (aggregate, table-level, …)."""
        return tuple(e for e in self.suite.expectations if untranslated_reason(e) is not None)

    def untranslated_summary(self) -> tuple[str, ...]:
        """``name (reason)`` for each untranslated expectation, for reports and logs."""
        return tuple(f"{e.name} ({untranslated_reason(e)})" for e in self.untranslated)

    def checks(
        self, record: Column, record_type: DataType | None = None, *, count: BatchCount | None = None
    ) -> list[RowCheck]:
        """The translated row checks over ``record`` (of ``record_type``), in suite order;
        ``count`` counts a value over the batch (``StageContext.batch_count``)."""
        out = [translate(e, record, record_type, count=count) for e in self.translated]
        return [c for c in out if c is not None]

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        verdict = combine(self.checks(value, ctx.type_of(value), count=ctx.batch_count))
        return outcome(value, verdict.failed, self.error(verdict.error_class, verdict.message))

    def should_validate(self, batch_id: int) -> bool:
        """Whether GX validates this batch (every ``validate_every``-th batch, from batch 0)."""
        return batch_id % self.validate_every == 0

    def observed_counts(self, error: Column) -> list[Column]:
        """Aggregate columns counting quarantined rows per translated expectation.

        For ``DataFrame.observe`` over the batch's final error column: one count
        per expectation named ``expectation:<name>``, counting rows this stage
        failed whose message lists that expectation (a row failing two
        expectations counts for both).
        """
        mine = (error.getField("stage") == F.lit(self.name)) & (
            error.getField("kind") == F.lit(self.kind.value)
        )
        return [
            F.count(
                F.when(mine & error.getField("message").contains(f"{e.describe()}: found "), 1)
            ).alias(f"expectation:{e.name}")
            for e in self.translated
        ]


_OPTIONS = frozenset({"suite", "on_breach", "validate_every"})


def _policy(spec: StageSpec, raw: Any, suite: Suite) -> BreachPolicy:
    key = spec.key("options.on_breach")
    allowed = " | ".join(a.value for a in BreachAction)
    if isinstance(raw, str):
        raw = {"default": raw}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            key, raw, f"an action ({allowed}) or a mapping of expectation type/name to action"
        )
    known = {e.type for e in suite.expectations} | {e.name for e in suite.expectations}
    known.add("default")
    actions: dict[str, BreachAction] = {}
    for k, v in raw.items():
        if k not in known:
            raise ConfigError(
                f"{key}.{k}", v, f"keys that are 'default' or an expectation type/name of suite "
                f"'{suite.name}' ({', '.join(sorted(known - {'default'}))})",
            )
        try:
            actions[str(k)] = BreachAction(str(v).strip().lower())
        except ValueError:
            raise ConfigError(f"{key}.{k}", v, f"one of {allowed}") from None
    default = actions.pop("default", BreachAction.WARN)
    return BreachPolicy(default=default, overrides=actions)


def from_spec(spec: StageSpec) -> ExpectationStage:
    """Build the stage from YAML; loads the suite and checks it with GX (fails at config time)."""
    from quarantine.stages import option

    unknown = sorted(set(spec.options) - _OPTIONS)
    if unknown:
        raise ConfigError(
            spec.key(f"options.{unknown[0]}"), spec.options[unknown[0]],
            f"one of the expectation stage's options: {', '.join(sorted(_OPTIONS))}",
        )
    path = option(spec, "suite", kind=str)
    try:
        suite = load_suite(path)
    except ConfigError as exc:
        raise ConfigError(spec.key("options.suite"), path, exc.allowed) from None
    suite.to_gx()  # unknown types / bad arguments are config errors, now
    every = option(spec, "validate_every", 1, kind=int)
    if isinstance(every, bool) or every < 1:
        raise ConfigError(spec.key("options.validate_every"), every, "an integer ≥ 1")
    return ExpectationStage(
        name=spec.name,
        suite=suite,
        on_breach=_policy(spec, option(spec, "on_breach", "warn"), suite),
        validate_every=every,
        input=spec.input,
    )


def validation_frame(df: DataFrame, record: Column, reached: Column) -> DataFrame:
    """The flat frame GX validates: the fields of ``record`` for rows where ``reached``.

    Args:
        df: the staged batch (e.g. the output of :func:`quarantine.stage.apply_stages`).
        record: the expectation stage's input struct column.
        reached: true for rows that reached the stage (no earlier stage failed).
    """
    return df.where(reached).select(record.alias("_q_record")).select("_q_record.*")


# --------------------------------------------------------------------------- runner support
# The runner persists one projected frame per batch (``Pipeline.split_frame``);
# these functions add what GX needs to it and validate every expectation stage
# on it, so GX reads the cached batch and never the source again.



def expectation_stages(stages: Sequence[Stage]) -> list[ExpectationStage]:
    """The expectation stages of a pipeline, in order."""
    return [s for s in stages if isinstance(s, ExpectationStage)]


def validation_columns(stages: Sequence[Stage]) -> list[Column]:
    """Columns for the runner's projection of the staged batch: one per expectation stage.

    ``_q_gx_<name>`` holds the stage's input struct where the row reached the
    stage (no earlier stage failed) and NULL elsewhere, so GX validates exactly
    the rows the stage checked. Read it with :func:`validate_expectations`.
    The frame must be the output of :func:`quarantine.stage.apply_stages`.
    """
    names = [s.name for s in stages]
    out: list[Column] = []
    for i, s in enumerate(stages):
        if not isinstance(s, ExpectationStage):
            continue
        src = s.input if s.input is not None else (names[i - 1] if i else "value")
        value = F.col(src).getField("result") if src in names[:i] else F.col(src)
        reached = F.col(names[i - 1]).getField("error").isNull() if i else F.lit(True)
        out.append(F.when(reached, value).alias(f"{GX_INPUT_PREFIX}{s.name}"))
    return out


def keeps_whole_batch(stages: Sequence[Stage]) -> bool:
    """Whether a breach may quarantine the whole batch (the persisted batch must keep raw bytes)."""
    return any(
        s.on_breach.default is BreachAction.QUARANTINE_BATCH
        or BreachAction.QUARANTINE_BATCH in s.on_breach.overrides.values()
        for s in expectation_stages(stages)
    )


def expectation_counts(stages: Sequence[Stage], error: Column) -> list[Column]:
    """``observe`` columns ``expectation:<name>``: quarantined rows per translated expectation."""
    return [c for s in expectation_stages(stages) for c in s.observed_counts(error)]


@dataclass(frozen=True)
class ExpectationBatchResult:
    """GX's verdicts on one batch, for every expectation stage.

    Attributes:
        outcomes: ``(stage name, outcome)`` for the stages validated this batch.
        untranslated: ``name (reason)`` of expectations validated by GX only.
    """

    outcomes: tuple[tuple[str, ValidationOutcome], ...] = ()
    untranslated: tuple[str, ...] = ()

    @property
    def breaches(self) -> tuple[Breach, ...]:
        """Every breach, stage by stage, in suite order."""
        return tuple(b for _, o in self.outcomes for b in o.breaches)

    def with_action(self, action: BreachAction) -> tuple[Breach, ...]:
        """The breaches whose action is ``action``."""
        return tuple(b for b in self.breaches if b.action is action)

    def batch_error(self, stages: Sequence[Stage]) -> Column | None:
        """The error for every row of a batch a ``quarantine_batch`` breach sends to quarantine.

        ``stage`` = the expectation stage, ``kind`` = ``expectation``, ``error_class`` =
        the breached expectation's type, ``message`` = GX's finding. None if no
        breach asks for it.
        """
        by_name = {s.name: s for s in expectation_stages(stages)}
        for stage_name, o in self.outcomes:
            hits = [b for b in o.breaches if b.action is BreachAction.QUARANTINE_BATCH]
            if hits:
                first = hits[0]
                message = "whole batch quarantined (on_breach=quarantine_batch): " + "; ".join(
                    b.message for b in hits
                )
                return by_name[stage_name].error(first.name.split(":", 1)[0], message)
        return None


def validate_expectations(
    batch: DataFrame, stages: Sequence[Stage], batch_id: int, *, validator: GxValidator | None = None
) -> ExpectationBatchResult:
    """Validate every expectation stage due this batch with GX, on the persisted batch.

    Args:
        batch: the runner's persisted batch, including :func:`validation_columns`.
        stages: the pipeline's stages.
        batch_id: the batch id (for ``validate_every``).
        validator: the GX context (default: a process-wide one).
    """
    outcomes: list[tuple[str, ValidationOutcome]] = []
    untranslated: list[str] = []
    for s in expectation_stages(stages):
        summary = s.untranslated_summary()
        untranslated.extend(summary)
        if not s.should_validate(batch_id):
            continue
        col = f"{GX_INPUT_PREFIX}{s.name}"
        frame = batch.where(F.col(col).isNotNull()).select(f"{col}.*")
        outcomes.append(
            (s.name, validate_batch(frame, s.suite, s.on_breach, untranslated=summary, validator=validator))
        )
    return ExpectationBatchResult(tuple(outcomes), tuple(untranslated))
