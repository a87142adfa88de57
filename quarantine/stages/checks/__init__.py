"""``checks``: native row checks; a record breaking any rule is quarantined.

Each rule is a pure Column predicate over one field of the input struct (or
over the input itself when ``column`` is omitted). All rules are evaluated in
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
outcome passes; the expression's text appears in the message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, NullType, StructType

from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.schema import ErrorKind
from quarantine.stage import Stage, StageContext, outcome
from quarantine.stage_types import ChecksOptions
from quarantine.stages.checks.rules import (
    Check,
    ExprRule,
    InSetRule,
    LengthRule,
    NotInSetRule,
    NotNullRule,
    RangeRule,
    RegexMatch,
    RegexRule,
    Rule,
)

__all__ = [
    "Check",
    "Checks",
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
    "parse_rule",
    "parse_rules",
]


_RULES: dict[Check, type[Rule]] = {
    Check.NOT_NULL: NotNullRule,
    Check.RANGE: RangeRule,
    Check.IN_SET: InSetRule,
    Check.NOT_IN_SET: NotInSetRule,
    Check.REGEX: RegexRule,
    Check.LENGTH: LengthRule,
    Check.EXPR: ExprRule,
}


def parse_rule(raw: object, key: str) -> Rule:
    """Build one rule from its YAML mapping.

    Args:
        raw: ``{column: amount, check: range, min: 0, max: 10000}``.
        key: the rule's config path, ``stages[i].options.rules[j]``.

    Raises:
        ConfigError: naming ``<key>.<option>`` for an unknown check, an unknown
            or missing option, or a bad value.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(key, raw, "a mapping such as {column: amount, check: not_null}")
    check_raw = raw.get("check")
    try:
        check = Check(str(check_raw))
    except ValueError:
        raise ConfigError(f"{key}.check", check_raw, f"one of {' | '.join(Check)}") from None
    cls = _RULES[check]
    allowed = ("column", "check", *cls.options)
    for k in raw:
        if k not in allowed:
            raise ConfigError(
                f"{key}.{k}", raw[k], f"one of the {check} options: {', '.join(allowed)}"
            )
    column = raw.get("column")
    if column is not None and (not isinstance(column, str) or not column):
        raise ConfigError(
            f"{key}.column", column, "a field name (omit it to check the input itself)"
        )
    return cls.from_options(column, raw, key)


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
        input_type = ctx.type_of(value)
        rules = [
            r if isinstance(r, ExprRule) else replace(r, value_type=_field_type(input_type, r.column))
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
        error_class = F.when(fails[0], F.lit(rules[0].check.value))
        for r, fail in zip(rules[1:], fails[1:], strict=True):
            error_class = error_class.when(fail, F.lit(r.check.value))
        failed = fails[0]
        for fail in fails[1:]:
            failed = failed | fail
        return outcome(value, failed, self.error(error_class, F.concat_ws("; ", *parts)))


def _field_type(input_type: DataType | None, column: str | None) -> DataType | None:
    if column is None:
        return input_type
    if isinstance(input_type, StructType) and column in input_type.fieldNames():
        return input_type[column].dataType
    return None


def parse_rules(raw: object, key: str) -> tuple[Rule, ...]:
    """Build every rule of ``options.rules`` (``key`` names that list)."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigError(
            key, raw, "a non-empty list of rules such as {column: x, check: not_null}"
        )
    return tuple(parse_rule(r, f"{key}[{j}]") for j, r in enumerate(raw))


def from_spec(spec: StageSpec, options: ChecksOptions) -> Checks:
    """The stage ``spec`` declares, from its validated options (see the module docstring for the rules).

    Raises:
        ConfigError: naming ``stages[i].options.rules[j].<key>`` for a rule its model lets
            through and the rule refuses (a bound of the wrong kind for its check…).
    """
    written = [r.model_dump(exclude_unset=True) for r in options.rules]
    return Checks(name=spec.name, rules=parse_rules(written, spec.key("options.rules")), input=spec.input)
