"""Built-in stages, and building stages from the YAML ``stages:`` list.

Each stage type is a module here with a ``from_spec(spec) -> Stage`` factory.
Types are looked up lazily so that importing quarantine does not import Great
Expectations or user code.

| type          | module                         | kind         |
|---------------|--------------------------------|--------------|
| decode_utf8   | quarantine.stages.decode       | deserialize  |
| avro          | quarantine.stages.avro         | deserialize  |
| json          | quarantine.stages.json         | deserialize  |
| cast          | quarantine.stages.cast         | transform    |
| checks        | quarantine.stages.checks       | validate     |
| python        | quarantine.stages.python       | transform    |
| expectation   | quarantine.expectations.stage  | expectation  |
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.lineage import check_lineage
from quarantine.stage import Stage

__all__ = ["STAGE_TYPES", "build_stage", "build_stages", "option"]

STAGE_TYPES: dict[str, str] = {
    "decode_utf8": "quarantine.stages.decode",
    "avro": "quarantine.stages.avro",
    "json": "quarantine.stages.json",
    "cast": "quarantine.stages.cast",
    "checks": "quarantine.stages.checks",
    "python": "quarantine.stages.python",
    "expectation": "quarantine.expectations.stage",
}


def option(spec: StageSpec, name: str, default: Any = ..., *, kind: type | tuple[type, ...] | None = None) -> Any:
    """Read one stage option, raising a ConfigError naming ``stages[i].options.name``."""
    if name not in spec.options:
        if default is ...:
            raise ConfigError(spec.key(f"options.{name}"), None, f"a value (required by stage type '{spec.type}')")
        return default
    value = spec.options[name]
    if kind is not None and not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " | ".join(k.__name__ for k in kind)
        raise ConfigError(spec.key(f"options.{name}"), value, f"a {names}")
    return value


def build_stage(spec: StageSpec) -> Stage:
    """Build one stage from its YAML declaration.

    Raises:
        ConfigError: unknown type, or a bad option (naming ``stages[i].options.x``).
    """
    module_name = STAGE_TYPES.get(spec.type)
    if module_name is None:
        raise ConfigError(spec.key("type"), spec.type, f"one of {', '.join(sorted(STAGE_TYPES))}")
    module = importlib.import_module(module_name)
    stage: Stage = module.from_spec(spec)
    return stage


def build_stages(specs: Sequence[StageSpec]) -> list[Stage]:
    """Build every stage of a pipeline, in order (all config errors surface here).

    Each stage's input is then checked against what the stages before it declare
    (:func:`quarantine.lineage.check_lineage`): a column no earlier stage produces, or a
    json stage reading the raw bytes, is a ConfigError here, not an analysis error at run time.
    """
    stages = [build_stage(s) for s in specs]
    check_lineage(specs, stages)
    return stages
