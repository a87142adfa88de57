"""The ``checks`` stage's rules: one predicate over one field and its message, per check.

A rule is a pure Column predicate over one field of the input struct (or over
the input itself when ``column`` is omitted), with what a passing value looks
like (``expected``) and how the message shows the value (``found``, rendered as
JSON: strings quoted, numbers bare). Each rule class builds itself from its YAML
mapping (:meth:`Rule.from_options`); :class:`quarantine.stages.checks.Checks`
chains them.

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

An ``expr`` rule's NULL outcome passes; the expression's text appears in the message.
"""

from __future__ import annotations

import json
import operator
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from quarantine.errors import ConfigError
from quarantine.stages._values import (
    as_text,
    compare,
    incomparable,
    java_regex_problem,
    member_of,
    render_value,
    text_length,
)
from quarantine.unlogged import unlogged_analysis

__all__ = [
    "Check",
    "ExprRule",
    "InSetRule",
    "LengthRule",
    "NotInSetRule",
    "NotNullRule",
    "RangeRule",
    "RegexMatch",
    "RegexRule",
    "Rule",
]


class Check(StrEnum):
    """The check names usable in ``rules[].check``; also the error classes."""

    NOT_NULL = "not_null"
    RANGE = "range"
    IN_SET = "in_set"
    NOT_IN_SET = "not_in_set"
    REGEX = "regex"
    LENGTH = "length"
    EXPR = "expr"


class RegexMatch(StrEnum):
    """``regex`` rules: match the whole value, or find the pattern anywhere in it."""

    FULL = "full"
    SEARCH = "search"


Scalar = int | float | str | bool


def _json(v: object) -> str:
    return json.dumps(v, ensure_ascii=False)


def _number_text(v: int | float | str) -> str:
    return _json(v) if isinstance(v, str) else repr(v)


@dataclass(frozen=True)
class Rule(ABC):
    """One check on one field.

    Attributes:
        column: the struct field checked; None checks the input value itself.
        value_type: the checked value's Spark type, set by :class:`Checks` when it
            is evaluated; it makes the rule total (see the module doc).
    """

    column: str | None
    value_type: DataType | None = field(default=None, kw_only=True, compare=False)

    #: The check this rule implements.
    check: ClassVar[Check]
    #: Options besides ``column`` and ``check`` that the rule accepts.
    options: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def passes(self, value: Column) -> Column:
        """True where the value passes; NULL is read as a pass (see the module doc)."""

    @abstractmethod
    def expected(self) -> str:
        """What a passing value looks like, as written after ``expected``."""

    def found(self, value: Column) -> Column:
        """What the message shows after ``found``."""
        return render_value(value)

    def target(self, value: Column) -> Column:
        """The checked value: the field ``column`` of the input, or the input."""
        return value.getField(self.column) if self.column is not None else value

    def message(self, value: Column) -> Column:
        """``field 'amount': expected between 0 and 10000, found 15000.5``."""
        where = f"field '{self.column}'" if self.column is not None else "input"
        return F.concat(F.lit(f"{where}: expected {self.expected()}, found "), self.found(value))

    @classmethod
    @abstractmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        """Build from a rule mapping; ``key`` is ``stages[i].options.rules[j]``."""


@dataclass(frozen=True)
class NotNullRule(Rule):
    """The value is not NULL."""

    check: ClassVar[Check] = Check.NOT_NULL

    def passes(self, value: Column) -> Column:
        return value.isNotNull()

    def expected(self) -> str:
        return "a value"

    def found(self, value: Column) -> Column:
        return F.lit("NULL")

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        return cls(column)


@dataclass(frozen=True)
class RangeRule(Rule):
    """``min <= value <= max`` (either bound optional, each inclusive or not)."""

    min: int | float | str | None = None
    max: int | float | str | None = None
    min_inclusive: bool = True
    max_inclusive: bool = True
    check: ClassVar[Check] = Check.RANGE
    options: ClassVar[tuple[str, ...]] = ("min", "max", "min_inclusive", "max_inclusive")

    def _within(self, value: Column) -> Column | None:
        """The range test: NULL where the value cannot be compared; None if no value can."""
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
        within = self._within(value)
        if within is None:
            return F.when(value.isNotNull(), F.lit(False))
        return F.when(value.isNotNull(), F.coalesce(within, F.lit(False)))

    def found(self, value: Column) -> Column:
        why = F.lit(f" ({incomparable(self.value_type, [b for b in (self.min, self.max) if b is not None])})")
        within = self._within(value)
        if within is None:
            return F.concat(render_value(value), why)
        return F.concat(render_value(value), F.when(within.isNull(), why).otherwise(F.lit("")))

    def expected(self) -> str:
        if (
            self.min is not None
            and self.max is not None
            and self.min_inclusive
            and self.max_inclusive
        ):
            return f"between {_number_text(self.min)} and {_number_text(self.max)}"
        parts = []
        if self.min is not None:
            parts.append(f"{'>=' if self.min_inclusive else '>'} {_number_text(self.min)}")
        if self.max is not None:
            parts.append(f"{'<=' if self.max_inclusive else '<'} {_number_text(self.max)}")
        return " and ".join(parts)

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        lo, hi = opts.get("min"), opts.get("max")
        if lo is None and hi is None:
            raise ConfigError(f"{key}.min", None, "a min and/or a max for a range check")
        for name, v in (("min", lo), ("max", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float | str)):
                raise ConfigError(f"{key}.{name}", v, "a number (or a date/timestamp string)")
        if (isinstance(lo, int | float) and isinstance(hi, int | float) and lo > hi) or (
            isinstance(lo, str) and isinstance(hi, str) and lo > hi
        ):
            raise ConfigError(f"{key}.min", lo, f"a value <= max ({hi})")
        return cls(
            column,
            lo,
            hi,
            _flag(opts, "min_inclusive", key),
            _flag(opts, "max_inclusive", key),
        )


def _flag(opts: Mapping[str, Any], name: str, key: str) -> bool:
    v = opts.get(name, True)
    if not isinstance(v, bool):
        raise ConfigError(f"{key}.{name}", v, "true | false")
    return v


def _values(opts: Mapping[str, Any], key: str) -> tuple[Scalar, ...]:
    vs = opts.get("values")
    if not isinstance(vs, list) or not vs:
        raise ConfigError(f"{key}.values", vs, "a non-empty list of values")
    for v in vs:
        if not isinstance(v, int | float | str | bool):
            raise ConfigError(f"{key}.values", vs, "a list of strings, numbers or booleans")
    return tuple(vs)


@dataclass(frozen=True)
class InSetRule(Rule):
    """The value is one of ``values``."""

    values: tuple[Scalar, ...] = ()
    check: ClassVar[Check] = Check.IN_SET
    options: ClassVar[tuple[str, ...]] = ("values",)

    def passes(self, value: Column) -> Column:
        return member_of(value, self.value_type, self.values)

    def expected(self) -> str:
        return "one of " + ", ".join(_json(v) for v in self.values)

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        return cls(column, _values(opts, key))


@dataclass(frozen=True)
class NotInSetRule(Rule):
    """The value is none of ``values``."""

    values: tuple[Scalar, ...] = ()
    check: ClassVar[Check] = Check.NOT_IN_SET
    options: ClassVar[tuple[str, ...]] = ("values",)

    def passes(self, value: Column) -> Column:
        return ~member_of(value, self.value_type, self.values)

    def expected(self) -> str:
        return "none of " + ", ".join(_json(v) for v in self.values)

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        return cls(column, _values(opts, key))


_PY_ONLY_REGEX = re.compile(r"\(\?P[<=]")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")


@dataclass(frozen=True)
class RegexRule(Rule):
    """The value matches ``pattern`` (Java regex; see the module doc)."""

    pattern: str = ""
    match: RegexMatch = RegexMatch.FULL
    check: ClassVar[Check] = Check.REGEX
    options: ClassVar[tuple[str, ...]] = ("pattern", "match")

    def passes(self, value: Column) -> Column:
        java = f"\\A(?:{self.pattern})\\z" if self.match is RegexMatch.FULL else self.pattern
        return as_text(value, self.value_type).rlike(java)

    def expected(self) -> str:
        verb = "to match" if self.match is RegexMatch.FULL else "to contain a match of"
        return f"{verb} /{self.pattern}/"

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        pattern = opts.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"{key}.pattern", pattern, "a non-empty regular expression")
        if _PY_ONLY_REGEX.search(pattern):
            raise ConfigError(
                f"{key}.pattern",
                pattern,
                "a Java regular expression: (?P<name>…) and (?P=name) are Python-only; "
                "use (?<name>…) and \\k<name>",
            )
        try:
            re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))
        except re.error as exc:
            raise ConfigError(
                f"{key}.pattern", pattern, f"a valid regular expression ({exc})"
            ) from None
        problem = java_regex_problem(pattern)
        if problem is not None:
            raise ConfigError(
                f"{key}.pattern", pattern, f"a regular expression java.util.regex compiles ({problem})"
            )
        try:
            match = RegexMatch(str(opts.get("match", "full")).lower())
        except ValueError:
            raise ConfigError(f"{key}.match", opts.get("match"), "full | search") from None
        return cls(column, pattern, match)


@dataclass(frozen=True)
class LengthRule(Rule):
    """``min <= length(value) <= max`` (characters; bytes for BINARY)."""

    min: int | None = None
    max: int | None = None
    check: ClassVar[Check] = Check.LENGTH
    options: ClassVar[tuple[str, ...]] = ("min", "max")

    def passes(self, value: Column) -> Column:
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
        n = text_length(value, self.value_type)
        if n is None:
            assert self.value_type is not None
            return F.concat(render_value(value), F.lit(f" ({self.value_type.simpleString()}: no length)"))
        return F.format_string("%s (length %d)", render_value(value), n)

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        lo, hi = opts.get("min"), opts.get("max")
        if lo is None and hi is None:
            raise ConfigError(f"{key}.min", None, "a min and/or a max for a length check")
        for name, v in (("min", lo), ("max", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"{key}.{name}", v, "an integer >= 0")
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError(f"{key}.min", lo, f"a length <= max ({hi})")
        return cls(column, lo, hi)


@dataclass(frozen=True)
class ExprRule(Rule):
    """A Spark SQL boolean expression over the staged DataFrame is not false."""

    expr: str = ""
    check: ClassVar[Check] = Check.EXPR
    options: ClassVar[tuple[str, ...]] = ("expr",)

    def passes(self, value: Column) -> Column:
        return F.expr(self.expr)

    def expected(self) -> str:
        return self.expr

    def found(self, value: Column) -> Column:
        if self.column is None:
            return F.lit("false")
        return render_value(value)

    @classmethod
    def from_options(cls, column: str | None, opts: Mapping[str, Any], key: str) -> Rule:
        text = opts.get("expr")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{key}.expr", text, "a Spark SQL boolean expression")
        _check_sql(text.strip(), f"{key}.expr")
        return cls(column, text.strip())


def _check_sql(text: str, key: str) -> None:
    """Parse ``text`` with Spark when a session is active (a syntax error is a config error).

    Only the parser's verdict counts: the expression is analysed against an
    empty frame, so unknown columns (which exist only in the staged DataFrame)
    are expected and ignored. No job runs.
    """
    from pyspark.errors import ParseException
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    try:
        with unlogged_analysis():  # an unresolved column is expected here: not a 12 KB log line
            _ = session.range(0).select(F.expr(text)).schema
    except ParseException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, text, f"a Spark SQL boolean expression ({first})") from None
    except Exception:  # unresolved columns and the like: only resolvable in the stage's frame
        return
