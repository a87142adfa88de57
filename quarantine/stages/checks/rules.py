"""The ``checks`` stage's rules: one predicate over one field and its message, per check.

A rule is a pure Column predicate over one field of the input struct (or over
the input itself when ``column`` is omitted), with what a passing value looks
like (``expected``) and how the message shows the value (``found``, rendered as
JSON: strings quoted, numbers bare). Each rule is one pydantic model: its options,
their cross-field rules as validators (checked when a config is loaded, so the JSON
Schema and ``quarantine validate`` agree), and its predicate;
:class:`quarantine.stages.checks.Checks` chains them. :data:`RULES` lists them.

NULL semantics: every check except ``not_null`` passes on NULL (like a SQL
``CHECK`` constraint), so optional fields can be checked; add a ``not_null``
rule to require a value.

No value fails the job: rules are built for the field's type when the stage
is applied. A ``range`` compares numbers with numbers, text with text (string
bounds), DATE/TIMESTAMP fields with bounds that read as one (``"2026-01-31"``);
a STRING field against numeric bounds is read as a number, and one that is not
(``"abc"``) fails its row (``found "abc" (a string that is not a number)``);
a field of a type that cannot be compared with the bounds (ARRAY, MAP,
STRUCT, BINARY…) fails every non-NULL row, naming the type. ``in_set`` /
``not_in_set`` skip values that cannot equal a value of the field's type.
``length`` measures STRING (characters), BINARY (bytes) and other atomic
values as their STRING form; ARRAY, MAP and STRUCT have no length (the row
fails). Only ``expr`` rules are the author's to keep total (use ``try_*``
functions).

Regular expressions run on the JVM (``java.util.regex``), and are compiled
with Python's ``re`` and by Spark (when a session is active) when the stage
is built, so that a broken pattern is a config error. The dialects differ at the edges: Python's ``(?P<name>…)`` and
``(?P=name)`` are not Java and are rejected; Java's ``(?<name>…)`` is accepted;
``\\Z`` means "end" in Python but "end before a final line break" in Java.
``match: full`` means the whole value must match (Java ``matches()``, built as
``\\A(?:pattern)\\z``); ``match: search`` means the pattern occurs anywhere
(Java ``find()``, Spark's ``rlike``).

An ``expr`` rule's NULL outcome passes; the message holds the expression's text and the
values of the columns it reads (:func:`column_references` that resolve in the staged row).
"""

from __future__ import annotations

import json
import operator
import re
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import ConfigDict, Field, JsonValue, PrivateAttr, Tag, field_validator, model_validator

from quarantine.redaction import REDACTED, is_secret_key
from quarantine.stage import StageOptions
from quarantine.unlogged import unlogged_analysis
from quarantine.values.options import BOUND, FIELD, VALUES, const, tagged
from quarantine.values.paths import FieldPath, field_path, path_type, read_path
from quarantine.values.spark import (
    as_text,
    compare,
    incomparable,
    java_regex_problem,
    member_of,
    render_value,
    text_length,
)
from quarantine.values.types import BOOL, TEXT, choice, fail, integer

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

__all__ = [
    "RULES",
    "ExprRule",
    "InSetRule",
    "LengthRule",
    "NotInSetRule",
    "NotNullRule",
    "RangeRule",
    "RegexMatch",
    "RegexRule",
    "Rule",
    "RuleOptions",
    "column_references",
]


class RegexMatch(StrEnum):
    """``regex`` rules: match the whole value, or find the pattern anywhere in it."""

    FULL = "full"
    SEARCH = "search"


def _json(v: object) -> str:
    return json.dumps(v, ensure_ascii=False)


def _number_text(v: int | float | str) -> str:
    return _json(v) if isinstance(v, str) else repr(v)


class Rule(StageOptions):
    """One check on one field: its options (the model) and its predicate.

    ``check`` (each rule's one constant) is also the error class of a row it fails.
    """

    column: Annotated[str | None, FIELD] = Field(None, examples=["amount", "device.screen_w"])
    """The struct field checked, or a path into nested structs (device.screen_w); omit it to check the
    stage's input itself."""
    check: str
    _value_type: DataType | None = PrivateAttr(None)
    _path: FieldPath | None = PrivateAttr(None)

    def for_input(self, input_type: DataType | None) -> Self:
        """This rule built for an input of ``input_type`` (set by :class:`Checks` when it is
        evaluated): the checked field's path in it, and its type, which makes the rule total
        (see the module doc)."""
        typed = self.model_copy()
        if self.column is None:
            typed._value_type = input_type
        else:
            typed._path = field_path(self.column, input_type)
            typed._value_type = path_type(input_type, typed._path)
        return typed

    @property
    def value_type(self) -> DataType | None:
        """The checked value's Spark type, once :meth:`for_input` gave it."""
        return self._value_type

    def passes(self, value: Column) -> Column:
        """True where the value passes; NULL is read as a pass (see the module doc)."""
        raise NotImplementedError

    def expected(self) -> str:
        """What a passing value looks like, as written after ``expected``."""
        raise NotImplementedError

    def found(self, value: Column) -> Column:
        """What the message shows after ``found``."""
        return render_value(value)

    def target(self, value: Column) -> Column:
        """The checked value: the field (or nested field) ``column`` of the input, or the input."""
        if self.column is None:
            return value
        return read_path(value, self._path or field_path(self.column))

    def message(self, value: Column) -> Column:
        """``field 'amount': expected between 0 and 10000, found 15000.5``."""
        from pyspark.sql import functions as F

        where = f"field '{self.column}'" if self.column is not None else "input"
        return F.concat(F.lit(f"{where}: expected {self.expected()}, found "), self.found(value))


class NotNullRule(Rule):
    """The value is not NULL."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"column": "order_id", "check": "not_null"}]})

    check: Annotated[str, const("not_null")]

    def passes(self, value: Column) -> Column:
        return value.isNotNull()

    def expected(self) -> str:
        return "a value"

    def found(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.lit("NULL")


#: The JSON Schema of "at least one of min and max" (the validators say it to the loader).
_A_BOUND: list[JsonValue] = [{"required": ["min"]}, {"required": ["max"]}]


class RangeRule(Rule):
    """min <= value <= max; NULL passes. Bounds are numbers, or date/timestamp strings."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "amount", "check": "range", "min": 0, "max": 10_000},
    ], "anyOf": _A_BOUND})

    check: Annotated[str, const("range")]
    min: Annotated[Any, BOUND] = Field(None, examples=[0, "2026-01-01"])
    """Lower bound (at least one of min and max)."""
    max: Annotated[Any, BOUND] = Field(None, examples=[10_000, "2026-12-31 23:59:59"])
    """Upper bound."""
    min_inclusive: Annotated[bool, BOOL] = True
    """Whether the value may equal min."""
    max_inclusive: Annotated[bool, BOOL] = True
    """Whether the value may equal max."""

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        lo, hi = self.min, self.max
        if lo is None and hi is None:
            raise fail("a min and/or a max for a range check", at="min", value=None)
        if (isinstance(lo, int | float) and isinstance(hi, int | float) and lo > hi) or (
            isinstance(lo, str) and isinstance(hi, str) and lo > hi
        ):
            raise fail(f"a value <= max ({hi})", at="min", value=lo)
        return self

    def _within(self, value: Column) -> Column | None:
        """The range test: NULL where the value cannot be compared; None if no value can."""
        from pyspark.sql import functions as F

        parts = []
        if self.min is not None:
            parts.append(compare(value, self.value_type, operator.ge if self.min_inclusive else operator.gt, self.min))
        if self.max is not None:
            parts.append(compare(value, self.value_type, operator.le if self.max_inclusive else operator.lt, self.max))
        ok = F.lit(True)
        for p in parts:
            if p is None:
                return None
            ok = ok & p
        return ok

    def passes(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        within = self._within(value)
        if within is None:
            return F.when(value.isNotNull(), F.lit(False))
        return F.when(value.isNotNull(), F.coalesce(within, F.lit(False)))

    def found(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        why = F.lit(f" ({incomparable(self.value_type, [b for b in (self.min, self.max) if b is not None])})")
        within = self._within(value)
        if within is None:
            return F.concat(render_value(value), why)
        return F.concat(render_value(value), F.when(within.isNull(), why).otherwise(F.lit("")))

    def expected(self) -> str:
        if self.min is not None and self.max is not None and self.min_inclusive and self.max_inclusive:
            return f"between {_number_text(self.min)} and {_number_text(self.max)}"
        parts = []
        if self.min is not None:
            parts.append(f"{'>=' if self.min_inclusive else '>'} {_number_text(self.min)}")
        if self.max is not None:
            parts.append(f"{'<=' if self.max_inclusive else '<'} {_number_text(self.max)}")
        return " and ".join(parts)


class InSetRule(Rule):
    """The value is one of values; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
    ]})

    check: Annotated[str, const("in_set")]
    values: Annotated[tuple[Any, ...], VALUES] = Field(examples=[["EUR", "USD"]])
    """The allowed values."""

    def passes(self, value: Column) -> Column:
        return member_of(value, self.value_type, self.values)

    def expected(self) -> str:
        return "one of " + ", ".join(_json(v) for v in self.values)


class NotInSetRule(Rule):
    """The value is none of values; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "customer", "check": "not_in_set", "values": ["test", "unknown"]},
    ]})

    check: Annotated[str, const("not_in_set")]
    values: Annotated[tuple[Any, ...], VALUES] = Field(examples=[["test", "unknown"]])
    """The forbidden values."""

    def passes(self, value: Column) -> Column:
        return ~member_of(value, self.value_type, self.values)

    def expected(self) -> str:
        return "none of " + ", ".join(_json(v) for v in self.values)


_PY_ONLY_REGEX = re.compile(r"\(\?P[<=]")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")


class RegexRule(Rule):
    """The value matches a Java regular expression; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "currency", "check": "regex", "pattern": "[A-Z]{3}"},
    ]})

    check: Annotated[str, const("regex")]
    pattern: Annotated[str, TEXT] = Field(examples=["[A-Z]{3}"])
    """A java.util.regex pattern; named groups are (?<name>...)."""
    match: Annotated[RegexMatch, choice(RegexMatch)] = RegexMatch.FULL
    """full: the whole value matches; search: the pattern occurs anywhere."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        if _PY_ONLY_REGEX.search(pattern):
            raise fail(
                "a Java regular expression: (?P<name>…) and (?P=name) are Python-only; use (?<name>…) and \\k<name>"
            )
        try:
            re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))
        except re.error as exc:
            raise fail(f"a valid regular expression ({exc})") from None
        problem = java_regex_problem(pattern)
        if problem is not None:
            raise fail(f"a regular expression java.util.regex compiles ({problem})")
        return pattern

    def passes(self, value: Column) -> Column:
        java = f"\\A(?:{self.pattern})\\z" if self.match is RegexMatch.FULL else self.pattern
        return as_text(value, self.value_type).rlike(java)

    def expected(self) -> str:
        verb = "to match" if self.match is RegexMatch.FULL else "to contain a match of"
        return f"{verb} /{self.pattern}/"


class LengthRule(Rule):
    """min <= length <= max (characters; bytes for BINARY); NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "order_id", "check": "length", "min": 1, "max": 64},
    ], "anyOf": _A_BOUND})

    check: Annotated[str, const("length")]
    min: Annotated[int | None, integer(0, optional=True)] = Field(None, examples=[1])
    """Shortest length (at least one of min and max)."""
    max: Annotated[int | None, integer(0, optional=True)] = Field(None, examples=[64])
    """Longest length."""

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min is None and self.max is None:
            raise fail("a min and/or a max for a length check", at="min", value=None)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise fail(f"a length <= max ({self.max})", at="min", value=self.min)
        return self

    def passes(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        n = text_length(value, self.value_type)
        if n is None:  # ARRAY, MAP, STRUCT: no length
            return F.when(value.isNotNull(), F.lit(False))
        ok = F.lit(True)
        if self.min is not None:
            ok = ok & (n >= F.lit(self.min))
        if self.max is not None:
            ok = ok & (n <= F.lit(self.max))
        return ok

    def expected(self) -> str:
        if self.min is not None and self.max is not None:
            return f"length between {self.min} and {self.max}"
        return f"length >= {self.min}" if self.min is not None else f"length <= {self.max}"

    def found(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        n = text_length(value, self.value_type)
        if n is None:
            assert self.value_type is not None
            return F.concat(render_value(value), F.lit(f" ({self.value_type.simpleString()}: no length)"))
        return F.format_string("%s (length %d)", render_value(value), n)


class ExprRule(Rule):
    """A Spark SQL boolean expression over the staged row; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"check": "expr", "expr": "parse_order.result.amount > 0"},
    ]})

    check: Annotated[str, const("expr")]
    expr: Annotated[str, TEXT] = Field(examples=["parse_order.result.amount > 0"])
    """E.g. 'parse_order.result.amount > 0'."""

    @field_validator("expr")
    @classmethod
    def _parses(cls, text: str) -> str:
        _check_sql(text)
        return text

    _reads: tuple[str, ...] = PrivateAttr(())

    def reading(self, names: tuple[str, ...]) -> Self:
        """This rule, its message showing the values of ``names``: the columns and fields of the staged
        row its expression reads (:func:`column_references` that resolve there; set by :class:`Checks`)."""
        typed = self.model_copy()
        typed._reads = names
        return typed

    def passes(self, value: Column) -> Column:
        from pyspark.sql import functions as F

        return F.expr(self.expr)

    def expected(self) -> str:
        return self.expr

    def message(self, value: Column) -> Column:
        """``row: expected order.amount > 0, found order.amount = -3.0`` (each value the expression reads)."""
        from pyspark.sql import functions as F

        if self.column is not None:
            return super().message(value)
        return F.concat(F.lit(f"row: expected {self.expected()}, found "), self.found(value))

    def found(self, value: Column) -> Column:
        """The values of the columns the expression reads (``order.amount = -3.0, order.quantity = 2``);
        a field named like a credential shows ``[redacted]``; ``false`` when none is known."""
        from pyspark.sql import functions as F

        if self.column is not None:
            return render_value(value)
        if not self._reads:
            return F.lit("false")
        parts: list[Column] = []
        for i, name in enumerate(self._reads):
            shown = F.lit(REDACTED) if is_secret_key(name.rsplit(".", 1)[-1].strip("`")) else render_value(F.expr(name))
            parts += [F.lit(f"{', ' if i else ''}{name} = "), shown]
        return F.concat(*parts)


#: Check name of a ``checks`` rule → its model: THE list of rules (the JSON Schema's and the reference's).
RULES: dict[str, type[Rule]] = {
    "not_null": NotNullRule,
    "range": RangeRule,
    "in_set": InSetRule,
    "not_in_set": NotInSetRule,
    "regex": RegexRule,
    "length": LengthRule,
    "expr": ExprRule,
}

#: One rule of ``rules:``, picked by its ``check``.
RuleOptions = Annotated[
    Annotated[NotNullRule, Tag("check=not_null")]
    | Annotated[RangeRule, Tag("check=range")]
    | Annotated[InSetRule, Tag("check=in_set")]
    | Annotated[NotInSetRule, Tag("check=not_in_set")]
    | Annotated[RegexRule, Tag("check=regex")]
    | Annotated[LengthRule, Tag("check=length")]
    | Annotated[ExprRule, Tag("check=expr")],
    tagged("check", tuple(RULES)),
]


_SQL_TOKEN = re.compile(
    r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|((?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)"""
    r"""(?:\s*\.\s*(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*))*)(\s*\()?"""
)


def column_references(text: str) -> tuple[str, ...]:
    """The names in a SQL expression that may be columns, each once, in order: dotted names
    (``order.amount``, ```a b`.c``) outside string literals, not followed by ``(`` (a function).

    Keywords (``AND``, ``NULL``) and a lambda's variables are among them: only Spark can tell
    which resolve in the staged row (:meth:`quarantine.stages.checks.Checks.evaluate` asks it).
    """
    seen: dict[str, None] = {}
    for m in _SQL_TOKEN.finditer(text):
        name, call = m.group(1), m.group(2)
        if name is None or call is not None:
            continue
        start = m.start(1)
        if start and (text[start - 1].isdigit() or text[start - 1] == "."):  # 1e5, 1.5d: part of a number
            continue
        seen.setdefault(re.sub(r"\s*\.\s*", ".", name), None)
    return tuple(seen)


def _check_sql(text: str) -> None:
    """Parse ``text`` with Spark when a session is active (a syntax error is a config error).

    Only the parser's verdict counts: the expression is analysed against an
    empty frame, so unknown columns (which exist only in the staged DataFrame)
    are expected and ignored. No job runs.
    """
    from pyspark.errors import ParseException
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    session = SparkSession.getActiveSession()
    if session is None:
        return
    try:
        with unlogged_analysis():  # an unresolved column is expected here: not a 12 KB log line
            _ = session.range(0).select(F.expr(text)).schema
    except ParseException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise fail(f"a Spark SQL boolean expression ({first})") from None
    except Exception:  # unresolved columns and the like: only resolvable in the stage's frame
        return
