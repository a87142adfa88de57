"""quarantine: Kafka Connect-style error handling for Spark pipelines on Delta Lake."""

from __future__ import annotations

from quarantine.config import PipelineConfig, load_config, parse_config
from quarantine.errors import (
    ConfigError,
    QuarantineError,
    StageDefinitionError,
    ToleranceExceededError,
)
from quarantine.schema import ERROR_STRUCT, QUARANTINE_SCHEMA, ErrorKind, result_struct
from quarantine.stage import Stage, StageContext, apply_stages, final_error, final_result

__all__ = [
    "ERROR_STRUCT",
    "QUARANTINE_SCHEMA",
    "ConfigError",
    "ErrorKind",
    "PipelineConfig",
    "QuarantineError",
    "Stage",
    "StageContext",
    "StageDefinitionError",
    "ToleranceExceededError",
    "apply_stages",
    "final_error",
    "final_result",
    "load_config",
    "parse_config",
    "result_struct",
]

__version__ = "0.1.0"
