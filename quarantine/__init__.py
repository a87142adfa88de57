"""quarantine: Kafka Connect-style error handling for Spark pipelines on Delta Lake.

The names a notebook or job reaches for::

    from quarantine import load_config, Pipeline
    summary = Pipeline.from_config(load_config("conf/orders.yml")).run()

Everything else lives in its own module (``quarantine.stages.json``,
``quarantine.errorhandling.retry``, ``quarantine.errorhandling.tolerance`` …) and is importable from there.
"""

from __future__ import annotations

from quarantine.batch.chain import apply_stages, final_error, final_result
from quarantine.config import PipelineConfig, load_config, parse_config
from quarantine.errorhandling.breach import Breach
from quarantine.errors import (
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
from quarantine.schema import ERROR_STRUCT, QUARANTINE_SCHEMA, ErrorKind, QuarantineStatus, result_struct
from quarantine.spark.session import get_spark
from quarantine.stage import Stage, StageContext
from quarantine.stages.python import python_stage

__all__ = [
    "ERROR_STRUCT",
    "QUARANTINE_SCHEMA",
    "BatchReport",
    "Breach",
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
