"""The value types of the config models, and pydantic's errors as :class:`ConfigError`.

Each type here is one ``Annotated`` marker that does two things: it validates a
YAML value the way the config always has, and it states the JSON Schema an editor
sees. They differ on purpose in one way: the loader also takes the string forms
that ``--set key=value`` and bundle job parameters produce (``"5"``, ``"true"``),
the schema states the canonical form (``5``, ``true``), so an editor steers a
hand-written config towards it. A switch is ``true``/``false`` only: YAML 1.1's
``yes``/``on`` are errors, not guesses.

A bad value raises a ``PydanticCustomError`` whose message is the *allowed* text
of the :class:`ConfigError` it becomes; :func:`config_error` turns a whole
``ValidationError`` into the one ConfigError that names its first problem by the
full key path (``errors.retry.timeout``, ``stages[2].options.rules[0].min``).

Paths: :func:`file_path` and :func:`table_ref` values are resolved against
``context["base_dir"]`` when the model is validated with one (the config file's
folder, see :func:`quarantine.config.load_config`) and left as written without.
"""

from __future__ import annotations

import copyreg
import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from quarantine.errors import ConfigError
from quarantine.table_names import has_uri_scheme, is_path

__all__ = [
    "BOOL",
    "CLASS_NAMES",
    "IDENTIFIER",
    "OPTIONAL_TABLE_NAME",
    "OPTIONAL_TEXT",
    "SESSION_CATALOGS",
    "TABLE_NAME",
    "TABLE_NAME_ALLOWED",
    "TEXT",
    "BreachAction",
    "Check",
    "base_dir_of",
    "choice",
    "config_error",
    "fail",
    "file_path",
    "integer",
    "is_relative_path",
    "is_table_name",
    "member",
    "number",
    "read_only",
    "resolve",
    "string_map",
    "table_ref",
    "text",
    "unknown_key",
]


#: A closed vocabulary (:func:`member`).
E = TypeVar("E", bound=StrEnum)


class BreachAction(StrEnum):
    """What a failed (aggregate) expectation does to the batch (``on_breach``)."""

    WARN = "warn"
    FAIL = "fail"
    QUARANTINE_BATCH = "quarantine_batch"


def read_only(items: dict[Any, Any]) -> Mapping[Any, Any]:
    """``items`` as a read-only mapping (how a config's mappings unpickle)."""
    return MappingProxyType(items)


def _reduce_mapping(m: MappingProxyType[Any, Any]) -> tuple[Callable[..., Any], tuple[dict[Any, Any]]]:
    return read_only, (dict(m),)


# A config's read-only mappings pickle as copies: a streaming run over Spark Connect sends
# its config to the server's foreachBatch worker (quarantine.runners.streaming).
copyreg.pickle(MappingProxyType, _reduce_mapping)  # type: ignore[arg-type]


def fail(allowed: str, **ctx: Any) -> PydanticCustomError:
    """The error a :class:`Check` raises: ``allowed`` is what the value should be.

    ``ctx["value"]``, when given, is reported as the value found instead of the input
    (an item of a list, a path after resolving it); ``ctx["at"]``, when given, is the key
    of that item under the checked one (``formats`` → ``formats.created_at``).
    """
    # pydantic fills in ``{name}`` for the names in ``ctx`` only, and un-doubles no braces: the
    # text goes as it is (doubled braces would be shown doubled: ``{{secrets/<scope>/<key>}}``)
    return PydanticCustomError("config", allowed, ctx or None)


@dataclass(frozen=True)
class Check:
    """An ``Annotated`` marker: ``fn`` validates (and converts) the value, ``schema`` is its JSON Schema.

    ``fn(value)`` or ``fn(value, info)`` (``takes_info``) returns the field's value
    or raises a ``PydanticCustomError`` naming what is allowed. The field's own
    description and default are added to ``schema`` by pydantic. With
    ``input_type``, the JSON Schema is that type's instead (with its definitions),
    for a value written in one shape and held in another (``stages:``).
    """

    fn: Callable[..., Any]
    schema: Mapping[str, Any]
    takes_info: bool = False
    to_plain: Callable[[Any], Any] | None = field(default=None, compare=False)
    input_type: Any = field(default=None, compare=False)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        ser = (
            core_schema.plain_serializer_function_ser_schema(self.to_plain) if self.to_plain is not None else None
        )
        shown = handler.generate_schema(self.input_type) if self.input_type is not None else None
        if self.takes_info:
            return core_schema.with_info_plain_validator_function(
                self.fn, serialization=ser, json_schema_input_schema=shown
            )
        return core_schema.no_info_plain_validator_function(self.fn, serialization=ser, json_schema_input_schema=shown)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        if self.input_type is not None:
            return handler(schema)
        return dict(self.schema)


# --------------------------------------------------------------------------- scalars


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise fail("true | false")


#: ``true`` / ``false`` (also the strings ``"true"``/``"false"``, any case).
BOOL = Check(_bool, {"type": "boolean"})


def text(allowed: str = "a non-empty string", *, pattern: str | None = None) -> Check:
    """A non-empty string, stripped; with ``pattern``, one that fully matches it."""
    compiled = re.compile(pattern) if pattern else None

    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise fail("a non-empty string" if compiled else allowed)
        out: str = value.strip()
        if compiled is not None and not compiled.fullmatch(out):
            raise fail(allowed)
        return out

    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if pattern:
        schema["pattern"] = f"^\\s*(?:{pattern})\\s*$"
    return Check(check, schema)


#: A non-empty string (stripped).
TEXT = text()
#: A name usable as a column: letters, digits and ``_``, not starting with a digit.
IDENTIFIER = text("an identifier (letters, digits, _)", pattern=r"[A-Za-z_][A-Za-z0-9_]*")


def _optional_text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    result: str = TEXT.fn(value)
    return result


#: A non-empty string, or nothing (absent, ``null`` and ``""`` all mean not set).
OPTIONAL_TEXT = Check(_optional_text, {"type": ["string", "null"]})


def integer(minimum: int, *, unlimited: bool = False, optional: bool = False) -> Check:
    """An integer ≥ ``minimum`` (``"5"`` too; never a bool or 1.5); ``unlimited`` also allows -1."""
    allowed = f"an integer ≥ {minimum}" + (" or -1 (unlimited)" if unlimited else "")

    def check(value: Any) -> int | None:
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise fail("an integer")
        try:
            n = int(value)
        except ValueError:
            raise fail("an integer") from None
        if (unlimited and n == -1) or n >= minimum:
            return n
        raise fail(allowed)

    schema: dict[str, Any] = {"type": ["integer", "null"] if optional else "integer"}
    schema["minimum"] = -1 if unlimited and minimum == 0 else minimum
    return Check(check, schema)


def number(lo: float | None = None, hi: float | None = None) -> Check:
    """A number in ``[lo, hi]`` (``"0.5"`` too; never a bool)."""
    rng = f"in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise fail("a number")
        try:
            x = float(value)
        except ValueError:
            raise fail("a number") from None
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            raise fail(f"a number {rng}")
        return x

    schema: dict[str, Any] = {"type": "number"}
    if lo is not None:
        schema["minimum"] = lo
    if hi is not None:
        schema["maximum"] = hi
    return Check(check, schema)


def member(enum: type[E], value: Any) -> E | None:
    """``value`` as a member of the closed vocabulary ``enum``: the member itself, or its value in
    any case with spaces around; None when it is not one."""
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value.strip().lower())
        except ValueError:
            return None
    return None


def choice(enum: type[StrEnum]) -> Check:
    """THE check of a closed choice: one of a ``StrEnum``'s values (:func:`member`), held as its member;
    the message lists them (``one of a | b``)."""
    allowed = " | ".join(m.value for m in enum)

    def check(value: Any) -> StrEnum:
        found = member(enum, value)
        if found is None:
            raise fail(f"one of {allowed}")
        return found

    return Check(check, {"enum": [m.value for m in enum]}, to_plain=str)


_CLASS_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _class_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail("a list of exception class names")
    for v in value:
        if not _CLASS_NAME.fullmatch(v.strip()):
            raise fail("an exception class name, simple or dotted (pkg.module.Class)", value=v)
    return tuple(v.strip() for v in value)


#: Exception class names (``TimeoutError``, ``pkg.module.Class``): a list, or one comma-separated string.
CLASS_NAMES = Check(
    _class_names,
    {"anyOf": [
        {"type": "array", "items": {"type": "string", "pattern": f"^{_CLASS_NAME.pattern}$"}},
        {"type": "string"},
    ]},
    to_plain=list,
)


def string_map(allowed: str = "a mapping") -> Check:
    """A mapping whose values are handed on as strings (reader options, Spark conf); read-only."""

    def check(value: Any) -> Mapping[str, str]:
        if value is None:
            return MappingProxyType({})
        if not isinstance(value, Mapping):
            raise fail(allowed)
        return MappingProxyType({str(k): str(v) for k, v in value.items()})

    schema = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    return Check(check, schema, to_plain=dict)


# --------------------------------------------------------------------------- paths

def is_relative_path(value: str, *, bare_names: bool) -> bool:
    """Whether ``value`` is a relative file-system path (not absolute, not a URI, not ``~``).

    Args:
        value: a config value.
        bare_names: whether a value without ``/`` is a path too (``source.path``,
            a checkpoint, a suite: yes; a table key, where ``orders`` or
            ``catalog.schema.table`` is a table name: no).
    """
    if not value or value.startswith(("/", "~")) or has_uri_scheme(value):
        return False
    return bare_names or is_path(value)


def resolve(value: str, base_dir: str) -> str:
    """``value`` made absolute against ``base_dir`` (normalised: ``../`` steps are folded)."""
    return os.path.abspath(os.path.join(base_dir, value))


def base_dir_of(info: ValidationInfo) -> str | None:
    context = info.context
    if isinstance(context, Mapping) and context.get("base_dir") is not None:
        return str(context["base_dir"])
    return None


#: One part of a table name: letters, digits and ``_``, or anything in backquotes (a ``` `` ``` is one backquote).
_NAME_PART = r"(?:[A-Za-z0-9_]+|`(?:[^`]|``)+`)"
#: A table name Spark parses: one to three parts (``orders``, ``schema.orders``, ``catalog.schema.orders``).
TABLE_NAME = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART}){{0,2}}")
#: A part in Spark's session catalog: letters, digits and ``_`` (back-quoted or not). Spark's
#: own catalog (local, Hive) refuses any other character (``INVALID_SCHEMA_OR_RELATION_NAME``).
_SESSION_PART = re.compile(r"[A-Za-z0-9_]+|`[A-Za-z0-9_]+`")
#: The catalogs that are Spark's session catalog: a one- or two-part name is in it too.
SESSION_CATALOGS = frozenset({"spark_catalog", "hive_metastore"})
#: What a table key holds, for messages.
TABLE_NAME_ALLOWED = (
    "a table name catalog.schema.table (letters, digits and _; any other characters inside backquotes, "
    "in a Unity Catalog name only: main.raw.`my orders`; a one- or two-part name, spark_catalog.… and "
    "hive_metastore.… are Spark's session catalog, which holds letters, digits and _ only) "
    "or a path (one with a /, or a URI such as s3://…)"
)


def is_table_name(value: str) -> bool:
    """Whether ``value`` is a table name Spark parses and its catalog can hold (:data:`TABLE_NAME_ALLOWED`).

    A name in Spark's session catalog (one or two parts, or :data:`SESSION_CATALOGS`'
    three) has parts of letters, digits and ``_`` only: the local default and a Hive
    metastore refuse others when the table is created, after Delta has written its files.
    """
    if not TABLE_NAME.fullmatch(value):
        return False
    parts = re.findall(rf"{_NAME_PART}(?=\.|$)", value)
    if len(parts) == 3 and parts[0].strip("`").lower() not in SESSION_CATALOGS:
        return True
    return all(_SESSION_PART.fullmatch(p) for p in parts)


def _path_check(*, bare_names: bool, optional: bool) -> Check:
    def check(value: Any, info: ValidationInfo) -> str | None:
        out = _optional_text(value) if optional else TEXT.fn(value)
        if out is not None and not bare_names and not is_path(out) and not is_table_name(out):
            raise fail(TABLE_NAME_ALLOWED)
        base = base_dir_of(info)
        if out is not None and base is not None and is_relative_path(out, bare_names=bare_names):
            out = resolve(out, base)
        return out

    schema: dict[str, Any] = {"type": ["string", "null"] if optional else "string"}
    if not optional:
        schema["minLength"] = 1
    return Check(check, schema, takes_info=True)


def file_path(*, optional: bool = False) -> Check:
    """A file-system path or URI; a relative one is resolved against the context's ``base_dir``."""
    return _path_check(bare_names=True, optional=optional)


def table_ref(*, optional: bool = False) -> Check:
    """A Delta table: a path (resolved like :func:`file_path` when it has a ``/``) or a table name
    Spark can parse (:data:`TABLE_NAME`); anything else is refused, saying what a valid one looks like."""
    return _path_check(bare_names=False, optional=optional)


def _table_name(value: Any) -> str | None:
    out = _optional_text(value)
    if out is not None and not is_table_name(out):
        raise fail(TABLE_NAME_ALLOWED.split(" or a path")[0] + "; a path goes in source.path")
    return out


#: A catalog table name (never a path): ``catalog.schema.table``, parts optionally in backquotes; or nothing.
OPTIONAL_TABLE_NAME = Check(_table_name, {"type": ["string", "null"]})


# --------------------------------------------------------------------------- errors


def config_error(exc: ValidationError, schema: Mapping[str, Any], prefix: str = "") -> ConfigError:
    """The first problem of a ``ValidationError`` as a :class:`ConfigError` naming its full key.

    Unknown keys are reported before other problems (a misspelt key is the likely
    cause of a "missing" one). Locations become config paths: ``("rules", 0, "min")``
    under ``prefix`` ``stages[3].options`` is ``stages[3].options.rules[0].min``;
    a tagged-union step (``type=json``) is not part of the path.

    Args:
        exc: pydantic's error.
        schema: the JSON Schema of what was validated (by alias), to name the known
            keys of an unknown one and describe a missing one.
        prefix: the key path of what was validated (``""`` for a whole config).
    """
    problems = [e for e in exc.errors() if e["type"] != "default_factory_not_called"]
    problems.sort(key=lambda e: e["type"] != "extra_forbidden")
    if not problems:  # pragma: no cover - pydantic reports at least one
        return ConfigError(prefix, None, str(exc))
    e = problems[0]
    loc = [p for p in e["loc"] if not (isinstance(p, str) and "=" in p)]
    key = prefix
    for p in loc:
        key = f"{key}[{p}]" if isinstance(p, int) else (f"{key}.{p}" if key else str(p))
    ctx = e.get("ctx") or {}
    if "at" in ctx:
        key = f"{key}.{ctx['at']}"
    value = ctx.get("value", e.get("input"))
    kind = e["type"]
    if kind == "config":
        return ConfigError(key, value, e["msg"])
    if kind == "extra_forbidden":
        return ConfigError(key, value, unknown_key(key, str(e["loc"][-1]), _properties(schema, e["loc"][:-1])))
    if kind == "missing":
        prop = _properties(schema, e["loc"][:-1]).get(str(e["loc"][-1]), {})
        described = None if "$ref" in prop or "allOf" in prop else prop.get("description")  # not for a section
        allowed = "a value (required key)" + (f": {_first_sentence(described)}" if described else "")
        return ConfigError(key, None, allowed)
    if kind in ("model_type", "dict_type", "mapping_type", "model_attributes_type"):
        return ConfigError(key, value, "a mapping")
    if kind in ("list_type", "tuple_type", "iterable_type"):
        return ConfigError(key, value, "a list")
    if kind == "too_short":
        return ConfigError(key, value, "a non-empty list")
    if kind == "tag":
        tag = ctx["tag_key"]
        if not isinstance(value, Mapping):
            return ConfigError(key, value, f"a mapping with a '{tag}' key")
        got = value.get(tag)
        tags = str(ctx.get("tags", "")).split(",")
        near = difflib.get_close_matches(got, tags, n=1, cutoff=0.6) if isinstance(got, str) else []
        return ConfigError(f"{key}.{tag}", got, e["msg"] + (f" (did you mean '{near[0]}'?)" if near else ""))
    return ConfigError(key, value, e["msg"])


def unknown_key(key: str, name: str, known: Iterable[str]) -> str:
    """What an unknown key ``name`` (at config path ``key``) should be: the nearest known key, by its
    full path (``did you mean 'errors.tolerance'?``), or every known key when none is near."""
    known = sorted(known)
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or difflib.get_close_matches(
        name.lower().replace("_", "."), known, n=1, cutoff=0.6
    )
    if near:
        parent = key[: len(key) - len(name)]
        return f"a known key: did you mean '{parent}{near[0]}'?"
    return f"one of the known keys: {', '.join(known)}"


def _first_sentence(text: str) -> str:
    one_line = " ".join(text.split())
    head, dot, _ = one_line.partition(". ")
    return head + ("." if dot else "")


def _properties(schema: Mapping[str, Any], loc: Sequence[int | str]) -> dict[str, Any]:
    """The ``properties`` of the object schema at ``loc`` (aliases; {} when it cannot be found)."""
    node: Mapping[str, Any] | None = _deref(schema, schema)
    for part in loc:
        if node is None:
            return {}
        if isinstance(part, int):
            node = _deref(schema, _object_branch(schema, node).get("items"))
        elif "=" in part:  # a tagged-union step: the branch whose tag property is that constant
            tag_key, _, tag = part.partition("=")
            node = next(
                (b for b in (_deref(schema, x) for x in node.get("oneOf", ()))
                 if b is not None and b.get("properties", {}).get(tag_key, {}).get("const") == tag),
                None,
            )
        else:
            node = _deref(schema, _object_branch(schema, node).get("properties", {}).get(part))
    return dict(_object_branch(schema, node).get("properties", {})) if node is not None else {}


def _deref(root: Mapping[str, Any], node: Any) -> Mapping[str, Any] | None:
    while isinstance(node, Mapping) and "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        defs = root.get("$defs") or root.get("definitions") or {}
        node = defs.get(name)
    if isinstance(node, Mapping) and "allOf" in node and len(node["allOf"]) == 1:
        return _deref(root, node["allOf"][0])
    return node if isinstance(node, Mapping) else None


def _object_branch(root: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    """An ``anyOf`` of an object and null (an optional section) as its object branch."""
    for branch in node.get("anyOf", ()):
        resolved = _deref(root, branch)
        if resolved is not None and ("properties" in resolved or "items" in resolved):
            return resolved
    return node
