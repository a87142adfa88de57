"""Great Expectations 1.x suites: JSON in, a frozen :class:`Suite` out.

A suite file is an ``ExpectationSuite`` saved as JSON by GX 1.x::

    {"name": "orders",
     "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "order_id"}},
        {"type": "expect_column_values_to_be_between",
         "kwargs": {"column": "amount", "min_value": 0, "max_value": 10000, "mostly": 0.99}}
     ],
     "meta": {}}

The legacy 0.x key ``expectation_type`` is accepted as a synonym of ``type``.
Loading and checking are pure (no GX import): :meth:`Suite.check` holds each expectation
against :mod:`quarantine.expectations.gx_catalog` (GX's expectation types and their
arguments, generated from GX's registry), so an unknown type, a missing or unknown argument
or a value of the wrong kind fails when the expectation stage is built, before any data is
read, and ``quarantine validate`` never imports GX. The catalog also holds the rules GX's
validators check when an expectation is built (a ``*_to_be_between`` with neither bound, a
row count's ``min_value`` above its ``max_value``, an empty ``value_set``…), and the check
holds a suite to them. :meth:`Suite.to_gx` builds GX's own object when a run first
validates a batch, and GX checks the suite again then.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from quarantine.errors import ConfigError
from quarantine.expectations.gx_catalog import COMMON_ARGUMENTS, COMMON_RULES, EXPECTATION_TYPES, GX_VERSION, RULES

__all__ = ["ExpectationSpec", "Suite", "expectation_problem", "load_suite", "parse_suite"]

#: kwargs that shape GX's output, not what the expectation checks.
_NON_ARGUMENT_KWARGS = frozenset(
    {"column", "mostly", "result_format", "catch_exceptions", "include_config", "meta"}
)


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation of a suite, as configured.

    Attributes:
        type: the GX expectation type (``expect_column_values_to_be_between``).
        kwargs: its arguments as in the JSON (``column``, ``min_value``, ``mostly``…).
        name: unique within the suite: ``type:column`` (``type`` for table-level
            expectations), with ``#2``, ``#3``… appended to repeats. Metric and
            breach names use it.
        id: GX's expectation id, when the JSON has one.
    """

    type: str
    kwargs: Mapping[str, Any]
    name: str
    id: str | None = None

    @property
    def column(self) -> str | None:
        """The column the expectation is about, or None for table-level ones."""
        col = self.kwargs.get("column")
        return col if isinstance(col, str) else None

    @property
    def mostly(self) -> float | None:
        """GX's tolerance: the fraction of non-null rows that must pass (None = all)."""
        m = self.kwargs.get("mostly")
        return float(m) if isinstance(m, int | float) and not isinstance(m, bool) else None

    @property
    def arguments(self) -> dict[str, Any]:
        """The kwargs that say what is checked (without column and output options)."""
        return {k: v for k, v in self.kwargs.items() if k not in _NON_ARGUMENT_KWARGS}

    def describe(self) -> str:
        """``type(column=c, arg=v, …)``: the label used in row messages and logs."""
        parts = [f"column={self.column}"] if self.column is not None else []
        parts += [f"{k}={_short(v)}" for k, v in self.arguments.items()]
        if self.mostly is not None:
            parts.append(f"mostly={self.mostly:g}")
        return f"{self.type}({', '.join(parts)})"


def _short(v: Any, limit: int = 80) -> str:
    text = json.dumps(v, ensure_ascii=False, default=str) if not isinstance(v, str) else v
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Suite:
    """A loaded expectation suite.

    Attributes:
        name: the suite's name.
        expectations: its expectations, in file order.
        source: where it was loaded from (for messages).
        raw: the JSON as loaded (what :meth:`to_gx` hands to GX).
    """

    name: str
    expectations: tuple[ExpectationSpec, ...]
    source: str = "<inline>"
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def by_name(self, name: str) -> ExpectationSpec:
        """The expectation called ``name`` (see :attr:`ExpectationSpec.name`)."""
        for e in self.expectations:
            if e.name == name:
                return e
        raise KeyError(name)

    def check(self) -> None:
        """Hold every expectation against GX's types and arguments (:mod:`~quarantine.expectations.gx_catalog`).

        When the installed GX is another release than the catalog's and the catalog finds a
        problem, the installed GX decides instead (:meth:`to_gx`, which imports it): a type or
        argument of a newer GX is not refused for being missing from the catalog.

        Raises:
            ConfigError: naming the expectation (``<source>: expectations[2]``) and what is wrong
                with it: an unknown type (with the nearest known ones), a missing or unknown
                argument, or a value its argument does not take.
        """
        for i, e in enumerate(self.expectations):
            problem = expectation_problem(e.type, e.kwargs)
            if problem is not None and _installed_gx() not in (None, GX_VERSION):
                # the catalog is another GX release's: the installed GX's own verdict (importing it)
                self.to_gx()
                return
            if problem is not None:
                raise ConfigError(
                    f"{self.source}: expectations[{i}]", {"type": e.type, "kwargs": dict(e.kwargs)},
                    f"an expectation GX {GX_VERSION} accepts ({problem})",
                )

    def to_gx(self) -> Any:
        """GX's ``ExpectationSuite`` for this suite (imports great_expectations).

        Raises:
            ConfigError: GX does not know an expectation type or rejects its arguments.
        """
        import great_expectations as gx
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        expectations = []
        for i, e in enumerate(self.expectations):
            try:
                cfg = ExpectationConfiguration(type=e.type, kwargs=dict(e.kwargs))
                expectations.append(cfg.to_domain_obj())
            except Exception as exc:  # GX raises many types (pydantic, InvalidExpectation…)
                raise ConfigError(
                    f"{self.source}: expectations[{i}]", {"type": e.type, "kwargs": dict(e.kwargs)},
                    f"an expectation GX {gx.__version__} accepts ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:300]})",
                ) from None
        return gx.ExpectationSuite(name=self.name, expectations=expectations)


def expectation_problem(etype: str, kwargs: Mapping[str, Any]) -> str | None:
    """What GX would refuse in an expectation of type ``etype`` with ``kwargs``; None when nothing.

    Read from :mod:`~quarantine.expectations.gx_catalog`: the type must be one GX registers,
    every required argument given, every argument one the type takes, each value of a kind
    its argument accepts (as GX's pydantic fields convert them: ``"0.5"`` is a number), and
    the expectation must keep the rules GX's validators check when it is built (the catalog's
    ``COMMON_RULES`` and ``RULES``). What this refuses GX refuses; what it passes GX may still
    refuse at run time (a rule it cannot tell here, a value converted in a way not followed).
    """
    own = EXPECTATION_TYPES.get(etype)
    if own is None:
        near = difflib.get_close_matches(etype, EXPECTATION_TYPES, n=3)
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        return f"GX has no expectation type {etype!r}{hint}"
    specs = {**COMMON_ARGUMENTS, **own}
    missing = [a for a, spec in specs.items() if spec.startswith("!") and a not in kwargs]
    if missing:
        return f"missing argument {missing[0]!r}"
    unknown = [k for k in kwargs if k not in specs]
    if unknown:
        return f"{etype} takes no argument {unknown[0]!r}; it takes {', '.join(sorted(own))}"
    for name, value in kwargs.items():
        kinds = specs[name].lstrip("!").split("|")
        if not any(_accepts(kind, value) for kind in kinds):
            return f"argument {name!r} is {_short(value)}, not {' or '.join(_kind_words(k) for k in kinds)}"
    for rule in (*COMMON_RULES, *RULES.get(etype, ())):
        problem = _rule_problem(rule, kwargs)
        if problem is not None:
            return f"{etype}: {problem}"
    return None


def _rule_problem(rule: str, kwargs: Mapping[str, Any]) -> str | None:
    """What in ``kwargs`` breaks ``rule`` (a gx_catalog rule: ``name`` or ``name:argument``); None when nothing.

    Each rule is the one GX's validator checks (``tests.support.gx_catalog.VALIDATOR_RULES``),
    on the values as a suite file gives them; kinds were checked before.
    """
    name, _, arg = rule.partition(":")
    value: Any = kwargs.get(arg)
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if name == "min-or-max":
        return "needs min_value or max_value (both are missing or null)" if low is None and high is None else None
    if name == "bounds-not-empty":
        empty = [b for b in ("min_value", "max_value") if _becomes_empty_object(kwargs.get(b))]
        return f"argument {empty[0]!r} is empty (GX reads it as {{}})" if empty else None
    if name == "min-le-max":
        # numbers as the file gives them (GX's integer field would convert others: not followed here)
        numbers = [b for b in (low, high) if isinstance(b, int) and not isinstance(b, bool)]
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            return f"min_value ({low}) is greater than max_value ({high})"
        return None
    if name == "bounds-parameter":
        unbound = [b for b in ("min_value", "max_value") if isinstance(kwargs.get(b), Mapping)
                   and "$PARAMETER" not in kwargs[b]]
        return f"argument {unbound[0]!r} is an object without the key $PARAMETER" if unbound else None
    if name == "result-format-key":
        keyless = isinstance(value, Mapping) and "result_format" not in value
        return f"argument {arg!r} is an object without the key result_format" if keyless else None
    if name == "not-empty":
        return f"argument {arg!r} is empty" if arg in kwargs and _becomes_empty_object(value) else None
    if name == "min-items-2":
        short = isinstance(value, list | tuple) and len(value) < 2
        return f"argument {arg!r} names {len(value)} column(s), not at least two" if short else None
    if name == "one-char":
        return f"argument {arg!r} is {_short(value)}, not one character" if isinstance(value, str) \
            and len(value) != 1 else None
    if name == "strftime":
        return _strftime_problem(arg, value)
    if name == "braces":
        return _braces_problem(arg, value)
    raise ValueError(f"gx_catalog has a rule this check does not know: {rule!r}")


def _becomes_empty_object(value: Any) -> bool:
    """Whether GX reads ``value`` as an empty object: ``{}``, or ``""`` / ``[]`` (pydantic v1 makes them ``{}``)."""
    return isinstance(value, str | list | tuple | Mapping) and len(value) == 0


def _strftime_problem(arg: str, value: Any) -> str | None:
    """GX's check of a strftime format: now, written with it, reads back with it."""
    if not isinstance(value, str):
        return None
    try:
        dt.datetime.strptime(dt.datetime.now(tz=dt.UTC).strftime(value), value)  # GX's own check
    except ValueError as exc:
        return f"argument {arg!r} is not a strftime format Python reads back ({exc})"
    return None


def _braces_problem(arg: str, value: Any) -> str | None:
    """GX's check of an unexpected-rows query: its braces pair (``{batch}``; ``{{``, ``}}`` literal)."""
    if not isinstance(value, str):
        return None
    try:
        list(string.Formatter().parse(value))
    except ValueError as exc:
        return f"argument {arg!r} has an unpaired or malformed brace ({exc}); write a literal brace twice"
    return None


#: How a message names each kind of argument value (gx_catalog's specs).
_KIND_WORDS = {"strict-string": "a string", "string": "a string", "number": "a number", "integer": "an integer",
               "boolean": "a boolean", "array": "a list", "object": "an object", "null": "null",
               "date": "a date (ISO string)"}
#: The strings pydantic v1 reads as a boolean.
_BOOLEAN_WORDS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


def _installed_gx() -> str | None:
    """The installed Great Expectations' version, read from its metadata (not by importing it); None if absent."""
    try:
        return metadata.version("great_expectations")
    except metadata.PackageNotFoundError:
        return None


def _kind_words(kind: str) -> str:
    """``kind`` (a gx_catalog spec's word) as a message says it: ``number[0.0,1.0]`` is "a number in [0, 1]"."""
    if kind.startswith("enum:"):
        return "one of " + ", ".join(kind.removeprefix("enum:").split("/"))
    if kind.startswith("number["):
        lo, _, hi = kind.removeprefix("number").strip("[]").partition(",")
        if lo != "None" and hi != "None":
            return f"a number in [{float(lo):g}, {float(hi):g}]"
        return f"a number >= {float(lo):g}" if lo != "None" else f"a number <= {float(hi):g}"
    return _KIND_WORDS.get(kind, kind)


def _number(value: Any) -> float | None:
    """``value`` as pydantic v1's float field reads it (a bool, an int, a float, a numeric string), or None."""
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _accepts(kind: str, value: Any) -> bool:
    """Whether an argument of ``kind`` (a gx_catalog spec's word) takes ``value`` as GX's field would."""
    if kind == "any":
        return True
    if kind == "null":
        return value is None
    if kind == "strict-string":
        return isinstance(value, str)
    if kind == "string":
        return isinstance(value, str | int | float)
    if kind == "date":
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return (isinstance(value, bool | int | float) and value in (0, 1)) or (
            isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS)
    if kind == "integer":
        number = _number(value)
        return number is not None and (not isinstance(value, str) or number.is_integer())
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "object":  # pydantic v1 takes what dict() takes: "" and [] are {}, [["k", "v"]] a mapping
        if isinstance(value, Mapping):
            return True
        try:
            dict(value)
        except (TypeError, ValueError):
            return False
        return True
    if kind.startswith("enum:"):
        return isinstance(value, str) and value in kind.removeprefix("enum:").split("/")
    if kind.startswith("number"):  # number, or number[lo,hi] (either bound "None": open)
        number = _number(value)
        lo, _, hi = kind.removeprefix("number").strip("[]").partition(",")
        if number is None or not (lo or hi):
            return number is not None
        return (lo == "None" or number >= float(lo)) and (hi == "None" or number <= float(hi))
    raise ValueError(f"gx_catalog has a kind this check does not know: {kind!r}")


def parse_suite(raw: Mapping[str, Any], *, source: str = "<inline>") -> Suite:
    """Validate a suite mapping (GX 1.x JSON) into a :class:`Suite`.

    Raises:
        ConfigError: naming the bad key (``<source>: expectations[2].type``).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(source, raw, "a JSON object (a GX ExpectationSuite)")
    name = raw.get("name", raw.get("expectation_suite_name"))
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: name", name, "the suite's name (a non-empty string)")
    items = raw.get("expectations")
    if not isinstance(items, list):
        raise ConfigError(f"{source}: expectations", items, "a list of expectations")
    specs: list[ExpectationSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"{source}: expectations[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, item, "an object with 'type' and 'kwargs'")
        etype = item.get("type", item.get("expectation_type"))
        if not isinstance(etype, str) or not etype.startswith("expect_"):
            raise ConfigError(
                f"{where}.type", etype,
                "a GX expectation type such as expect_column_values_to_not_be_null",
            )
        kwargs = item.get("kwargs", {})
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"{where}.kwargs", kwargs, "an object of arguments")
        col = kwargs.get("column")
        base = f"{etype}:{col}" if isinstance(col, str) else etype
        seen[base] = seen.get(base, 0) + 1
        name_i = base if seen[base] == 1 else f"{base}#{seen[base]}"
        eid = item.get("id")
        specs.append(
            ExpectationSpec(
                type=etype, kwargs=MappingProxyType(dict(kwargs)), name=name_i,
                id=eid if isinstance(eid, str) else None,
            )
        )
    return Suite(name=name.strip(), expectations=tuple(specs), source=source, raw=dict(raw))


def load_suite(path: str | Path, *, base_dir: str | Path | None = None) -> Suite:
    """Load a GX 1.x suite JSON file.

    Args:
        path: the file; relative paths are tried against ``base_dir`` first, then
            the working directory.
        base_dir: the directory of the pipeline config (``PipelineConfig.base_dir``).

    Raises:
        ConfigError: the file is missing, not JSON, or not a suite.
    """
    p = Path(path)
    candidates = [p] if p.is_absolute() else [
        *([Path(base_dir) / p] if base_dir is not None else []), p
    ]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        looked = ", ".join(map(str, candidates))
        raise ConfigError("suite", str(path), f"an existing GX suite JSON (looked in {looked})")
    try:
        raw = json.loads(found.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("suite", str(found), f"valid JSON ({exc})") from None
    return parse_suite(raw, source=str(path))
