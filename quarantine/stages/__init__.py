"""Building stages from the YAML ``stages:`` list, through the one stage table.

Each stage type is registered in :data:`quarantine.stage_types.STAGE_TYPES` with its
options model and its factory (a ``module:function`` imported when a stage of the type
is built, so that importing quarantine does not import Great Expectations or user code):

| type          | factory module                 | kind         |
|---------------|--------------------------------|--------------|
| decode_utf8   | quarantine.stages.decode       | deserialize  |
| avro          | quarantine.stages.avro         | deserialize  |
| protobuf      | quarantine.stages.protobuf     | deserialize  |
| json          | quarantine.stages.json         | deserialize  |
| cast          | quarantine.stages.cast         | transform    |
| checks        | quarantine.stages.checks       | validate     |
| python        | quarantine.stages.python       | transform    |
| expectation   | quarantine.expectations.stage  | expectation  |
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from quarantine._config_types import config_error
from quarantine.config import StageSpec
from quarantine.errors import ConfigError
from quarantine.lineage import check_lineage
from quarantine.stage import Stage
from quarantine.stage_types import STAGE_TYPES

__all__ = ["build_stage", "build_stages"]


def build_stage(spec: StageSpec) -> Stage:
    """Build one stage from its declaration: its type's factory over its validated options.

    Raises:
        ConfigError: unknown type, or a bad option (naming ``stages[i].options.x``).
    """
    stage_type = STAGE_TYPES.get(spec.type)
    if stage_type is None:
        raise ConfigError(spec.key("type"), spec.type, f"one of {', '.join(sorted(STAGE_TYPES))}")
    try:
        options = stage_type.options.model_validate(dict(spec.options))
    except ValidationError as exc:
        schema = stage_type.options.model_json_schema(by_alias=True)
        raise config_error(exc, schema, spec.key("options")) from None
    stage: Stage = stage_type.build(spec, options)
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

