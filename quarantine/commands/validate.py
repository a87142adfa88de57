"""``quarantine validate``: a config and its stages checked without starting Spark; nothing written.

Imports the config, the stage builder and the checks (:mod:`quarantine.preflight`), no runner,
sink or listener, and not Great Expectations: an expectation suite is checked against
:mod:`quarantine.expectations.gx_catalog`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config

if TYPE_CHECKING:
    from collections.abc import Sequence

    from quarantine.config import PipelineConfig
    from quarantine.stage import Stage

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)


def _handle(call: Invocation) -> int:
    """Check the config, print its stages, the target's columns (and each field a stage produces that does
    not reach them) and the tables; exit code 0.

    Raises:
        ConfigError: what :func:`quarantine.preflight.check_config` finds, naming the key.
    """
    from quarantine.commands.configured import load, tables_text
    from quarantine.lineage import lost_fields
    from quarantine.preflight import check_config
    from quarantine.source_contract import unchecked

    config = load(call)
    stages = check_config(config)
    print(f"config ok: pipeline {config.pipeline}, {len(stages)} stages: "
          + " -> ".join(f"{s.name}({type(s).__name__})" for s in stages))
    print(_target_columns(config, stages))
    for lost in lost_fields(stages):
        print(f"warning: {lost.describe()}")
    print(tables_text(config))
    print("checked without starting Spark; SQL expressions and regexes are compiled when a run starts")
    not_checked = unchecked(config.source)
    if not_checked:
        print(f"not checked: {not_checked}")
    return 0


def _target_columns(config: PipelineConfig, stages: Sequence[Stage]) -> str:
    """The target's columns as the config declares them: the last stage's result, then the source's."""
    from quarantine.lineage import declared_result
    from quarantine.schema import TARGET_SOURCE_COLUMNS, target_columns
    from quarantine.values.spark import type_name

    last = stages[-1].name
    declared = declared_result(config.stages, stages)
    if declared is None:
        shown = f"the result of the last stage, {last} (its type is known when a run starts)"
    else:
        fields = target_columns(declared, last).fields
        shown = ", ".join(f"{f.name} {type_name(f.dataType)}" for f in fields)
        shown += f" (the last stage's result: {last})"
    if config.target.source_columns:
        shown += " + " + ", ".join(TARGET_SOURCE_COLUMNS.fieldNames())
    return f"target columns: {shown}"


COMMAND = Command(
    help="load and check a config and its stages without starting Spark; write nothing",
    examples=("quarantine validate --conf data/demo/orders_demo.yml",),
    arguments=_arguments,
    handle=_handle,
)
