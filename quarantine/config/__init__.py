"""Pipeline config: YAML in, frozen typed objects out, strict at load time.

The config objects are pydantic models, validated when they are built — from YAML
(:func:`load_config`, :func:`parse_config`), from a mapping (``from_mapping``) or
in Python (``MlflowConfig(enabled=True)``). Every unknown key and every bad
value is a :class:`~quarantine.errors.ConfigError` that names the key by its full
path (``errors.retry.timeout``, ``stages[2].options.schema``), the value (a
secret shown as ``[redacted]``) and what is allowed. Cross-field rules (retry
initial backoff ≤ max, a Kafka source needs topics, the quarantine table is not
the source…) are checked when the object is built, never on first use, so a bad
config fails before any data is read or written.

Error-handling keys keep Kafka Connect's names (``errors.tolerance``,
``errors.retry.timeout``…) and are written flat under ``errors:``::

    errors:
      tolerance: all
      tolerance.limit: 1000
      deadletterqueue.table.name: main.ops.quarantine

The fully flat top-level form (``errors.tolerance: all``) is accepted too. In
Python the same fields have attribute names (``ErrorsConfig(dlq_table_name=…,
retry_timeout_ms=…)``); YAML takes only the Kafka names.

Relative paths in a config file are read from the file's folder (see
:func:`load_config`). :func:`json_schema` is the JSON Schema of the YAML, for
editors; ``quarantine/config.schema.json`` is it, as shipped.
"""


from __future__ import annotations

from quarantine.config.alerts import AlertEvent, AlertsConfig, ChannelConfig, ChannelKind, SmtpTls
from quarantine.config.choices import (
    RateDuration,
    ReusedCoordinates,
    SchemaEvolution,
    SourceFormat,
    Tolerance,
    TriggerKind,
    WrittenBy,
)
from quarantine.config.json_schema import SCHEMA_FILE, json_schema, schema_text
from quarantine.config.load import load_config, parse_config
from quarantine.config.pipeline import PipelineConfig, StageSpec
from quarantine.config.sections import (
    ErrorsConfig,
    MetricsConfig,
    MlflowConfig,
    SourceConfig,
    SparkConfig,
    TargetConfig,
    TriggerConfig,
)
from quarantine.errorhandling.fail_on import FailOnConfig
from quarantine.values.types import BreachAction

__all__ = [
    "SCHEMA_FILE",
    "AlertEvent",
    "AlertsConfig",
    "BreachAction",
    "ChannelConfig",
    "ChannelKind",
    "ErrorsConfig",
    "FailOnConfig",
    "MetricsConfig",
    "MlflowConfig",
    "PipelineConfig",
    "RateDuration",
    "ReusedCoordinates",
    "SchemaEvolution",
    "SmtpTls",
    "SourceConfig",
    "SourceFormat",
    "SparkConfig",
    "StageSpec",
    "TargetConfig",
    "Tolerance",
    "TriggerConfig",
    "TriggerKind",
    "WrittenBy",
    "json_schema",
    "load_config",
    "parse_config",
    "schema_text",
]


