"""The JSON Schema of a pipeline config as written in YAML, for editors (shipped as config.schema.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quarantine.config.pipeline import PipelineConfig, stages_validator

__all__ = [
    "SCHEMA_FILE",
    "json_schema",
    "schema_text",
]


#: Where the schema is shipped: quarantine/config.schema.json (package data).
SCHEMA_FILE = Path(__file__).parent.parent / "config.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a pipeline config as written in YAML.

    It describes every key with its allowed values and default, each stage type
    with its options (a union on ``type``; a ``checks`` rule, on ``check``) and the
    flat top-level ``errors.*`` form. It states canonical values (``5``, ``true``)
    where the loader also takes the strings ``--set`` produces; checks that need
    more than the YAML (a suite file exists, two tables differ, a Spark type name
    is valid) are the loader's. Editors use it to validate and complete configs
    (VS Code's YAML extension: a ``# yaml-language-server: $schema=…`` comment).
    """
    schema = PipelineConfig.model_json_schema(by_alias=True, ref_template="#/definitions/{model}")
    definitions = schema.pop("$defs", {})
    # stages: the stage types registered now (a type registered after import is shown too)
    stages = stages_validator().json_schema(by_alias=True, ref_template="#/definitions/{model}")
    definitions.update(stages.pop("$defs", {}))
    schema["properties"]["stages"] = {"description": schema["properties"]["stages"]["description"], **stages}
    errors = definitions["ErrorsConfig"]
    # the quarantine table may come flat (errors.deadletterqueue.table.name) instead of under errors:
    dlq = "deadletterqueue.table.name"
    errors.pop("required", None)  # deadletterqueue.table.name is its only required key
    properties = schema["properties"]
    for section in ("metrics", "mlflow", "spark"):  # optional sections: an empty one is YAML null
        properties[section] = {"anyOf": [{"$ref": properties[section].pop("$ref")}, {"type": "null"}],
                               **properties[section]}
    for key, prop in errors["properties"].items():
        properties[f"errors.{key}"] = dict(prop)
    schema["required"] = [r for r in schema["required"] if r != "errors"]
    schema["anyOf"] = [
        {"required": ["errors"], "properties": {"errors": {"required": [dlq]}}},
        {"required": [f"errors.{dlq}"]},
    ]
    out: dict[str, Any] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "quarantine pipeline config",
        "description": (
            "A quarantine pipeline (YAML): source -> stages -> target + quarantine table. "
            "Relative paths are read from the config file's folder."
        ),
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
        "definitions": definitions,
    }
    cleaned: dict[str, Any] = _for_editors(out)
    return cleaned


def _for_editors(node: Any, *, root: bool = True) -> Any:
    """Draft-07 as editors read it: ``$ref`` alone in its object, no generated titles, plain text.

    Draft-07 ignores the keywords next to a ``$ref``, so a described reference
    becomes ``allOf: [{$ref}]`` beside its description. Pydantic's ``title``s
    (``Retry.Timeout``) say less than the descriptions and are dropped, except the
    root's; a *property* named ``title`` is kept. Descriptions come from docstrings:
    their reStructuredText literals (````x````) are shown as plain ``x``.
    """
    if isinstance(node, list):
        return [_for_editors(v, root=False) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "title" and not root:
            continue
        if k == "properties":
            out[k] = {name: _for_editors(prop, root=False) for name, prop in v.items()}
        elif k == "description" and isinstance(v, str):
            out[k] = v.replace("``", "")
        else:
            out[k] = _for_editors(v, root=False)
    if "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def schema_text() -> str:
    """:func:`json_schema` as the text of :data:`SCHEMA_FILE` (2-space JSON, one final newline)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"

