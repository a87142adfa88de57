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

import json
import os
import re
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import ModelWrapValidatorHandler

from quarantine._config_types import (
    BOOL,
    CLASS_NAMES,
    IDENTIFIER,
    OPTIONAL_TABLE_NAME,
    OPTIONAL_TEXT,
    TEXT,
    BreachAction,
    Check,
    choice,
    config_error,
    fail,
    file_path,
    integer,
    is_relative_path,
    number,
    string_map,
    table_ref,
    text,
    unknown_key,
)
from quarantine.errors import ConfigError
from quarantine.redaction import collect_secrets, redact
from quarantine.stage_options import StageDeclaration

__all__ = [
    "SCHEMA_FILE",
    "BreachAction",
    "ErrorsConfig",
    "MetricsConfig",
    "MlflowConfig",
    "PipelineConfig",
    "RateDuration",
    "ReusedCoordinates",
    "SourceConfig",
    "SourceFormat",
    "SparkConfig",
    "StageSpec",
    "TargetConfig",
    "Tolerance",
    "TriggerConfig",
    "TriggerKind",
    "json_schema",
    "load_config",
    "parse_config",
    "schema_text",
]


class Tolerance(StrEnum):
    """``errors.tolerance``: fail on the first error, or tolerate all of them."""

    NONE = "none"
    ALL = "all"


class RateDuration(StrEnum):
    """``errors.tolerance.rate.duration``: the window of the rate limit."""

    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"

    @property
    def seconds(self) -> int:
        return {"minute": 60, "hour": 3600, "day": 86400}[self.value]


class ReusedCoordinates(StrEnum):
    """``errors.coordinates.reused``: what a record whose coordinates an earlier record with
    other content already holds does (a recreated topic, a rewritten source)."""

    QUARANTINE = "quarantine"
    PROCESS = "process"
    FAIL = "fail"


class SourceFormat(StrEnum):
    """Where records come from. Delta and Parquet sources must be Kafka-shaped."""

    KAFKA = "kafka"
    DELTA = "delta"
    PARQUET = "parquet"


class TriggerKind(StrEnum):
    """Streaming trigger: drain what is there and stop, or run every interval."""

    AVAILABLE_NOW = "available_now"
    PROCESSING_TIME = "processing_time"


# --------------------------------------------------------------------------- the sections


class _Section(BaseModel):
    """A part of the config: frozen, no unknown keys, every failure a ConfigError.

    ``_key`` is the section's key in the YAML (``errors``, ``source``…): errors
    found inside it are named under it, whether it is validated alone
    (``ErrorsConfig.from_mapping``), built in Python, or as part of a config.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,  # attribute names in Python; YAML is held to the aliases (below)
        use_attribute_docstrings=True,
    )
    _key: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _yaml_names_only(cls, data: Any, info: ValidationInfo) -> Any:
        """YAML (validated with ``context={"yaml": True}``) names a key by its alias only."""
        if isinstance(data, Mapping) and isinstance(info.context, Mapping) and info.context.get("yaml"):
            attributes = {name for name, f in cls.model_fields.items() if f.alias and f.alias != name}
            for k in data:
                if k in attributes:
                    known = [f.alias or name for name, f in cls.model_fields.items()]
                    where = f"{cls._key}.{k}" if cls._key else str(k)
                    raise ConfigError(where, data[k], unknown_key(where, str(k), known))
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _errors_are_config_errors(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise config_error(exc, _schema_of(cls), cls._key) from None


@cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema by alias (for naming the known keys in an error)."""
    return model.model_json_schema(by_alias=True)


#: The validation context of a config as written (keys by their YAML names only).
_YAML: Mapping[str, Any] = MappingProxyType({"yaml": True})

#: The first delay of a retry, unless ``errors.retry.delay.max.ms`` is smaller (then that).
DEFAULT_INITIAL_BACKOFF_MS = 300
_HANDLER = text(
    "continue | fail | log_and_continue | a dotted path module.Class",
    pattern=r"continue|fail|log_and_continue|.*\..*",
)


class ErrorsConfig(_Section):
    """The ``errors.*`` keys (Kafka Connect's names; see the README's mapping table)."""

    _key = "errors"

    tolerance: Annotated[Tolerance, choice(Tolerance)] = Field(Tolerance.NONE, alias="tolerance")
    """none: fail the run on the first error (after that record is durably quarantined); all: quarantine and go on."""
    tolerance_limit: Annotated[int, integer(0, unlimited=True)] = Field(-1, alias="tolerance.limit")
    """Beyond Kafka: fail once a run has seen more than N errors (-1: no limit)."""
    tolerance_rate_limit: Annotated[int, integer(0, unlimited=True)] = Field(-1, alias="tolerance.rate.limit")
    """Fail when more than N errors fall in one window of tolerance.rate.duration (-1: no limit)."""
    tolerance_rate_duration: Annotated[RateDuration, choice(RateDuration)] = Field(
        RateDuration.MINUTE, alias="tolerance.rate.duration"
    )
    """The rate limit's window (UTC-aligned, persisted across restarts)."""
    retry_timeout_ms: Annotated[int, integer(0, unlimited=True)] = Field(0, alias="retry.timeout")
    """Total retry budget per operation in ms: 0 no retries, -1 for ever."""
    retry_delay_max_ms: Annotated[int, integer(0)] = Field(60_000, alias="retry.delay.max.ms")
    """The largest single backoff delay in ms."""
    retry_initial_backoff_ms: Annotated[int, integer(0)] = Field(
        default_factory=lambda data: min(DEFAULT_INITIAL_BACKOFF_MS, data.get("retry_delay_max_ms", 60_000)),
        alias="retry.initial.backoff.ms",
        json_schema_extra={"default": DEFAULT_INITIAL_BACKOFF_MS},
    )
    """The first backoff delay in ms (at most retry.delay.max.ms; default 300, or that maximum if smaller)."""
    retry_backoff_multiplier: Annotated[float, number(lo=1.0)] = Field(2.0, alias="retry.backoff.multiplier")
    """Growth of the delay per attempt (≥ 1)."""
    retry_jitter_factor: Annotated[float, number(lo=0.0, hi=1.0)] = Field(0.2, alias="retry.jitter.factor")
    """Each delay is scaled by a random factor in [1-j, 1+j]."""
    retry_retriable: Annotated[tuple[str, ...], CLASS_NAMES] = Field((), alias="retry.retriable.exceptions")
    """Extra exception class names (simple or dotted) to retry; Delta commit conflicts are built in."""
    log_enable: Annotated[bool, BOOL] = Field(False, alias="log.enable")
    """Log each error's context (stage, source coordinates, class)."""
    log_include_messages: Annotated[bool, BOOL] = Field(False, alias="log.include.messages")
    """Include the record's key and value in those logs."""
    log_include_configs: Annotated[bool, BOOL] = Field(False, alias="log.include.configs")
    """Include the (redacted) config in those logs."""
    dlq_table_name: Annotated[str, table_ref()] = Field(alias="deadletterqueue.table.name")
    """The quarantine table: a path or catalog.schema.table."""
    dlq_context_stacktrace_enable: Annotated[bool, BOOL] = Field(
        False, alias="deadletterqueue.context.stacktrace.enable"
    )
    """Keep stack traces in the quarantine table."""
    dlq_topic_name: Annotated[str | None, OPTIONAL_TEXT] = Field(None, alias="deadletterqueue.topic.name")
    """Also produce quarantined records to this Kafka topic (after the table has them; at-least-once)."""
    dlq_topic_bootstrap_servers: Annotated[str | None, OPTIONAL_TEXT] = Field(
        None, alias="deadletterqueue.topic.bootstrap.servers"
    )
    """The DLQ topic's brokers; default the Kafka source's source.bootstrap.servers."""
    dlq_topic_options: Annotated[Mapping[str, str], string_map()] = Field(
        default_factory=lambda: MappingProxyType({}), alias="deadletterqueue.topic.options"
    )
    """Spark Kafka sink options for the DLQ topic (kafka.security.protocol, kafka.sasl.jaas.config…)."""
    dlq_context_headers_enable: Annotated[bool, BOOL] = Field(True, alias="deadletterqueue.context.headers.enable")
    """Add Kafka Connect's __connect.errors.* headers to the DLQ topic's records."""
    dlq_retention_days: Annotated[int, integer(0, unlimited=True)] = Field(
        30, alias="deadletterqueue.retention.days"
    )
    """quarantine maintain deletes this pipeline's replayed/discarded rows resolved more than N days ago
    (-1: never); open rows are never deleted."""
    dlq_vacuum_retention_hours: Annotated[int, integer(168)] = Field(
        168, alias="deadletterqueue.vacuum.retention.hours"
    )
    """quarantine maintain's VACUUM keeps files removed in the last N hours (≥ 168, Delta's safety
    check; more if the table's delta.deletedFileRetentionDuration says so)."""
    coordinates_reused: Annotated[ReusedCoordinates, choice(ReusedCoordinates)] = Field(
        ReusedCoordinates.QUARANTINE, alias="coordinates.reused"
    )
    """A record whose coordinates an earlier record with other content holds (a recreated topic, a
    rewritten source; records sharing coordinates in one read too): quarantine it (CoordinatesReused,
    ConflictingDuplicate), process it as a new record, or fail the run before any write."""
    handler_deserialize: Annotated[str | None, _HANDLER] = Field(None, alias="handler.deserialize")
    """What a deserialize error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_transform: Annotated[str | None, _HANDLER] = Field(None, alias="handler.transform")
    """What a transform error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_validate: Annotated[str | None, _HANDLER] = Field(None, alias="handler.validate")
    """What a validate error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_expectation: Annotated[str | None, _HANDLER] = Field(None, alias="handler.expectation")
    """What an expectation error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_sink: Annotated[str | None, _HANDLER] = Field(None, alias="handler.sink")
    """What a record reported by a custom sink does: continue | fail | log_and_continue | a dotted path."""

    @property
    def handlers(self) -> Mapping[str, str]:
        """Per error kind (``deserialize``…), the configured ``errors.handler.<kind>``."""
        kinds = ("deserialize", "transform", "validate", "expectation", "sink")
        named = {k: getattr(self, f"handler_{k}") for k in kinds}
        return MappingProxyType({k: v for k, v in named.items() if v is not None})

    @model_validator(mode="after")
    def _backoff_within_max(self) -> ErrorsConfig:
        if self.retry_initial_backoff_ms > self.retry_delay_max_ms:
            raise ConfigError(
                "errors.retry.initial.backoff.ms",
                self.retry_initial_backoff_ms,
                f"≤ errors.retry.delay.max.ms ({self.retry_delay_max_ms})",
            )
        return self

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ErrorsConfig:
        """Build from flat ``errors.*`` keys (without the ``errors.`` prefix)."""
        return cls.model_validate(dict(raw), context=_YAML)


def _topics(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise fail("a list of topic names")
    return tuple(value)


_TOPICS = Check(_topics, {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}, to_plain=list)


class SourceConfig(_Section):
    """Where records come from."""

    _key = "source"

    format: Annotated[SourceFormat, choice(SourceFormat)] = SourceFormat.DELTA
    """kafka, or a Kafka-shaped delta / parquet table."""
    path: Annotated[str | None, file_path(optional=True)] = None
    """A table path (delta/parquet), relative to the config's folder; or use table for a catalog name."""
    table: Annotated[str | None, OPTIONAL_TABLE_NAME] = None
    """A catalog table name (delta), e.g. catalog.schema.table."""
    streaming: Annotated[bool, BOOL] = Field(False, validate_default=True)
    """Read with readStream: incremental and checkpointed (always true for kafka)."""
    bootstrap_servers: Annotated[str | None, OPTIONAL_TEXT] = Field(None, alias="bootstrap.servers")
    """Kafka bootstrap.servers: host:port[,host:port]."""
    topics: Annotated[tuple[str, ...], _TOPICS] = ()
    """Kafka topics to subscribe to: a list, or one comma-separated string."""
    topic_pattern: Annotated[str | None, OPTIONAL_TEXT] = Field(None, alias="topic.pattern")
    """A Java regex of topics to subscribe to (instead of topics)."""
    starting_offsets: Annotated[str, TEXT] = Field("earliest", alias="starting.offsets")
    """earliest | latest | Spark's JSON form."""
    include_headers: Annotated[bool, BOOL] = Field(True, alias="include.headers")
    """Read Kafka headers (the quarantine table keeps them)."""
    max_offsets_per_trigger: Annotated[int | None, integer(1, optional=True)] = Field(
        None, alias="max.offsets.per.trigger"
    )
    """The most records per micro-batch."""
    options: Annotated[Mapping[str, str], string_map()] = Field(default_factory=lambda: MappingProxyType({}))
    """Extra reader options, passed to Spark verbatim (e.g. kafka.security.protocol); secrets are redacted."""

    @property
    def location(self) -> str:
        """A human name for the source (path, table, or topics)."""
        if self.format is SourceFormat.KAFKA:
            return ",".join(self.topics) if self.topics else f"pattern {self.topic_pattern}"
        return self.path or self.table or "?"

    @field_validator("streaming")
    @classmethod
    def _kafka_streams(cls, value: bool, info: ValidationInfo) -> bool:
        return True if info.data.get("format") is SourceFormat.KAFKA else value

    @model_validator(mode="after")
    def _one_location(self) -> SourceConfig:
        if self.format is SourceFormat.KAFKA:
            if not self.bootstrap_servers:
                raise ConfigError("source.bootstrap.servers", None, "host:port[,host:port] for a kafka source")
            if bool(self.topics) == bool(self.topic_pattern):
                raise ConfigError(
                    "source.topics", list(self.topics) or None,
                    "exactly one of source.topics and source.topic.pattern",
                )
        elif not (self.path or self.table) or (self.path and self.table):
            raise ConfigError(
                "source.path", self.path, f"exactly one of source.path and source.table for a {self.format} source"
            )
        elif self.format is SourceFormat.PARQUET and self.table:
            raise ConfigError("source.table", self.table, "source.path for a parquet source")
        return self

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SourceConfig:
        """Build from the ``source:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=_YAML)


class TargetConfig(_Section):
    """Where good rows go: a Delta table, appended exactly once per batch."""

    _key = "target"

    table: Annotated[str, table_ref()]
    """The target Delta table: a path (relative to the config's folder) or catalog.schema.table."""
    checkpoint: Annotated[str | None, file_path(optional=True)] = None
    """The streaming checkpoint location (required when streaming), relative to the config's folder."""
    source_columns: Annotated[bool, BOOL] = True
    """Keep _source_topic, _source_partition, _source_offset, _source_timestamp, _source_fingerprint (batch
    re-runs need them)."""
    shared: Annotated[bool, BOOL] = False
    """Other pipelines write the same topics into this target on purpose (else a batch run writing a topic
    another pipeline writes into it is refused before any write)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TargetConfig:
        """Build from the ``target:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=_YAML)


_INTERVAL = r"\d+\s*(milliseconds?|seconds?|minutes?|hours?)"


class _TriggerDeclaration(_Section):
    """``trigger:`` as a mapping."""

    _key = "trigger"

    processing_time: Annotated[str | None, text("an interval like '10 seconds'", pattern=_INTERVAL)] = None
    """Run a micro-batch every interval, e.g. '10 seconds'."""
    available_now: Any = None
    """Drain what is there and stop (the default)."""


class TriggerConfig(_Section):
    """Streaming trigger: ``available_now`` (jobs) or ``processing_time`` with an interval."""

    _key = "trigger"

    kind: Annotated[TriggerKind, choice(TriggerKind)] = TriggerKind.AVAILABLE_NOW
    """available_now: drain what is there and stop; processing_time: a micro-batch every interval."""
    interval: Annotated[str, TEXT] = "10 seconds"
    """The processing_time interval."""

    @classmethod
    def from_value(cls, raw: Any) -> TriggerConfig:
        """Build from ``trigger:`` as written in YAML: ``available_now`` or ``{processing_time: "10 seconds"}``."""
        if raw is None or raw == "available_now":
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError("trigger", raw, "available_now or {processing_time: '10 seconds'}")
        declared = _TriggerDeclaration.model_validate(dict(raw), context=_YAML)
        if declared.processing_time:
            return cls(kind=TriggerKind.PROCESSING_TIME, interval=declared.processing_time)
        return cls()


_TRIGGER = Check(
    lambda v: v if isinstance(v, TriggerConfig) else TriggerConfig.from_value(v),
    {
        "anyOf": [
            {"const": "available_now"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "processing_time": {
                        "type": "string", "pattern": f"^\\s*{_INTERVAL}\\s*$",
                        "description": "Run a micro-batch every interval, e.g. '10 seconds'.",
                    },
                    "available_now": {"description": "Drain what is there and stop (the default)."},
                },
            },
            {"type": "null"},
        ],
    },
)


class MetricsConfig(_Section):
    """The Delta metrics table (one row per batch per metric)."""

    _key = "metrics"

    table: Annotated[str | None, table_ref(optional=True)] = None
    """The metrics Delta table: a path (relative to the config's folder) or catalog.schema.table."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MetricsConfig:
        """Build from the ``metrics:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=_YAML)


class MlflowConfig(_Section):
    """MLflow tracking. Disabled means a no-op tracker, never dropped records."""

    _key = "mlflow"

    enabled: Annotated[bool, BOOL] = False
    """Log runs to MLflow."""
    tracking_uri: Annotated[str | None, OPTIONAL_TEXT] = None
    """sqlite:///mlflow.db locally; databricks on Databricks; unset: MLflow's own default (environment)."""
    experiment: Annotated[str, TEXT] = "quarantine"
    """Experiment name (a workspace path on Databricks)."""
    http_timeout_s: Annotated[int, integer(1)] = 5
    """MLflow HTTP request timeout in seconds (a bounded delay on outages)."""
    http_max_retries: Annotated[int, integer(0)] = 0
    """MLflow HTTP retries per request."""
    buffer_max: Annotated[int, integer(0)] = 10_000
    """Metric points buffered while the server is down before dropping."""
    sample_messages: Annotated[int, integer(0)] = 20
    """Quarantined messages sampled into a run artifact."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MlflowConfig:
        """Build from the ``mlflow:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=_YAML)


class SparkConfig(_Section):
    """Settings for a local Spark session (on Databricks the cluster's own apply)."""

    _key = "spark"

    conf: Annotated[Mapping[str, str], string_map()] = Field(default_factory=lambda: MappingProxyType({}))
    """Spark conf for local sessions, e.g. {spark.sql.shuffle.partitions: '8'}; secrets are redacted."""


def _options(value: Any) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise fail("a mapping")
    return MappingProxyType(dict(value))


_OPTIONS = Check(_options, {"type": "object"}, to_plain=dict)


class StageSpec(_Section):
    """One stage as declared in YAML: a built-in ``type`` with options.

    Built by :func:`parse_config` from the ``stages:`` list, which checks the type,
    the option names and shapes (:mod:`quarantine.stage_options`); the stage
    module checks the rest when it builds the stage. Built in Python
    (``StageSpec("parse", "json", None, {"schema": …}, 1)``, positional or by
    name), only the fields are checked, and the options when the stage is built.
    """

    _key = "stages"

    name: Annotated[str, IDENTIFIER]
    """The stage's name; also the name of its result column."""
    type: Annotated[str, TEXT]
    """A built-in stage type (see quarantine.stages)."""
    input: Annotated[str | None, OPTIONAL_TEXT] = None
    """What the stage reads: a source column, or an earlier stage's name (its result); default the previous
    stage, or value for the first."""
    options: Annotated[Mapping[str, Any], _OPTIONS] = Field(default_factory=lambda: MappingProxyType({}))
    """The type's options as written (paths resolved); validated when the stage is built."""
    index: Annotated[int, integer(0)] = 0
    """Position in stages (for error messages: stages[2].options.schema)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """``StageSpec(name, type, input, options, index)``, positionally or by name."""
        fields = ("name", "type", "input", "options", "index")
        if len(args) > len(fields):
            raise ConfigError("stages", args, f"at most {len(fields)} values: {', '.join(fields)}")
        kwargs.update(zip(fields, args, strict=False))
        super().__init__(**kwargs)

    def key(self, option: str | None = None) -> str:
        """The config path of this stage or one of its options, for error messages."""
        base = f"stages[{self.index}]"
        return f"{base}.{option}" if option else base


_STAGES_DECLARED = Annotated[list[StageDeclaration], Field(min_length=1)]
_STAGES: TypeAdapter[list[Any]] = TypeAdapter(_STAGES_DECLARED)


def _stage_specs(value: Any, info: ValidationInfo) -> tuple[StageSpec, ...]:
    """``stages:`` as written → StageSpecs: types, option names and shapes checked, paths resolved."""
    if isinstance(value, list | tuple) and value and all(isinstance(s, StageSpec) for s in value):
        return tuple(value)
    if not isinstance(value, list) or not value:
        raise ConfigError("stages", value, "a non-empty list of stages")
    try:
        declared = _STAGES.validate_python(value, context=info.context)
    except ValidationError as exc:
        raise config_error(exc, _stages_schema(), "stages") from None
    specs: list[StageSpec] = []
    seen: set[str] = set()
    for i, (raw, stage) in enumerate(zip(value, declared, strict=True)):
        if stage.name in seen:
            raise ConfigError(f"stages[{i}].name", stage.name, "a name not used by another stage")
        seen.add(stage.name)
        options = dict(raw.get("options") or {})
        opts = getattr(stage, "options", None)
        for option in getattr(type(opts), "paths", ()):
            options[option] = getattr(opts, option)
        specs.append(StageSpec(name=stage.name, type=stage.type, input=stage.input, options=options, index=i))
    return tuple(specs)


@cache
def _stages_schema() -> dict[str, Any]:
    return _STAGES.json_schema(by_alias=True)


_STAGE_LIST = Check(_stage_specs, {}, takes_info=True, input_type=_STAGES_DECLARED)


class PipelineConfig(_Section):
    """A whole pipeline: source → stages → target + quarantine, and how errors behave.

    Build with :func:`load_config` / :func:`parse_config`; the object is frozen
    and already validated. :attr:`raw` keeps the YAML as loaded, for
    :meth:`redacted` (MLflow params, logs).
    """

    pipeline: Annotated[str, text("a name of letters, digits, _ and -", pattern=r"[A-Za-z_\-][A-Za-z0-9_\-]*")]
    """The pipeline's name: letters, digits, _ and -; it keys the quarantine rows."""
    source: SourceConfig
    """Where records come from."""
    target: TargetConfig
    """Where good rows go."""
    stages: Annotated[tuple[StageSpec, ...], _STAGE_LIST]
    """The stages, in order; each adds a result column named after it."""
    errors: ErrorsConfig
    """Kafka Connect's error-handling keys, flat (tolerance, retry.timeout, deadletterqueue.table.name…)."""
    trigger: Annotated[TriggerConfig, _TRIGGER] = Field(default_factory=TriggerConfig)
    """Streaming trigger: available_now (drain and stop) or {processing_time: '10 seconds'}."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """The Delta metrics table."""
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    """MLflow tracking."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """Local Spark session settings."""

    _raw: Mapping[str, Any] = PrivateAttr(default_factory=lambda: MappingProxyType({}))
    _base_dir: str = PrivateAttr(default=".")

    @property
    def spark_conf(self) -> Mapping[str, str]:
        """``spark.conf``: Spark settings for a local session."""
        return self.spark.conf

    @property
    def raw(self) -> Mapping[str, Any]:
        """The config as loaded (the flat ``errors.*`` keys folded into ``errors``)."""
        return self._raw

    @property
    def base_dir(self) -> str:
        """The folder relative paths of the config were read from (the config file's)."""
        return self._base_dir

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """An empty section (``metrics:`` with every key commented out) is ``{}``; the flat
        ``errors.tolerance: all`` at the top level is ``errors: {tolerance: all}``."""
        if not isinstance(data, Mapping):
            return data
        out = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("errors."))}
        for section in _SECTIONS:
            if section in out and out[section] is None:
                out[section] = {}
        flat = {k[len("errors."):]: v for k, v in data.items() if isinstance(k, str) and k.startswith("errors.")}
        nested = out.get("errors", {})
        out["errors"] = {**flat, **nested} if isinstance(nested, Mapping) else nested
        return out

    @model_validator(mode="after")
    def _consistent(self) -> PipelineConfig:
        self._check_tables_differ()
        brokers = self.errors.dlq_topic_bootstrap_servers or self.source.bootstrap_servers
        if self.errors.dlq_topic_name and not brokers:
            raise ConfigError(
                "errors.deadletterqueue.topic.bootstrap.servers", None,
                "the DLQ topic's brokers (host:port,…), unless the source is Kafka (its bootstrap.servers are used)",
            )
        if self.source.streaming and not self.target.checkpoint:
            raise ConfigError("target.checkpoint", None, "a checkpoint location for a streaming source")
        if not self.source.streaming and not self.target.source_columns:
            raise ConfigError(
                "target.source_columns", False,
                "true for a batch source (re-runs de-duplicate the target on the source coordinates)",
            )
        return self

    def tables(self) -> dict[str, str]:
        """Every table the pipeline reads or writes, by the config key that names it."""
        dlq = self.errors.dlq_table_name
        named = {
            "source.path": self.source.path,
            "source.table": self.source.table,
            "target.table": self.target.table,
            "errors.deadletterqueue.table.name": dlq,
            "metrics.table": self.metrics.table,
        }
        if self.errors.tolerance_rate_limit >= 0:
            named["errors.deadletterqueue.table.name (its _tolerance window table)"] = dlq.rstrip("/") + "_tolerance"
        return {k: v for k, v in named.items() if v}

    def _check_tables_differ(self) -> None:
        """Every table is a different table: the first pair that is the same is a ConfigError.

        Names compare case-insensitively and without a trailing ``/`` (paths) — the
        same rule Delta and Unity Catalog apply to identifiers — so ``/data/t/`` and
        ``/DATA/t`` collide, as do ``main.raw.Orders`` and ``main.raw.orders``.
        """
        seen: dict[str, str] = {}
        for key, name in self.tables().items():
            other = seen.get(_norm(name))
            if other is not None:
                if key.startswith("errors.") and other.startswith("source."):
                    allowed = f"a table other than {other} (the quarantine table must never be the source)"
                else:
                    allowed = f"a table other than {other} ({name!r} is named by both)"
                raise ConfigError(key, name, allowed)
            seen[_norm(name)] = key

    def redacted(self) -> dict[str, Any]:
        """The config as loaded, with every credential replaced by ``[redacted]``."""
        out: dict[str, Any] = redact(dict(self.raw))
        return out

    def secrets(self) -> tuple[str, ...]:
        """Every configured secret value, to scrub from logs, params and messages."""
        return collect_secrets(dict(self.raw))


#: Top-level keys holding a mapping of settings (``null`` is read as an empty one).
_SECTIONS = ("source", "target", "errors", "metrics", "mlflow", "spark")


def _norm(name: str | None) -> str:
    return (name or "").rstrip("/").lower()


def parse_config(raw: Mapping[str, Any], *, base_dir: str | Path = ".") -> PipelineConfig:
    """Validate a config mapping (as loaded from YAML) into a :class:`PipelineConfig`.

    Args:
        raw: the config; only the YAML key names are accepted (``retry.timeout``,
            not ``retry_timeout_ms``).
        base_dir: the folder that relative paths are read from: every path-like
            value (``source.path``, ``target.checkpoint``, an expectation suite; a
            table key when it holds a ``/``) is made absolute against it. Table names
            (``catalog.schema.table``), URIs and absolute paths stay as written.

    Every ``${env:NAME}`` in a string value is replaced by that environment
    variable first (Kafka Connect's ``EnvVarConfigProvider`` syntax): how a secret
    reaches a config without being written in it.

    Raises:
        ConfigError: naming the first bad key, its value and what is allowed; an
            expectation suite that does not exist is one (its resolved path named);
            so is an ``${env:NAME}`` whose variable is not set.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("", raw, "a mapping")
    raw = _from_environment(raw, "")
    folder = os.path.abspath(base_dir)
    config = PipelineConfig.model_validate(dict(raw), context={**_YAML, "base_dir": folder})
    as_loaded = dict(raw)
    errors = as_loaded.get("errors")
    flat = {k[len("errors."):]: as_loaded.pop(k) for k in list(as_loaded) if str(k).startswith("errors.")}
    as_loaded["errors"] = {**flat, **(errors if isinstance(errors, Mapping) else {})}
    config._raw = MappingProxyType(as_loaded)
    config._base_dir = folder
    return config


#: ``${env:NAME}``: Kafka Connect's EnvVarConfigProvider syntax (KIP-887).
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _from_environment(node: Any, key: str) -> Any:
    """``node`` with every ``${env:NAME}`` in its strings replaced by the variable's value.

    This is how a secret reaches a config without being written in it: on Databricks
    a job cluster's environment variables may be secret references
    (``{{secrets/<scope>/<key>}}``), which the cluster resolves when it starts.

    Raises:
        ConfigError: a referenced variable is not set; it names the key and the variable.
    """
    if isinstance(node, str):
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise ConfigError(key, node, f"the environment variable {name} to be set (named as ${{env:{name}}})")
            return os.environ[name]

        return _ENV_REFERENCE.sub(value, node)
    if isinstance(node, Mapping):
        return {k: _from_environment(v, f"{key}.{k}" if key else str(k)) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_from_environment(v, f"{key}[{i}]") for i, v in enumerate(node)]
    return node


#: Keys an override may set whose value is a path: a relative one is read from the working directory.
_PATH_KEYS = {
    "source.path": True,
    "target.checkpoint": True,
    "target.table": False,
    "metrics.table": False,
    "errors.deadletterqueue.table.name": False,
}


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Load and validate a YAML pipeline config.

    Relative paths written in the file are read from the file's folder, wherever
    it is loaded from (see :func:`parse_config`); relative paths given as
    ``overrides`` are read from the working directory, like any path typed at a
    prompt.

    Args:
        path: the YAML file.
        overrides: dotted keys to set before validation (``{"source.path": ...}``),
            as the CLI's ``--set key=value`` and bundle job parameters do.

    Raises:
        ConfigError: the file is missing or not YAML, or a key/value is bad.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError("--conf", str(path), "an existing YAML file")
    try:
        with p.open(encoding="utf-8") as stream:  # a stream: YAML's errors name the file, not "<unicode string>"
            raw = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise ConfigError("--conf", str(path), f"valid YAML ({exc})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError("--conf", str(path), "a YAML mapping at the top level")
    raw = dict(raw)
    for dotted, value in (overrides or {}).items():
        bare = _PATH_KEYS.get(dotted)
        if bare is not None and isinstance(value, str) and is_relative_path(value, bare_names=bare):
            value = os.path.abspath(value)
        _set_dotted(raw, dotted, value)
    return parse_config(raw, base_dir=p.parent)


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts; ``errors.x.y`` stays flat under ``errors``."""
    head, _, rest = dotted.partition(".")
    if head == "errors":
        raw.setdefault("errors", {})
        raw["errors"] = dict(raw["errors"] or {})
        raw["errors"][rest] = value
        return
    if not rest:
        raw[head] = value
        return
    node = dict(raw.get(head) or {})
    # source/target keys may themselves be dotted (bootstrap.servers): try the whole rest first
    if rest in node or (head in ("source",) and rest in {
        "bootstrap.servers", "topic.pattern", "starting.offsets", "include.headers", "max.offsets.per.trigger"
    }):
        node[rest] = value
    else:
        _set_dotted(node, rest, value)
    raw[head] = node


# --------------------------------------------------------------------------- the JSON Schema

#: Where the schema is shipped, next to this module (package data).
SCHEMA_FILE = Path(__file__).with_name("config.schema.json")


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
