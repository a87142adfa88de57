"""The config and stage reference pages (Markdown), generated from the config models and the stage table.

:func:`config_page` renders every key of a pipeline config (:class:`PipelineConfig` and its
sections) and :func:`stages_page` every stage type registered in
:data:`~quarantine.stages.STAGE_TYPES` with its options (and, for an option that is a
list of kinds, such as the ``checks`` stage's ``rules``, each kind with its own options).
Each key is shown with its type, default, allowed values, description and an example, all
read from the models' JSON Schema (by alias, as written in YAML): descriptions are the
fields' docstrings, examples their ``examples``; an enum's or a switch's example is derived.
Only the closing section of the config page, on how values reach a config (the environment,
``--set``, relative paths), is prose; the rest cannot drift from the loader.

Each page also shows whole YAML examples (a section's, a stage type's, a rule kind's): the
models' own ``examples``, each a config fragment the loader accepts (the unit test
``tests/unit/test_config_reference.py`` loads every one). Each fenced block is preceded by
:data:`EXAMPLE_MARKER`.

Regenerate the pages (``docs/reference/config.md`` and ``stages.md``) with::

    python -m quarantine.config.reference --out docs/reference
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from quarantine.config.pipeline import PipelineConfig
from quarantine.stage import StageType
from quarantine.stages import STAGE_TYPES

__all__ = [
    "COMMAND",
    "EXAMPLE_MARKER",
    "config_page",
    "main",
    "pages",
    "stages_page",
    "write_pages",
]

#: The command that regenerates the pages (named in each page and in the staleness test's message).
COMMAND = "python -m quarantine.config.reference --out docs/reference"
#: The line before each fenced YAML example: what it is and which test loads it.
EXAMPLE_MARKER = "<!-- illustration: generated reference example, loaded by tests/unit/test_config_reference.py -->"


class _AsDeclared(GenerateJsonSchema):
    """Pydantic's JSON Schema with every mapping in its written order (examples read as declared)."""

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, schema_generator=_AsDeclared)


_GENERATED = f"Generated from the code by `{COMMAND}`; do not edit by hand."
_NO_EXAMPLE = object()


# --------------------------------------------------------------------------- one key


def _resolve(root: Mapping[str, Any], node: Any) -> dict[str, Any]:
    """``node`` with its ``$ref`` (or a lone ``allOf`` reference) followed, within ``root``'s ``$defs``."""
    while isinstance(node, Mapping):
        if "$ref" in node:
            target = root.get("$defs", {}).get(str(node["$ref"]).rsplit("/", 1)[-1], {})
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        elif "allOf" in node and len(node["allOf"]) == 1:
            node = {**_resolve(root, node["allOf"][0]), **{k: v for k, v in node.items() if k != "allOf"}}
        else:
            return dict(node)
    return {}


def _plain(text: str) -> str:
    """A docstring as one Markdown paragraph: lines joined, reStructuredText literals as code, and
    ``<`` / ``>`` outside code escaped (``<id>.avsc`` is text, not an HTML tag)."""
    parts = " ".join(text.replace("``", "`").split()).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _inline(value: Any) -> str:
    """A value as YAML in flow style, on one line (``1000``, ``[EUR, USD]``, ``{a: b}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=10_000)
    return text.removesuffix("\n...\n").strip()


def _code(text: str) -> str:
    """``text`` as inline code, fenced with enough backticks for what it holds."""
    ticks = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _pattern(pattern: str) -> str:
    inner = re.fullmatch(r"\^\\s\*\(\?:(.*)\)\\s\*\$", pattern) or re.fullmatch(r"\^(.*)\$", pattern)
    return inner.group(1) if inner else pattern


_TYPE_NAMES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "null": "null"}


def _alternatives(node: Mapping[str, Any]) -> list[Any]:
    """The alternative forms a node's value takes (``anyOf``/``oneOf``), leaving out the branches that
    only require a key (``at least one of min and max``): those constrain one form, they are not forms."""
    branches = node.get("anyOf") or node.get("oneOf") or ()
    return [b for b in branches if not (isinstance(b, Mapping) and set(b) == {"required"})]


def _type(root: Mapping[str, Any], node: Any) -> str:
    """What a value of the schema ``node`` is, in words: ``integer``, ``list of strings``…"""
    node = _resolve(root, node)
    if "const" in node:
        return _type(root, {"type": _json_type(node["const"])})
    if "enum" in node:
        kinds = sorted({_json_type(v) for v in node["enum"]})
        return " or ".join(_TYPE_NAMES.get(k, k) for k in kinds)
    branches = _alternatives(node)
    if branches:
        names = [_type(root, b) for b in branches]
        nullable = "null" in names
        out = " or ".join(dict.fromkeys(n for n in names if n != "null"))
        return f"{out} or null" if nullable else out
    kinds = node.get("type")
    if kinds is None:
        return "mapping" if "properties" in node else "any value"
    names = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind == "array":
            items = _type(root, node.get("items", {}))
            names.append(f"list of {items}s" if " " not in items and items != "any value" else f"list of ({items})")
        elif kind == "object" and "properties" not in node and "additionalProperties" in node:
            values = node["additionalProperties"]
            names.append("mapping" if values is True else f"mapping of names to {_type(root, values)}")
        elif kind == "object":
            names.append("mapping")
        else:
            names.append(_TYPE_NAMES.get(kind, kind))
    nullable = "null" in names
    out = " or ".join(n for n in names if n != "null")
    return f"{out} or null" if nullable and out else out or "null"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "null" if value is None else "object"


def _allowed(root: Mapping[str, Any], node: Any) -> str:
    """What values of the schema ``node`` the loader takes, beyond their type (``≥ 1``, ``a | b``…)."""
    node = _resolve(root, node)
    if "const" in node:
        return _code(_inline(node["const"]))
    if "enum" in node:
        return " | ".join(_code(_inline(v)) for v in node["enum"])
    branches = _alternatives(node)
    if branches:
        parts = [f"{_type(root, b)}: {a}" for b in branches if (a := _allowed(root, b))]
        return "; ".join(parts)
    parts = []
    if "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if "maximum" in node:
        parts.append(f"≤ {node['maximum']}")
    if node.get("minLength") == 1:
        parts.append("non-empty")
    if "pattern" in node:
        parts.append(f"matches {_code(_pattern(node['pattern']))}")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item{'s' if node['minItems'] > 1 else ''}")
    if node.get("minProperties"):
        parts.append(f"at least {node['minProperties']} entr{'ies' if node['minProperties'] > 1 else 'y'}")
    if "items" in node and (each := _allowed(root, node["items"])):
        parts.append(f"each item {each}")
    values = node.get("additionalProperties")
    if isinstance(values, Mapping) and (each := _allowed(root, values)):
        parts.append(f"each value {each}")
    return ", ".join(parts)


def _example(root: Mapping[str, Any], node: Any) -> Any:
    """The schema ``node``'s first example; for an enum, a switch or a constant, one derived from it."""
    node = _resolve(root, node)
    if node.get("examples"):
        return node["examples"][0]
    if "const" in node:
        return node["const"]
    if "enum" in node:
        others = [v for v in node["enum"] if v != node.get("default")]
        return (others or node["enum"])[0]
    if node.get("type") == "boolean":
        return not node.get("default", False)
    return _NO_EXAMPLE


def _default(node: Mapping[str, Any], *, required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in node:
        kinds = node.get("type")
        if kinds == "object":
            return _code("{}")
        if kinds == "array":
            return _code("[]")
        return "not set"
    if node["default"] is None:
        return "not set"
    return _code(_inline(node["default"]))


def _key(root: Mapping[str, Any], name: str, node: Any, *, required: bool) -> list[str]:
    """The lines that describe one key: its description, then type, default, allowed values and example."""
    resolved = _resolve(root, node)
    lines = [_plain(resolved.get("description", "")) or "(No description.)", ""]
    facts = [f"Type: {_type(root, node)}", f"Default: {_default(resolved, required=required)}"]
    if allowed := _allowed(root, node):
        facts.append(f"Allowed: {allowed}")
    example = _example(root, node)
    if example is not _NO_EXAMPLE:
        facts.append(f"Example: {_code(_inline({name: example}).removeprefix('{').removesuffix('}'))}")
    lines += [f"- {fact}" for fact in facts]
    for form in (resolved, *(_resolve(root, b) for b in resolved.get("anyOf") or resolved.get("oneOf") or ())):
        for sub, prop in form.get("properties", {}).items():
            about = _plain(prop.get("description", ""))
            lines.append(f"- Key of the mapping form: `{sub}` ({_type(root, prop)}): {about}".rstrip(": "))
    return [*lines, ""]


def _fenced(value: Any) -> list[str]:
    """A YAML example as a fenced block, marked as an illustration the unit test loads."""
    text = yaml.safe_dump(value, default_flow_style=False, allow_unicode=True, sort_keys=False, width=10_000)
    return [EXAMPLE_MARKER, "```yaml", *text.rstrip("\n").splitlines(), "```", ""]


def _object(root: Mapping[str, Any], node: Any) -> dict[str, Any]:
    """An object schema, resolved; an optional object's (``anyOf`` it or null) object branch."""
    schema = _resolve(root, node)
    for branch in schema.get("anyOf", ()):
        if "properties" in (resolved := _resolve(root, branch)):
            return resolved
    return schema


def _properties(root: Mapping[str, Any], node: Any) -> tuple[dict[str, Any], set[str]]:
    """An object schema's properties and required keys."""
    node = _object(root, node)
    return dict(node.get("properties", {})), set(node.get("required", ()))


# --------------------------------------------------------------------------- the config page

#: The sections of a config: a top-level key whose value is a mapping of keys of its own.
_SECTIONS = ("source", "target", "errors", "metrics", "mlflow", "spark", "alerts", "fail_on")


def config_page() -> str:
    """The config reference (``docs/reference/config.md``): every key of a pipeline config."""
    root = _schema(PipelineConfig)
    top, required = _properties(root, root)
    lines = [
        "# Config reference",
        "",
        f"Every key of a pipeline config (YAML). {_GENERATED} The stages and their options are in the "
        "[stage reference](stages.md). A whole config:",
        "",
        *_fenced(root["examples"][0]),
        "## Top level",
        "",
        _plain(PipelineConfig.__doc__ or "").split(". ")[0] + ".",
        "",
    ]
    for name, node in top.items():
        lines += [f"### `{name}`", ""]
        if name in _SECTIONS:
            needed = "Required." if name in required else "Optional: without it, every key has its default."
            lines += [f"{_plain(_resolve(root, node).get('description', ''))} A mapping; its keys: [{name}](#{name}). "
                      f"{needed}", ""]
        elif name == "stages":
            lines += _key(root, name, {"description": node.get("description", ""), "type": "array",
                                       "minItems": 1, "items": {"type": "object"},
                                       "examples": node.get("examples", [])}, required=True)
            lines += ["Each stage's keys and each type's options: the [stage reference](stages.md).", ""]
        else:
            lines += _key(root, name, node, required=name in required)
    for section in _SECTIONS:
        lines += _section(root, section, top[section])
    lines += _writing_values()
    return "\n".join(lines).rstrip("\n") + "\n"


def _section(root: Mapping[str, Any], section: str, node: Any) -> list[str]:
    model = _resolve(root, node)
    keys, required = _properties(root, model)
    lines = [f"## {section}", "", _plain(model.get("description", "")), ""]
    if section == "errors":
        lines += [
            "The keys keep Kafka Connect's names and are written flat under `errors:`; each may also be written "
            "at the top level with its prefix (`errors.tolerance: all`).",
            "",
        ]
    for example in model.get("examples", ()):
        lines += _fenced({section: example})
    for name, prop in keys.items():
        lines += [f"### `{section}.{name}`", "", *_key(root, name, prop, required=name in required)]
    for name, prop in keys.items():  # a list of mappings (alerts.channels): each item's keys
        items = _resolve(root, prop).get("items")
        if items is None or "properties" not in (item := _resolve(root, items)):
            continue
        item_keys, item_required = _properties(root, item)
        lines += [f"### Each of `{section}.{name}`", "", _plain(item.get("description", "")), ""]
        lines += [line for example in item.get("examples", ()) for line in _fenced({section: {name: [example]}})]
        for sub, sub_prop in item_keys.items():
            lines += [f"#### `{section}.{name}[].{sub}`", "", *_key(root, sub, sub_prop, required=sub in item_required)]
    return lines


def _writing_values() -> list[str]:
    """How values reach a config besides being written in it: the environment, ``--set``, relative paths."""
    return [
        "## Writing values",
        "",
        "**From the environment.** Every `${env:NAME}` in a string value is replaced by the environment "
        "variable `NAME` when the config is loaded (Kafka Connect's `EnvVarConfigProvider` syntax); an unset "
        "variable is a config error naming the key. This is how a secret reaches a config without being "
        "written in it: on Databricks, a job cluster's environment variable may be a secret reference "
        "(`{{secrets/<scope>/<key>}}`), resolved when the cluster starts.",
        "",
        "**From a Databricks secret scope.** An alert channel's `webhook` and `password` may also be a secret "
        "reference written in the config, `{{secrets/<scope>/<key>}}`, read with the Databricks SDK's "
        "`dbutils.secrets` when the run starts (the config and its logs keep the reference, never the value): "
        "see [Alerting](../alerting.md#secrets).",
        "",
        *_fenced({"source": {
            "format": "kafka",
            "bootstrap.servers": "${env:KAFKA_BOOTSTRAP_SERVERS}",
            "topics": ["orders"],
            "options": {
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="${env:KAFKA_SASL_USERNAME}" password="${env:KAFKA_SASL_PASSWORD}";'
                ),
            },
        }}),
        "**Secrets are redacted.** The value of a key that looks secret (`password`, `secret`, `token`, "
        "`sasl.jaas.config`, `webhook`, a key ending in `.key`…) is shown as `[redacted]` wherever the config or a "
        "message shows it: logs, MLflow, the quarantine table's messages.",
        "",
        "**Overrides.** `quarantine run --set key=value` (and a bundle job's parameters) sets a dotted key "
        "before the config is validated: `--set source.path=/data/orders_raw`, "
        "`--set errors.tolerance=all`. The value is read as YAML (`5`, `true`, `[a, b]`).",
        "",
        "**Relative paths.** A relative path written in a config file (`source.path`, `target.checkpoint`, a "
        "table key holding a `/`, a stage's files) is read from the config file's folder; one given with "
        "`--set`, from the working directory. Table names (`catalog.schema.table`), URIs and absolute paths "
        "stay as written.",
        "",
    ]


# --------------------------------------------------------------------------- the stage page


def stages_page() -> str:
    """The stage reference (``docs/reference/stages.md``): every registered stage type and its options."""
    types = list(STAGE_TYPES.values())
    lines = [
        "# Stage reference",
        "",
        f"The stage types a config's `stages:` list may use, with their options. {_GENERATED} "
        "The rest of a config: the [config reference](config.md).",
        "",
        "## Every stage",
        "",
        "Each entry of `stages:` has these keys; `options` holds its type's options (below).",
        "",
    ]
    if types:
        entry = _schema(types[0].declaration)
        keys, required = _properties(entry, entry)
        listed = " | ".join(f"[`{t.name}`](#{t.name})" for t in types)
        kinds = {"description": "The stage type: one of the types below.", "type": "string",
                 "examples": [types[0].name]}
        lines += ["### `name`", "", *_key(entry, "name", keys["name"], required=True)]
        lines += ["### `type`", "", *_key(entry, "type", kinds, required=True)[:-1], f"- Allowed: {listed}", ""]
        lines += ["### `input`", "", *_key(entry, "input", keys["input"], required="input" in required)]
        lines += [
            "### `options`",
            "",
            "The type's options, as a mapping; required unless every option of the type has a default.",
            "",
        ]
    for stage_type in types:
        lines += _stage_type(stage_type)
    return "\n".join(lines).rstrip("\n") + "\n"


def _stage_type(stage_type: StageType) -> list[str]:
    root = _schema(stage_type.declaration)
    model = _object(root, _properties(root, root)[0]["options"])
    options, required = _properties(root, model)
    lines = [f"## {stage_type.name}", "", _plain(stage_type.summary), ""]
    needed = "required" if stage_type.options_required else "optional (every option has a default)"
    lines += [f"`options:` is {needed}.", ""]
    example = _options_example(root, model)
    if example is not _NO_EXAMPLE:
        lines += _fenced({"stages": [_stage_entry(stage_type.name, example)]})
    lines += [f"### {stage_type.name} options", ""] if options else ["It has no options.", ""]
    kinds: list[tuple[str, Any]] = []
    for name, prop in options.items():
        lines += [f"#### `{stage_type.name}` option `{name}`", "", *_key(root, name, prop, required=name in required)]
        if _kinds(root, prop):
            kinds.append((name, prop))
    for name, prop in kinds:
        lines += _kinds_of(root, stage_type.name, name, prop)
    return lines


def _stage_entry(type_name: str, options: Any) -> dict[str, Any]:
    name = type_name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", type_name) else "my_stage"
    entry: dict[str, Any] = {"name": name, "type": type_name}
    if options:
        entry["options"] = options
    return entry


def _options_example(root: Mapping[str, Any], model: Mapping[str, Any]) -> Any:
    """A model's first example; else its required keys' examples (none missing); else nothing."""
    if model.get("examples"):
        return model["examples"][0]
    keys, required = _properties(root, model)
    out = {}
    for name in required:
        value = _example(root, keys[name])
        if value is _NO_EXAMPLE:
            return _NO_EXAMPLE
        out[name] = value
    return out


def _kinds(root: Mapping[str, Any], node: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """An option that is a list of a union on one constant key (``rules``, on ``check``): each kind's
    ``(key, value, model schema)``; ``[]`` for any other option."""
    node = _resolve(root, node)
    if node.get("type") != "array":
        return []
    items = _resolve(root, node.get("items", {}))
    out = []
    for branch in items.get("oneOf", ()):
        model = _resolve(root, branch)
        tag = next(((k, p["const"]) for k, p in model.get("properties", {}).items() if "const" in p), None)
        if tag is None:
            return []
        out.append((tag[0], str(tag[1]), model))
    return out


def _kinds_of(root: Mapping[str, Any], stage: str, option: str, node: Any) -> list[str]:
    lines: list[str] = []
    for tag_key, tag, model in _kinds(root, node):
        keys, required = _properties(root, model)
        lines += [f"### `{option}`: `{tag_key}: {tag}`", "", _plain(model.get("description", "")), ""]
        example = _options_example(root, model)
        if example is not _NO_EXAMPLE:
            lines += _fenced({"stages": [_stage_entry(stage, {option: [example]})]})
        for name, prop in keys.items():
            if name != tag_key:
                lines += [f"#### `{tag}` option `{name}`", "", *_key(root, name, prop, required=name in required)]
    return lines


# --------------------------------------------------------------------------- writing


def pages() -> dict[str, str]:
    """Each page's file name and its text, rendered from the models and the stage types registered now."""
    return {"config.md": config_page(), "stages.md": stages_page()}


def write_pages(out: Path) -> list[Path]:
    """Write :func:`pages` into the folder ``out`` (created if needed); returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages().items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m quarantine.config.reference --out docs/reference``: write the pages; prints their paths."""
    parser = argparse.ArgumentParser(prog="python -m quarantine.config.reference", description=__doc__)
    parser.add_argument("--out", default="docs/reference", help="the folder to write into (default docs/reference)")
    args = parser.parse_args(argv)
    for path in write_pages(Path(args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
