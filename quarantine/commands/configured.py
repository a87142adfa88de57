"""The pipeline config a command names (``--conf``, ``--set``): loaded once, its tables noted and shown."""

from __future__ import annotations

from quarantine.commands.invocation import Invocation
from quarantine.commands.options import overrides
from quarantine.config import PipelineConfig, load_config
from quarantine.errors import ConfigError

__all__ = ["load", "tables_text"]


def load(call: Invocation) -> PipelineConfig:
    """The config of ``--conf`` with ``--set`` applied, its tables noted in ``call.tables``.

    Raises:
        ConfigError: the config is bad, or ``--pipeline`` (the guard of ``replay`` and
            ``maintain`` jobs) names another pipeline than the config's.
    """
    args = call.args
    config = load_config(args.conf, overrides(args.set))
    call.tables.update({"target": config.target.table, "quarantine": config.errors.dlq_table_name})
    if config.metrics.table:
        call.tables["metrics"] = config.metrics.table
    guard = getattr(args, "pipeline_guard", None)
    if guard and guard != config.pipeline:
        raise ConfigError("--pipeline", guard, f"{config.pipeline} (the pipeline of {args.conf})")
    return config


def tables_text(config: PipelineConfig) -> str:
    """Where a pipeline's records are: its target, quarantine and metrics tables, one per line."""
    rows = [
        ("target", config.target.table),
        ("quarantine", config.errors.dlq_table_name),
        ("metrics", config.metrics.table or "(off: metrics.table is not set)"),
    ]
    return "tables:\n" + "\n".join(f"  {what:<11}{name}" for what, name in rows)
