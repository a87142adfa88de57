"""The value checks stage options are made of: bounds, value lists, field names, actions, paths.

Each is a :class:`~quarantine.values.types.Check` (a validator and its JSON Schema) used by
the options models beside each stage's code (:mod:`quarantine.stages`); ``const`` and ``tagged`` build the
unions on ``type`` (stages) and ``check`` (rules).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Discriminator, ValidationError, ValidationInfo

from quarantine.values.types import (
    TEXT,
    BreachAction,
    Check,
    base_dir_of,
    choice,
    config_error,
    fail,
    is_relative_path,
    member,
    resolve,
)

__all__ = [
    "BOUND",
    "BREACH_ACTIONS",
    "CREDENTIAL",
    "EXCEPTIONS",
    "FIELD",
    "MODULE_FOLDER",
    "NAMES",
    "ON_BREACH",
    "REGISTRY_URL",
    "SUBJECTS",
    "SUITE",
    "VALUES",
    "WIRE_FORMAT",
    "WireFormat",
    "const",
    "existing",
    "folder_or",
    "tagged",
    "text_map",
]

#: ``on_breach`` actions: the values of :class:`~quarantine.values.types.BreachAction`.
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
        custom_error_context={"tag_key": key, "tags": ",".join(tags)},
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


def _values(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise fail("a non-empty list of values")
    if not all(isinstance(v, int | float | str | bool) for v in value):
        raise fail("a list of strings, numbers or booleans")
    return tuple(value)


VALUES = Check(
    _values, {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}}, to_plain=list
)


def _field_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise fail("a field name (omit it to check the input itself)")
    return value


FIELD = Check(_field_name, {"type": ["string", "null"], "minLength": 1})


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
        if member(BreachAction, value) is None:
            raise fail(f"an action ({allowed}) or a mapping of expectation type/name to action")
        value = {"default": value}
    if not isinstance(value, Mapping):
        raise fail(f"an action ({allowed}) or a mapping of expectation type/name to action")
    for k, v in value.items():
        if member(BreachAction, v) is None:
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


def _module_folder(value: Any, info: ValidationInfo) -> str | None:
    """A python stage's module folder: default the config's folder; a relative one is read from it."""
    base = base_dir_of(info)
    if value is None:
        return base  # loaded from a file: its folder; built in Python: None (sys.path alone)
    text: str = TEXT.fn(value)
    if base is None:
        return text
    resolved = resolve(text, base) if is_relative_path(text, bare_names=True) else text
    if not Path(resolved).is_dir():
        raise fail(f"an existing folder holding the function's module (relative paths are read from {base})",
                   value=resolved)
    return resolved


MODULE_FOLDER = Check(_module_folder, {"type": ["string", "null"], "minLength": 1}, takes_info=True)


class WireFormat(StrEnum):
    """How an avro or protobuf stage's values are framed (``wire_format``)."""

    CONFLUENT = "confluent"
    """The schema-registry wire format: magic byte, 4-byte schema id (Protobuf: message indexes), the message."""
    NONE = "none"
    """The message only."""


WIRE_FORMAT = choice(WireFormat)


def folder_or(model: type[BaseModel], folder: Check) -> Check:
    """A folder (checked by ``folder``, an :func:`existing` check), or a mapping of ``model``'s keys.

    A problem inside the mapping is named by its own key (``schemas.url``), as if the model
    were a section of its own; relative paths in it are read from the config's folder.
    """

    def check(value: Any, info: ValidationInfo) -> Any:
        if value is None or isinstance(value, model):
            return value
        if isinstance(value, Mapping):
            try:
                return model.model_validate(dict(value), context=info.context)
            except ValidationError as exc:
                problem = config_error(exc, model.model_json_schema(by_alias=True))
                raise fail(problem.allowed, at=problem.key, value=problem.value) from None
        if not isinstance(value, str):
            raise fail(f"a folder (a path), or a mapping of {', '.join(model.model_fields)}")
        return folder.fn(value, info)

    shown = {k: v for k, v in model.model_json_schema(by_alias=True).items() if k != "title"}
    return Check(check, {"anyOf": [{"type": "string", "minLength": 1}, shown, {"type": "null"}]}, takes_info=True)


def _registry_url(value: Any) -> str:
    allowed = "an http(s)://host[:port] URL (the registry's base URL)"
    if not isinstance(value, str) or not value.strip():
        raise fail(allowed)
    try:
        parts = urllib.parse.urlsplit(value.strip())
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise fail(allowed) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(allowed)
    return value.strip()


REGISTRY_URL = Check(_registry_url, {"type": "string", "pattern": "^https?://"})


def _subjects(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail("a non-empty list of subject names")
    return [v.strip() for v in value]


SUBJECTS = Check(_subjects, {"type": ["array", "null"], "minItems": 1, "items": {"type": "string", "minLength": 1}})

#: a Databricks secret reference (``{{secrets/<scope>/<key>}}``), which only a cluster resolves
_SECRET_REFERENCE = re.compile(r"\{\{\s*secrets/[^}]*\}\}")


def _credential(value: Any) -> str | None:
    """A user or password as the config holds it once ``${env:NAME}`` was replaced; never a
    Databricks secret reference left unresolved (Databricks resolves those in a cluster's
    environment variables and Spark conf, not in a file the job reads)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail("a string")
    if _SECRET_REFERENCE.search(value):
        raise fail(
            "a value, not a Databricks secret reference: Databricks resolves {{secrets/<scope>/<key>}} in a "
            "cluster's environment variables, not in a config file; set a cluster environment variable to the "
            "reference and write ${env:NAME} here"
        )
    return value


CREDENTIAL = Check(_credential, {"type": ["string", "null"]})
