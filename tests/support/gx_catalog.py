"""Writes ``quarantine/expectations/gx_catalog.py`` from the installed Great Expectations' registry.

    python -m tests.support.gx_catalog        # after upgrading great_expectations

``quarantine validate`` checks a suite against that module without importing GX (issue 53);
``tests/unit/test_gx_catalog.py`` fails while the module differs from what this writes for the
installed GX, so it cannot go stale. Each argument's spec says which JSON values GX's
(pydantic v1) field accepts, as the catalog module's docstring describes.
"""

from __future__ import annotations

import collections.abc
import datetime as dt
import enum
import sys
import types
import typing
from pathlib import Path
from typing import Any

__all__ = ["CATALOG_FILE", "RUN_TIME_ONLY", "VALIDATOR_RULES", "catalog", "render", "rules"]

CATALOG_FILE = Path(__file__).resolve().parents[2] / "quarantine" / "expectations" / "gx_catalog.py"


def _kinds(annotation: Any) -> set[str]:
    """The kinds of JSON value a pydantic v1 field of this type accepts (``any`` for what is not told apart)."""
    import pydantic.v1 as pv1

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        kinds: set[str] = set()
        for arg in typing.get_args(annotation):
            kinds |= _kinds(arg)
        return {"any"} if "any" in kinds else kinds
    if origin is typing.Literal:
        return {"enum:" + "/".join(str(v) for v in typing.get_args(annotation))}
    sequences = (list, set, tuple, frozenset, typing.Sequence, collections.abc.Sequence)
    if origin in sequences or annotation in (list, set, tuple):
        return {"array"}
    if annotation is type(None):
        return {"null"}
    if annotation is dict or origin is dict:
        return {"object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum:" + "/".join(str(m.value) for m in annotation)}
    if annotation is pv1.StrictStr or (isinstance(annotation, type) and issubclass(annotation, str)
                                        and getattr(annotation, "strict", False)):
        return {"strict-string"}
    if annotation is bool:
        return {"boolean"}
    if isinstance(annotation, type) and issubclass(annotation, float):  # float, ConstrainedFloat
        lo, hi = getattr(annotation, "ge", None), getattr(annotation, "le", None)
        return {f"number[{lo},{hi}]" if lo is not None or hi is not None else "number"}
    if isinstance(annotation, type) and issubclass(annotation, int):
        return {"integer"}
    if isinstance(annotation, type) and issubclass(annotation, str):
        return {"string"}
    if annotation in (dt.date, dt.datetime):
        return {"date"}
    return {"any"}


#: GX's validators (``<module>.<function>``, the module's last name) and the rules they enforce.
#: A ``{field}`` is the field a field validator is attached to (read from GX).
VALIDATOR_RULES: dict[str, tuple[str, ...]] = {
    # Expectation.result_format: a dict must hold the key result_format
    "expectation._validate_result_format": ("result-format-key:{field}",),
    # MulticolumnMapExpectation.column_list: at least two columns
    "expectation._validate_column_list": ("min-items-2:{field}",),
    # value_set / regex_list / like_pattern_list: not empty
    "expect_column_distinct_values_to_be_in_set._validate_value_set": ("not-empty:{field}",),
    "expect_column_values_to_match_regex_list._validate_regex_list": ("not-empty:{field}",),
    "expect_column_values_to_not_match_regex_list._validate_regex_list": ("not-empty:{field}",),
    "expect_column_values_to_match_like_pattern_list.validate_like_pattern_list": ("not-empty:{field}",),
    "expect_column_values_to_not_match_like_pattern_list.validate_like_pattern_list": ("not-empty:{field}",),
    # a LIKE escape: one character
    "model_field_types.validate_like_pattern_escape": ("one-char:{field}",),
    # a strftime format Python can write and read back
    "expect_column_values_to_match_strftime_format.validate_strftime_format": ("strftime:{field}",),
    # a query whose braces pair ({batch} and literal {{ }})
    "unexpected_rows_expectation._validate_query": ("braces:{field}",),
    # root validators: min_value and max_value not both null; not {} (an empty string is {})
    "expect_column_value_lengths_to_be_between._validate_min_or_max_set": ("min-or-max",),
    "expect_column_values_to_be_between.check_min_val_or_max_val": ("min-or-max", "bounds-not-empty"),
    # min_value <= max_value; a dict bound is a {"$PARAMETER": ...}
    "expect_table_row_count_to_be_between._root_validate": ("min-le-max", "bounds-parameter"),
}
#: GX's validators that refuse nothing a suite file can be checked for here: GX's own check, at run time.
RUN_TIME_ONLY = frozenset({
    "expectation._validate_row_condition",  # GX Cloud's row-condition grammar
    "expectation._transform_legacy_row_condition",  # rewrites a string condition (warns; GX parses it)
    # checks a QuantileRange object only: a suite file's quantile_ranges stays a dict (the field is
    # Union[QuantileRange, dict]), which it passes as it is, so it refuses nothing a file holds
    "expect_column_quantile_values_to_be_between.validate_quantile_ranges",
})


def _validators(cls: Any) -> list[tuple[str | None, Any]]:
    """Each validator pydantic v1 runs when ``cls`` is built: ``(field or None for a root validator, function)``."""
    found: list[tuple[str | None, Any]] = [
        (name, v.func) for name, vs in cls.__validators__.items() for v in vs
    ]
    found += [(None, f) for f in cls.__pre_root_validators__]
    found += [(None, f) for _, f in cls.__post_root_validators__]
    return found


def rules(cls: Any) -> tuple[str, ...]:
    """The rules GX's validators of ``cls`` enforce, as the catalog spells them (see :data:`VALIDATOR_RULES`).

    Raises:
        LookupError: a validator neither :data:`VALIDATOR_RULES` nor :data:`RUN_TIME_ONLY` names.
    """
    out: list[str] = []
    for field, func in _validators(cls):
        name = f"{func.__module__.rsplit('.', 1)[-1]}.{func.__name__}"
        if name in RUN_TIME_ONLY:
            continue
        if name not in VALIDATOR_RULES:
            raise LookupError(f"{cls.__name__}: GX validator {name} (field {field}) is not in VALIDATOR_RULES: "
                              "read it in GX's source and name its rule (or list it in RUN_TIME_ONLY)")
        out += [r.format(field=field) for r in VALIDATOR_RULES[name] if r not in out]
    return tuple(dict.fromkeys(out))


def _spec(field: Any) -> str:
    kinds = _kinds(field.outer_type_)
    if field.allow_none and "any" not in kinds:
        kinds.add("null")
    return ("!" if field.required else "") + ("any" if "any" in kinds else "|".join(sorted(kinds)))


def catalog() -> tuple[str, dict[str, str], dict[str, dict[str, str]], tuple[str, ...], dict[str, tuple[str, ...]]]:
    """GX's version, the arguments every type takes, each type's other arguments (as specs), the
    rules every type has and each type's other rules."""
    import great_expectations as gx
    from great_expectations.expectations.registry import _registered_expectations

    registered = sorted(_registered_expectations.items())
    per_type = {name: {arg: _spec(f) for arg, f in cls.__fields__.items()} for name, cls in registered}
    common = {arg: spec for arg, spec in next(iter(per_type.values())).items()
              if all(t.get(arg) == spec for t in per_type.values())}
    own = {name: {a: s for a, s in args.items() if a not in common} for name, args in per_type.items()}
    type_rules = {name: rules(cls) for name, cls in registered}
    common_rules = tuple(r for r in next(iter(type_rules.values())) if all(r in t for t in type_rules.values()))
    own_rules = {name: tuple(r for r in rs if r not in common_rules) for name, rs in type_rules.items()}
    return gx.__version__, common, own, common_rules, {n: rs for n, rs in own_rules.items() if rs}


_HEADER = '''"""The expectation types of Great Expectations 1.x and their arguments, known without importing GX.

Generated by ``python -m tests.support.gx_catalog`` from the installed GX's registry (do not
edit: ``tests/unit/test_gx_catalog.py`` fails while this differs from the installed GX).
:meth:`quarantine.expectations.suite.Suite.check` reads it, so that ``quarantine validate``
refuses an unknown type, a missing or unknown argument, or a value of the wrong kind without
importing GX (seconds); GX itself checks the suite again when a run first validates a batch.

Each argument's spec: ``!`` first when it is required, then the JSON values its field
accepts, ``|`` between them: ``string`` (also a number, which pydantic v1 turns into text),
``strict-string``, ``number`` (also a numeric string; ``number[lo,hi]`` within bounds),
``integer``, ``boolean``, ``array``, ``object``, ``null``, ``date`` (an ISO string or a number),
``enum:a/b`` (one of the values) or ``any`` (not told apart here: GX's check, at run time).

The rules GX's validators hold an expectation to when it is built, beyond each argument's
kind (``COMMON_RULES``, ``RULES``; generated from each type's validators as
``tests.support.gx_catalog.VALIDATOR_RULES`` names them): ``min-or-max`` (``min_value`` and
``max_value`` not both missing or null), ``bounds-not-empty`` (neither bound ``{}``, which an
empty string or list becomes), ``min-le-max`` (numbers: ``min_value <= max_value``),
``bounds-parameter`` (a bound that is an object holds ``$PARAMETER``), and of one argument
(``rule:argument``): ``not-empty``, ``min-items-2``, ``one-char`` (a string of one character),
``strftime`` (a format Python writes and reads back), ``braces`` (a query's braces pair) and
``result-format-key`` (an object holds ``result_format``).
"""

from __future__ import annotations

__all__ = ["COMMON_ARGUMENTS", "COMMON_RULES", "EXPECTATION_TYPES", "GX_VERSION", "RULES"]

'''


def _arguments(args: dict[str, str], indent: str) -> str:
    return "".join(f'{indent}"{a}": "{spec}",\n' for a, spec in args.items())


def render() -> str:
    """The text of the catalog module for the installed GX."""
    version, common, own, common_rules, own_rules = catalog()
    types_ = "".join(f'    "{name}": {{\n{_arguments(args, " " * 8)}    }},\n' for name, args in own.items())
    rules_ = "".join(f'    "{name}": ({_rules(rs)}),\n' for name, rs in own_rules.items())
    return (
        _HEADER
        + f'#: The Great Expectations release this catalog was generated from.\nGX_VERSION = "{version}"\n\n'
        + "#: The arguments every expectation type takes (GX's ``Expectation`` fields), by name: their spec.\n"
        + f"COMMON_ARGUMENTS: dict[str, str] = {{\n{_arguments(common, ' ' * 4)}}}\n\n"
        + "#: Each expectation type's own arguments (besides :data:`COMMON_ARGUMENTS`), by name: their spec.\n"
        + f"EXPECTATION_TYPES: dict[str, dict[str, str]] = {{\n{types_}}}\n\n"
        + "#: The rules every expectation type's validators hold it to (the module doc lists them).\n"
        + f"COMMON_RULES: tuple[str, ...] = ({_rules(common_rules)})\n\n"
        + "#: Each expectation type's own rules (besides :data:`COMMON_RULES`), for the types that have any.\n"
        + f"RULES: dict[str, tuple[str, ...]] = {{\n{rules_}}}\n"
    )


def _rules(rules_: tuple[str, ...]) -> str:
    """A tuple's items as Python source (a trailing comma after a single one)."""
    return "".join(f'"{r}", ' for r in rules_).rstrip(" ") if len(rules_) == 1 else ", ".join(f'"{r}"' for r in rules_)


if __name__ == "__main__":
    CATALOG_FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {CATALOG_FILE}", file=sys.stderr)
