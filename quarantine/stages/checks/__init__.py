"""``checks``: native row checks; a record breaking any rule is quarantined.

Each rule is a pure Column predicate over one field of the input struct, named by
its path when it is nested (``device.screen_w``: :mod:`quarantine.values.paths`), or
over the input itself when ``column`` is omitted. All rules are evaluated in
one pass of Spark expressions — one ``CASE WHEN`` chain picks the error class,
no UDFs. The result is the input, unchanged.

On failure, ``error_class`` is the check name of the *first* failing rule (in
declaration order) and the message lists *every* failing rule, joined by
``; ``::

    field 'amount': expected between 0 and 10000, found 15000.5; field 'currency':
    expected one of "EUR", "USD", found "JPY"

(one line in the message).

Found values are rendered as JSON (strings quoted, numbers bare).

Checks and their options (every rule has ``column`` and ``check``)::

    not_null                                  the value is not NULL
    range       min, max, min_inclusive, max_inclusive (default true); one of min/max required
    in_set      values: [..]                  the value is one of values
    not_in_set  values: [..]                  the value is none of values
    regex       pattern, match: full|search   (default full)
    length      min, max                      character length (bytes for BINARY)
    expr        expr: "<SQL boolean>"         see below

NULL semantics (every check but ``not_null`` passes on NULL), how each rule stays
total over any field type, and the regex dialect: :mod:`quarantine.stages.checks.rules`.

``expr`` rules are Spark SQL boolean expressions evaluated in the scope of the
staged DataFrame: the source columns and every earlier stage's column, so a
field of the ``parse_order`` stage is ``parse_order.result.amount``. A NULL
outcome passes. The message holds the expression's text and the values of the
columns it reads (the names in it that resolve in the staged row, asked of Spark's
analysis when the stage is applied; a field named like a credential is redacted)::

    row: expected parse_order.result.amount > 0, found parse_order.result.amount = -3.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from quarantine.columns import ErrorKind
from quarantine.errors import ConfigError
from quarantine.stage import Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.stages.checks.rules import (
    RULES,
    ExprRule,
    InSetRule,
    LengthRule,
    NotInSetRule,
    NotNullRule,
    RangeRule,
    RegexMatch,
    RegexRule,
    Rule,
    RuleOptions,
    column_references,
)
from quarantine.values.types import config_error

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = [
    "RULES",
    "STAGE_TYPE",
    "Checks",
    "ChecksOptions",
    "ExprRule",
    "InSetRule",
    "LengthRule",
    "NotInSetRule",
    "NotNullRule",
    "RangeRule",
    "RegexMatch",
    "RegexRule",
    "Rule",
    "from_spec",
    "parse_rules",
]


class ChecksOptions(StageOptions):
    """Options of a ``checks`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"rules": [
        {"column": "order_id", "check": "not_null"},
        {"column": "amount", "check": "range", "min": 0, "max": 10_000},
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
    ]}]})

    rules: Annotated[list[RuleOptions], Field(min_length=1)] = Field(
        examples=[[{"column": "order_id", "check": "not_null"}]]
    )
    """The rules, in order; the first failing one names the error class."""


@dataclass(frozen=True, repr=False)
class Checks(Stage):
    """Validate rows against rules; the result is the input unchanged.

    Attributes:
        name: stage name.
        rules: the rules, in declaration order (the first failing one names the error class).
        input: the struct (or plain) column or stage checked (default: the previous stage).
    """

    name: str
    rules: tuple[Rule, ...]
    input: str | None = None
    kind: ErrorKind = field(default=ErrorKind.VALIDATE)

    def __post_init__(self) -> None:
        if not self.rules:
            raise ConfigError(f"stage {self.name}: options.rules", [], "at least one rule")

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The input, unchanged."""
        return input_type

    def fields_read(self) -> tuple[tuple[str, str], ...]:
        """Each rule's ``column``, named by its ``options.rules[j].column`` key."""
        return tuple(
            (f"options.rules[{j}].column", rule.column) for j, rule in enumerate(self.rules) if rule.column is not None
        )

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        """Built-in rules are pure; an ``expr`` rule is the author's SQL (it might call ``rand()``)."""
        return not any(isinstance(r, ExprRule) for r in self.rules)

    def analysis_problem(self, scope: DataFrame) -> tuple[str, str, str] | None:
        """The first ``expr`` rule Spark cannot analyse over ``scope``, or that is not a condition."""
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F
        from pyspark.sql.types import BooleanType, NullType

        for j, rule in enumerate(self.rules):
            if not isinstance(rule, ExprRule):
                continue
            allowed = "a Spark SQL condition over the staged row (source columns and earlier stages' columns)"
            try:
                dtype = scope.select(F.expr(rule.expr)).schema[0].dataType
            except AnalysisException as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                return f"options.rules[{j}].expr", rule.expr, f"{allowed}; Spark: {first}"
            if not isinstance(dtype, BooleanType | NullType):
                return f"options.rules[{j}].expr", rule.expr, f"{allowed}; it is of type {dtype.simpleString()}"
        return None

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        # every rule built for its value's type, so that no value can fail the job
        from pyspark.sql import functions as F

        input_type = ctx.type_of(value)
        rules = [
            r.reading(_reads(r.expr, ctx)) if isinstance(r, ExprRule) and r.column is None else r.for_input(input_type)
            for r in self.rules
        ]
        # each rule's verdict once per row: the failure test, the class and the message read it
        fails = [
            ctx.once(f"rule{i}", ~F.coalesce(r.passes(r.target(value)), F.lit(True)))
            for i, r in enumerate(rules)
        ]
        parts = [
            F.when(fail, r.message(r.target(value)))
            for r, fail in zip(rules, fails, strict=True)
        ]
        error_class = F.when(fails[0], F.lit(rules[0].check))
        for r, fail in zip(rules[1:], fails[1:], strict=True):
            error_class = error_class.when(fail, F.lit(r.check))
        failed = fails[0]
        for fail in fails[1:]:
            failed = failed | fail
        return outcome(value, failed, self.error(error_class, F.concat_ws("; ", *parts)))


#: Names an expression may hold that are literals, never columns.
_LITERALS = frozenset({"null", "true", "false"})


def _reads(expr: str, ctx: StageContext) -> tuple[str, ...]:
    """The names in ``expr`` that are columns or fields of the staged row (analysis only, no job);
    empty when the row's types are not known (the stage evaluated outside ``apply_stages``)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    out: list[str] = []
    for name in column_references(expr):
        if name.lower() in _LITERALS:
            continue
        try:
            resolved = ctx.type_of(F.expr(name))
        except AnalysisException:  # a keyword, a lambda's variable, a name the row does not have
            continue
        if resolved is not None:
            out.append(name)
    return tuple(out)


_RULE_LIST: TypeAdapter[list[Any]] = TypeAdapter(Annotated[list[RuleOptions], Field(min_length=1)])


def parse_rules(raw: object, key: str) -> tuple[Rule, ...]:
    """The rules of ``raw`` (mappings as written in ``options.rules``), validated by their models.

    Args:
        raw: ``[{column: amount, check: range, min: 0, max: 10000}, …]``.
        key: the config path of that list, for errors (``stages[3].options.rules``).

    Raises:
        ConfigError: naming ``<key>[j].<option>`` for an unknown check or option, or a bad value.
    """
    try:
        return tuple(_RULE_LIST.validate_python(raw))
    except ValidationError as exc:
        raise config_error(exc, _RULE_LIST.json_schema(by_alias=True), key) from None


def from_spec(spec: Declaration, options: ChecksOptions) -> Checks:
    """The stage ``spec`` declares, from its validated options (see the module docstring for the rules)."""
    return Checks(name=spec.name, rules=tuple(options.rules), input=spec.input)


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "checks", ChecksOptions, from_spec, "Native row checks; a row breaking any rule is quarantined (validate)."
)
