"""The stage table, and building stages from the YAML ``stages:`` list through it.

Each built-in stage type is one module holding its options model (with its cross-field
rules as validators), its factory and its code, and declaring them as ``STAGE_TYPE``
(a :class:`~quarantine.stage.StageType`); :data:`STAGE_TYPES` lists them, one line each.
The config loader, the JSON Schema, the reference pages, ``quarantine validate`` and the
stage builder all read that table. A new built-in stage type is a module and a line here;
a stage type of a user's is :func:`register_stage_type`.

Importing the table imports no pyspark: a stage module names pyspark's types for
type checkers only (``TYPE_CHECKING``) and imports ``pyspark.sql`` inside the functions that
build columns or types, so loading a config (which validates each ``stages:`` entry against
its options model) costs no engine, and the read-only commands that only load it import none.
The declaration and the Spark code stay in one module: split in two, the table would have to
import the Spark half to reach the factory (pyspark again) or name it in a string (a circle).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Union

from pydantic import BaseModel, Tag, ValidationError

from quarantine.errors import ConfigError
from quarantine.expectations import stage as expectation
from quarantine.lineage import check_lineage
from quarantine.stage import Declaration, Stage, StageType
from quarantine.stages import avro, cast, checks, decode, json, protobuf, python
from quarantine.values.options import tagged
from quarantine.values.types import config_error

__all__ = [
    "STAGE_TYPES",
    "build_stage",
    "build_stages",
    "register_stage_type",
    "stage_declaration",
    "unregister_stage_type",
]

#: Stage type → its :class:`~quarantine.stage.StageType`: THE table of stage types, in the order
#: the JSON Schema and the reference show them (see :func:`register_stage_type` for a user's own).
STAGE_TYPES: dict[str, StageType] = {t.name: t for t in (
    decode.STAGE_TYPE,
    avro.STAGE_TYPE,
    protobuf.STAGE_TYPE,
    json.STAGE_TYPE,
    cast.STAGE_TYPE,
    checks.STAGE_TYPE,
    python.STAGE_TYPE,
    expectation.STAGE_TYPE,
)}


def register_stage_type(stage_type: StageType, *, replace: bool = False) -> StageType:
    """Add a stage type to :data:`STAGE_TYPES` (configs may then use it); returns it.

    Raises:
        ValueError: the name is taken (pass ``replace=True`` to replace it).
    """
    if stage_type.name in STAGE_TYPES and not replace:
        raise ValueError(f"stage type {stage_type.name!r} is already registered")
    STAGE_TYPES[stage_type.name] = stage_type
    return stage_type


def unregister_stage_type(name: str) -> None:
    """Remove a stage type added by :func:`register_stage_type` (a no-op for an unknown name)."""
    STAGE_TYPES.pop(name, None)


def stage_declaration() -> Any:
    """The type of one ``stages:`` entry now: a union of the registered types' declarations, on ``type``."""
    members = tuple(Annotated[t.declaration, Tag(f"type={n}")] for n, t in STAGE_TYPES.items())
    return Annotated[Union[members], tagged("type", tuple(STAGE_TYPES))]  # noqa: UP007 - built at run time


def build_stage(declared: Declaration, options: BaseModel | None = None) -> Stage:
    """Build one stage from its declaration: its type's factory over its validated options.

    Args:
        declared: the stage as declared (a :class:`quarantine.config.StageSpec`).
        options: its options model; None: ``declared.validated`` (validated when the config was
            loaded), or ``declared.options`` validated now (a declaration built in Python).

    Raises:
        ConfigError: unknown type, or a bad option (naming ``stages[i].options.x``).
    """
    stage_type = STAGE_TYPES.get(declared.type)
    if stage_type is None:
        raise ConfigError(declared.key("type"), declared.type, f"one of {', '.join(sorted(STAGE_TYPES))}")
    options = options if options is not None else declared.validated
    if not isinstance(options, stage_type.options):
        try:
            options = stage_type.options.model_validate(dict(declared.options))
        except ValidationError as exc:
            schema = stage_type.options.model_json_schema(by_alias=True)
            raise config_error(exc, schema, declared.key("options")) from None
    return stage_type.build(declared, options)


def build_stages(declared: Sequence[Declaration]) -> list[Stage]:
    """Build every stage of a pipeline, in order (all config errors surface here).

    Each stage's input is then checked against what the stages before it declare
    (:func:`quarantine.lineage.check_lineage`): a column no earlier stage produces, or a
    json stage reading the raw bytes, is a ConfigError here, not an analysis error at run time.
    """
    stages = [build_stage(d) for d in declared]
    check_lineage(declared, stages)
    return stages
