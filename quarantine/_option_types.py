"""The value checks stage options are made of: bounds, value lists, field names, actions, paths.

Each is a :class:`~quarantine._config_types.Check` (a validator and its JSON Schema) used by
the options models in :mod:`quarantine.stage_types`; ``const`` and ``tagged`` build the
unions on ``type`` (stages) and ``check`` (rules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Discriminator, ValidationInfo

from quarantine._config_types import TEXT, BreachAction, Check, base_dir_of, fail, is_relative_path, resolve

__all__ = [
    "BOUND",
    "BREACH_ACTIONS",
    "EXCEPTIONS",
    "FIELD",
    "NAMES",
    "ON_BREACH",
    "SUITE",
    "VALUES",
    "WIRE_FORMAT",
    "const",
    "existing",
    "lowered",
    "tagged",
    "text_map",
]

#: ``on_breach`` actions: the values of :class:`~quarantine._config_types.BreachAction`.
BREACH_ACTIONS = tuple(a.value for a in BreachAction)


def const(tag: str) -> Check:
    """The discriminating key of a union member: exactly ``tag``."""

    def check(value: Any) -> str:
        if isinstance(value, str) and value.strip() == tag:
            return tag
        raise fail(f"'{tag}'")  # pragma: no cover - the discriminator chose this member by it

    return Check(check, {"const": tag})


def tagged(key: str, tags: tuple[str, ...]) -> Discriminator:
    """Pick a union member by ``value[key]``; an unknown one is an error listing ``tags``."""

    def tag_of(value: Any) -> str | None:
        tag = value.get(key) if isinstance(value, Mapping) else None
        tag = tag.strip() if isinstance(tag, str) else tag
        return f"{key}={tag}" if tag in tags else None

    return Discriminator(
        tag_of,
        custom_error_type="tag",
        custom_error_message=f"one of {', '.join(tags)}",
        custom_error_context={"tag_key": key},
    )




#: A date or timestamp as Spark casts one from a string: ``2026-01-31``, ``2026-01-31 12:00:00.5+01:00``…
_DATE_TIME = re.compile(
    r"\s*[+-]?\d{4,}(-\d{1,2}(-\d{1,2}([T ]\d{1,2}(:\d{1,2}(:\d{1,2}(\.\d{1,9})?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(:?\d{2})?|[A-Za-z]+/[A-Za-z_]+)?)?)?)?\s*"
)


def _scalar_or_date(value: Any) -> Any:
    """A ``range`` bound: a number, or a string that reads as a number or a date/timestamp."""
    if value is None:
        return None
    allowed = "a number, or a date/timestamp string such as '2026-01-31' or '2026-01-31 12:00:00'"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise fail(allowed)
    if isinstance(value, str) and not (_DATE_TIME.fullmatch(value) or _reads_as_number(value)):
        raise fail(allowed)
    return value


def _reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


BOUND = Check(_scalar_or_date, {"type": ["number", "string", "null"]})


def _values(value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise fail("a non-empty list of values")
    if not all(isinstance(v, int | float | str | bool) for v in value):
        raise fail("a list of strings, numbers or booleans")
    return value


VALUES = Check(_values, {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}})


def _field_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise fail("a field name (omit it to check the input itself)")
    return value


FIELD = Check(_field_name, {"type": ["string", "null"], "minLength": 1})


def lowered(*allowed: str) -> Check:
    def check(value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in allowed:
            return value.strip().lower()
        raise fail(" | ".join(allowed))

    return Check(check, {"enum": list(allowed)})


def text_map(allowed: str, *, required: bool) -> Check:
    """A mapping of field name to a non-empty string (``required``: at least one; else null values too)."""

    def check(value: Any) -> dict[str, Any]:
        if value is None and not required:
            return {}
        if not isinstance(value, Mapping) or (required and not value):
            raise fail(allowed)
        for k, v in value.items():
            if v is None and not required:
                continue
            if not isinstance(v, str) or not v.strip():
                raise fail(f"a non-empty string for each field ({k} has none)", at=k, value=v)
        return dict(value)

    item: dict[str, Any] = {"type": "string", "minLength": 1} if required else {"type": ["string", "null"]}
    schema: dict[str, Any] = {"type": "object", "additionalProperties": item}
    if required:
        schema["minProperties"] = 1
    return Check(check, schema)


def _names_list(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail("a list of field names")
    return value


NAMES = Check(_names_list, {"type": "array", "items": {"type": "string", "minLength": 1}})


def _exception_names(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail("a list of exception classes (dotted paths, or builtins)")
    return value


EXCEPTIONS = Check(
    _exception_names,
    {"anyOf": [{"type": "array", "items": {"type": "string", "minLength": 1}}, {"type": "string"}, {"type": "null"}]},
)


def _breach(value: Any) -> Any:
    allowed = " | ".join(BREACH_ACTIONS)
    if isinstance(value, str):
        if value.strip().lower() not in BREACH_ACTIONS:
            raise fail(f"an action ({allowed}) or a mapping of expectation type/name to action")
        value = {"default": value}
    if not isinstance(value, Mapping):
        raise fail(f"an action ({allowed}) or a mapping of expectation type/name to action")
    for k, v in value.items():
        if not isinstance(v, str) or v.strip().lower() not in BREACH_ACTIONS:
            raise fail(f"an action ({allowed}) for each expectation type/name", at=k, value=v)
    return value


ON_BREACH = Check(
    _breach,
    {"anyOf": [
        {"enum": list(BREACH_ACTIONS)},
        {"type": "object", "additionalProperties": {"enum": list(BREACH_ACTIONS)},
         "properties": {"default": {"enum": list(BREACH_ACTIONS),
                                    "description": "The action of a breach no other key names (default warn)."}}},
    ]},
)


def _suite(value: Any, info: ValidationInfo) -> str:
    """A suite file; relative to the config's folder when loaded from a file; it must exist."""
    text: str = TEXT.fn(value)
    base = base_dir_of(info)
    if base is None:
        return text  # built in Python: the stage resolves it when it is built
    resolved = resolve(text, base) if is_relative_path(text, bare_names=True) else text
    if not Path(resolved).is_file():
        raise fail(f"an existing GX suite JSON file (relative paths are read from {base})", value=resolved)
    return resolved


SUITE = Check(_suite, {"type": "string", "minLength": 1}, takes_info=True)


def existing(what: str, *, folder: bool) -> Check:
    """A file (or folder) path; relative to the config's folder when loaded from a file; it must exist."""

    def check(value: Any, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        text: str = TEXT.fn(value)
        base = base_dir_of(info)
        if base is None:
            return text  # built in Python: the stage resolves it when it is built
        resolved = resolve(text, base) if is_relative_path(text, bare_names=True) else text
        exists = Path(resolved).is_dir() if folder else Path(resolved).is_file()
        if not exists:
            raise fail(f"an existing {what} (relative paths are read from {base})", value=resolved)
        return resolved

    return Check(check, {"type": ["string", "null"], "minLength": 1}, takes_info=True)


def _wire_format(value: Any) -> str:
    if value not in ("confluent", "none"):
        raise fail("'confluent' (magic byte, 4-byte schema id, then the message) or 'none' (the message only)")
    return str(value)


WIRE_FORMAT = Check(_wire_format, {"enum": ["confluent", "none"]})
