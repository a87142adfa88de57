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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from quarantine.columns import KIND, MESSAGE, STAGE, ErrorKind
from quarantine.errorhandling.breach import Breach
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
from quarantine.expectations.validate import BreachPolicy, validate_batch
from quarantine.stage import INPUT, Declaration, JudgingStage, StageContext, StageOptions, StageType, outcome
from quarantine.values.options import (
    ON_BREACH,
    SUITE,
)
from quarantine.values.types import BreachAction, integer

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["ExpectationStage", "from_spec"]


class ExpectationOptions(StageOptions):
    """Options of an ``expectation`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("suite",)

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"suite": "expectations/orders.json", "on_breach": "quarantine_batch"},
    ]})

    suite: Annotated[str, SUITE] = Field(examples=["expectations/orders.json"])
    """A Great Expectations 1.x suite JSON file; a relative path is read from the config's folder."""
    on_breach: Annotated[Any, ON_BREACH] = Field(
        "warn", examples=[{"default": "warn", "expect_column_values_to_be_unique": "fail"}]
    )
    """What a failed batch-level expectation does: one action, or {default: action, <type or name>: action}."""
    validate_every: Annotated[int, integer(1)] = Field(1, examples=[10])
    """Validate the suite with GX on every Nth batch."""


@dataclass(frozen=True, repr=False)
class ExpectationStage(JudgingStage):
    """Row-level routing for a GX suite, and GX's verdict on the batch (:mod:`quarantine.batch.verdict`).

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

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The input, unchanged."""
        return input_type

    @property
    def translated(self) -> tuple[ExpectationSpec, ...]:
        """Expectations checked per row (and by GX on the batch)."""
        return tuple(e for e in self.suite.expectations if untranslated_reason(e) is None)

    @property
    def untranslated(self) -> tuple[ExpectationSpec, ...]:
        """Expectations validated by GX on the batch only (aggregate, table-level, …)."""
        return tuple(e for e in self.suite.expectations if untranslated_reason(e) is not None)

    def notes(self) -> tuple[str, ...]:
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

    def judge(self, inputs: DataFrame, batch_id: int) -> tuple[Breach, ...] | None:
        """GX validates the whole suite, translated or not, on the rows that reached the stage
        (the fields of their input struct), when :meth:`should_validate`; one breach per failed
        expectation, its action from ``on_breach``."""
        if not self.should_validate(batch_id):
            return None
        frame = inputs.select(f"{INPUT}.*")
        return validate_batch(frame, self.suite, self.on_breach, untranslated=self.notes()).breaches

    def may_quarantine_batch(self) -> bool:
        """Whether ``on_breach`` sends a breached batch to quarantine for any expectation."""
        return BreachAction.QUARANTINE_BATCH in (self.on_breach.default, *self.on_breach.overrides.values())

    def result_is_input(self) -> bool:
        """The stage's result is its input, unchanged (see the module doc)."""
        return True

    def check_counts(self, error: Column) -> list[Column]:
        """Aggregate columns counting quarantined rows per translated expectation.

        For ``DataFrame.observe`` over the batch's final error column: one count
        per expectation, named ``check:<stage>:<expectation name>``, counting rows
        this stage failed whose message lists that expectation (a row failing two
        expectations counts for both).
        """
        from pyspark.sql import functions as F

        mine = (error.getField(STAGE) == F.lit(self.name)) & (
            error.getField(KIND) == F.lit(self.kind.value)
        )
        return [
            F.count(
                F.when(mine & error.getField(MESSAGE).contains(f"{e.describe()}: found "), 1)
            ).alias(f"check:{self.name}:{e.name}")
            for e in self.translated
        ]


def _policy(spec: Declaration, raw: Any, suite: Suite) -> BreachPolicy:
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


def from_spec(spec: Declaration, options: ExpectationOptions) -> ExpectationStage:
    """The stage ``spec`` declares, from its validated options; loads the suite and checks it (:meth:`Suite.check`).

    Raises:
        ConfigError: the suite does not load, GX does not know one of its expectations, or
            ``on_breach`` names an expectation the suite does not have.
    """
    path = options.suite
    try:
        suite = load_suite(path)
    except ConfigError as exc:
        raise ConfigError(spec.key("options.suite"), path, exc.allowed) from None
    suite.check()  # unknown types / bad arguments are config errors, now (without importing GX)
    return ExpectationStage(
        name=spec.name,
        suite=suite,
        on_breach=_policy(spec, options.on_breach, suite),
        validate_every=options.validate_every,
        input=spec.input,
    )


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "expectation", ExpectationOptions, from_spec,
    "A Great Expectations suite; row-level expectations as native predicates (expectation).",
)
