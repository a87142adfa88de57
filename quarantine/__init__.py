"""quarantine: Kafka Connect-style error handling for Spark pipelines on Delta Lake.

The names a notebook or job reaches for::

    from quarantine import load_config, Pipeline
    summary = Pipeline.from_config(load_config("conf/orders.yml")).run()

Everything else lives in its own module (``quarantine.stages.json``,
``quarantine.errorhandling.retry``, ``quarantine.errorhandling.tolerance`` …) and is importable from there.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quarantine.batch.chain import apply_stages, final_error, final_result
    from quarantine.columns import ErrorKind, QuarantineStatus
    from quarantine.config import PipelineConfig, load_config, parse_config
    from quarantine.errorhandling.breach import Breach
    from quarantine.errors import (
        ConditionFailedError,
        ConfigError,
        HandlerError,
        QuarantineError,
        QuarantineWriteError,
        RetriesExhaustedError,
        SourceError,
        StageDefinitionError,
        ToleranceExceededError,
    )
    from quarantine.listeners.events import BatchReport, RunInfo, RunListener, RunStatus, RunSummary
    from quarantine.metrics.cells import MetricNames
    from quarantine.pipeline import Pipeline
    from quarantine.runners.errant import ErrantRecordReporter
    from quarantine.runners.replay import ReplayResult, discard, replay
    from quarantine.schema import ERROR_STRUCT, QUARANTINE_SCHEMA, result_struct
    from quarantine.spark.session import get_spark
    from quarantine.stage import Stage, StageContext
    from quarantine.stages.python import python_stage

#: Where each public name is defined: the package root imports a module only when one of its
#: names is first used (PEP 562), so ``import quarantine`` and the command line's ``--help``
#: import no engine (pyspark, Great Expectations, MLflow).
_LAZY: dict[str, str] = {
    "BatchReport": "quarantine.listeners.events",
    "Breach": "quarantine.errorhandling.breach",
    "ConditionFailedError": "quarantine.errors",
    "ConfigError": "quarantine.errors",
    "ERROR_STRUCT": "quarantine.schema",
    "ErrantRecordReporter": "quarantine.runners.errant",
    "ErrorKind": "quarantine.columns",
    "HandlerError": "quarantine.errors",
    "MetricNames": "quarantine.metrics.cells",
    "Pipeline": "quarantine.pipeline",
    "PipelineConfig": "quarantine.config",
    "QUARANTINE_SCHEMA": "quarantine.schema",
    "QuarantineError": "quarantine.errors",
    "QuarantineStatus": "quarantine.columns",
    "QuarantineWriteError": "quarantine.errors",
    "ReplayResult": "quarantine.runners.replay",
    "RetriesExhaustedError": "quarantine.errors",
    "RunInfo": "quarantine.listeners.events",
    "RunListener": "quarantine.listeners.events",
    "RunStatus": "quarantine.listeners.events",
    "RunSummary": "quarantine.listeners.events",
    "SourceError": "quarantine.errors",
    "Stage": "quarantine.stage",
    "StageContext": "quarantine.stage",
    "StageDefinitionError": "quarantine.errors",
    "ToleranceExceededError": "quarantine.errors",
    "apply_stages": "quarantine.batch.chain",
    "discard": "quarantine.runners.replay",
    "final_error": "quarantine.batch.chain",
    "final_result": "quarantine.batch.chain",
    "get_spark": "quarantine.spark.session",
    "load_config": "quarantine.config",
    "parse_config": "quarantine.config",
    "python_stage": "quarantine.stages.python",
    "replay": "quarantine.runners.replay",
    "result_struct": "quarantine.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'quarantine' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ERROR_STRUCT",
    "QUARANTINE_SCHEMA",
    "BatchReport",
    "Breach",
    "ConditionFailedError",
    "ConfigError",
    "ErrantRecordReporter",
    "ErrorKind",
    "HandlerError",
    "MetricNames",
    "Pipeline",
    "PipelineConfig",
    "QuarantineError",
    "QuarantineStatus",
    "QuarantineWriteError",
    "ReplayResult",
    "RetriesExhaustedError",
    "RunInfo",
    "RunListener",
    "RunStatus",
    "RunSummary",
    "SourceError",
    "Stage",
    "StageContext",
    "StageDefinitionError",
    "ToleranceExceededError",
    "apply_stages",
    "discard",
    "final_error",
    "final_result",
    "get_spark",
    "load_config",
    "parse_config",
    "python_stage",
    "replay",
    "result_struct",
]

__version__ = "0.1.0"
