"""The config's sections: errors, source, target, trigger, metrics, MLflow, Spark (their choices: ``choices``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import ModelWrapValidatorHandler

from quarantine._config_types import (
    BOOL,
    CLASS_NAMES,
    OPTIONAL_TABLE_NAME,
    OPTIONAL_TEXT,
    TEXT,
    Check,
    choice,
    config_error,
    fail,
    file_path,
    integer,
    number,
    string_map,
    table_ref,
    text,
    unknown_key,
)
from quarantine.config.choices import (
    RateDuration,
    ReusedCoordinates,
    SchemaEvolution,
    SourceFormat,
    Tolerance,
    TriggerKind,
    WrittenBy,
)
from quarantine.errors import ConfigError

__all__ = [
    "DEFAULT_INITIAL_BACKOFF_MS",
    "TRIGGER",
    "YAML_CONTEXT",
    "ErrorsConfig",
    "MetricsConfig",
    "MlflowConfig",
    "Section",
    "SourceConfig",
    "SparkConfig",
    "TargetConfig",
    "TriggerConfig",
    "schema_of",
]


# --------------------------------------------------------------------------- the sections


class Section(BaseModel):
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
            raise config_error(exc, schema_of(cls), cls._key) from None


@cache
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema by alias (for naming the known keys in an error)."""
    return model.model_json_schema(by_alias=True)


#: The validation context of a config as written (keys by their YAML names only).
YAML_CONTEXT: Mapping[str, Any] = MappingProxyType({"yaml": True})

#: The first delay of a retry, unless ``errors.retry.delay.max.ms`` is smaller (then that).
DEFAULT_INITIAL_BACKOFF_MS = 300
_HANDLER = text(
    "continue | fail | log_and_continue | a dotted path module.Class",
    pattern=r"continue|fail|log_and_continue|.*\..*",
)


class ErrorsConfig(Section):
    """The ``errors.*`` keys (Kafka Connect's names; see the README's mapping table)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "tolerance": "all",
        "tolerance.limit": 1000,
        "retry.timeout": 300_000,
        "log.enable": True,
        "deadletterqueue.table.name": "main.ops.quarantine",
        "deadletterqueue.context.stacktrace.enable": True,
    }]})
    _key = "errors"

    tolerance: Annotated[Tolerance, choice(Tolerance)] = Field(Tolerance.NONE, alias="tolerance")
    """none: fail the run on the first error (after that record is durably quarantined); all: quarantine and go on."""
    tolerance_limit: Annotated[int, integer(0, unlimited=True)] = Field(-1, alias="tolerance.limit", examples=[1000])
    """Beyond Kafka: fail once a run has seen more than N errors (-1: no limit)."""
    tolerance_rate_limit: Annotated[int, integer(0, unlimited=True)] = Field(
        -1, alias="tolerance.rate.limit", examples=[100]
    )
    """Fail when more than N errors fall in one window of tolerance.rate.duration (-1: no limit)."""
    tolerance_rate_duration: Annotated[RateDuration, choice(RateDuration)] = Field(
        RateDuration.MINUTE, alias="tolerance.rate.duration"
    )
    """The rate limit's window (UTC-aligned, persisted across restarts)."""
    retry_timeout_ms: Annotated[int, integer(0, unlimited=True)] = Field(0, alias="retry.timeout", examples=[300_000])
    """Total retry budget per operation in ms: 0 no retries, -1 for ever."""
    retry_delay_max_ms: Annotated[int, integer(0)] = Field(60_000, alias="retry.delay.max.ms", examples=[10_000])
    """The largest single backoff delay in ms."""
    retry_initial_backoff_ms: Annotated[int, integer(0)] = Field(
        default_factory=lambda data: min(DEFAULT_INITIAL_BACKOFF_MS, data.get("retry_delay_max_ms", 60_000)),
        alias="retry.initial.backoff.ms",
        json_schema_extra={"default": DEFAULT_INITIAL_BACKOFF_MS},
        examples=[500],
    )
    """The first backoff delay in ms (at most retry.delay.max.ms; default 300, or that maximum if smaller)."""
    retry_backoff_multiplier: Annotated[float, number(lo=1.0)] = Field(
        2.0, alias="retry.backoff.multiplier", examples=[1.5]
    )
    """Growth of the delay per attempt (≥ 1)."""
    retry_jitter_factor: Annotated[float, number(lo=0.0, hi=1.0)] = Field(
        0.2, alias="retry.jitter.factor", examples=[0.1]
    )
    """Each delay is scaled by a random factor in [1-j, 1+j]."""
    retry_retriable: Annotated[tuple[str, ...], CLASS_NAMES] = Field(
        (), alias="retry.retriable.exceptions", examples=[["TimeoutError", "requests.exceptions.ConnectionError"]]
    )
    """Extra exception class names (simple or dotted) to retry; Delta commit conflicts are built in."""
    log_enable: Annotated[bool, BOOL] = Field(False, alias="log.enable")
    """Log each error's context (stage, source coordinates, class)."""
    log_include_messages: Annotated[bool, BOOL] = Field(False, alias="log.include.messages")
    """Include the record's key and value in those logs."""
    log_include_configs: Annotated[bool, BOOL] = Field(False, alias="log.include.configs")
    """Include the (redacted) config in those logs."""
    dlq_table_name: Annotated[str, table_ref()] = Field(
        alias="deadletterqueue.table.name", examples=["main.ops.quarantine"]
    )
    """The quarantine table: a path or catalog.schema.table."""
    dlq_context_stacktrace_enable: Annotated[bool, BOOL] = Field(
        False, alias="deadletterqueue.context.stacktrace.enable"
    )
    """Keep stack traces in the quarantine table."""
    dlq_topic_name: Annotated[str | None, OPTIONAL_TEXT] = Field(
        None, alias="deadletterqueue.topic.name", examples=["orders.dlq"]
    )
    """Also produce quarantined records to this Kafka topic (after the table has them; at-least-once)."""
    dlq_topic_bootstrap_servers: Annotated[str | None, OPTIONAL_TEXT] = Field(
        None, alias="deadletterqueue.topic.bootstrap.servers", examples=["broker-1:9092,broker-2:9092"]
    )
    """The DLQ topic's brokers; default the Kafka source's source.bootstrap.servers."""
    dlq_topic_options: Annotated[Mapping[str, str], string_map()] = Field(
        default_factory=lambda: MappingProxyType({}), alias="deadletterqueue.topic.options",
        examples=[{"kafka.security.protocol": "SASL_SSL"}],
    )
    """Spark Kafka sink options for the DLQ topic (kafka.security.protocol, kafka.sasl.jaas.config…)."""
    dlq_context_headers_enable: Annotated[bool, BOOL] = Field(True, alias="deadletterqueue.context.headers.enable")
    """Add Kafka Connect's __connect.errors.* headers to the DLQ topic's records."""
    dlq_retention_days: Annotated[int, integer(0, unlimited=True)] = Field(
        30, alias="deadletterqueue.retention.days", examples=[90]
    )
    """quarantine maintain strips this pipeline's replayed/discarded rows resolved more than N days ago
    (-1: never): key, value, headers, message, stacktrace and the error_history entries' messages become
    NULL; the row keeps its coordinates, timestamp, fingerprint, status, stage, error class, history
    times and classes, so a re-run still
    leaves the record out. Only rows the table's commit clock also dates before the cutoff are
    stripped; open rows are never touched."""
    dlq_vacuum_retention_hours: Annotated[int, integer(168)] = Field(
        168, alias="deadletterqueue.vacuum.retention.hours", examples=[336]
    )
    """quarantine maintain's VACUUM keeps files removed in the last N hours (≥ 168, Delta's safety
    check; more if the table's delta.deletedFileRetentionDuration says so)."""
    coordinates_reused: Annotated[ReusedCoordinates, choice(ReusedCoordinates)] = Field(
        ReusedCoordinates.QUARANTINE, alias="coordinates.reused"
    )
    """A record whose coordinates an earlier record with other content holds (a recreated topic, a
    rewritten source; records sharing coordinates in one read too): quarantine it (CoordinatesReused,
    ConflictingDuplicate), process it as a new record, or fail the run before any write."""
    handler_deserialize: Annotated[str | None, _HANDLER] = Field(
        None, alias="handler.deserialize", examples=["log_and_continue"]
    )
    """What a deserialize error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_transform: Annotated[str | None, _HANDLER] = Field(None, alias="handler.transform", examples=["continue"])
    """What a transform error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_validate: Annotated[str | None, _HANDLER] = Field(
        None, alias="handler.validate", examples=["mypkg.handlers.PageOnCall"]
    )
    """What a validate error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_expectation: Annotated[str | None, _HANDLER] = Field(None, alias="handler.expectation", examples=["fail"])
    """What an expectation error does: continue | fail | log_and_continue | a dotted path module.Class."""
    handler_sink: Annotated[str | None, _HANDLER] = Field(None, alias="handler.sink", examples=["log_and_continue"])
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
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)


def _topics(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise fail("a list of topic names")
    return tuple(value)


_TOPICS = Check(_topics, {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}, to_plain=list)


class SourceConfig(Section):
    """Where records come from."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"format": "delta", "table": "main.raw.orders"},
        {"format": "kafka", "bootstrap.servers": "broker-1:9092,broker-2:9092", "topics": ["orders"],
         "starting.offsets": "earliest", "max.offsets.per.trigger": 100_000},
    ]})
    _key = "source"

    format: Annotated[SourceFormat, choice(SourceFormat)] = SourceFormat.DELTA
    """kafka, or a Kafka-shaped delta / parquet table."""
    path: Annotated[str | None, file_path(optional=True)] = Field(None, examples=["data/orders_raw"])
    """A table path (delta/parquet), relative to the config's folder; or use table for a catalog name."""
    table: Annotated[str | None, OPTIONAL_TABLE_NAME] = Field(None, examples=["main.raw.orders"])
    """A catalog table name (delta), e.g. catalog.schema.table."""
    streaming: Annotated[bool, BOOL] = Field(False, validate_default=True)
    """Read with readStream: incremental and checkpointed (always true for kafka)."""
    bootstrap_servers: Annotated[str | None, OPTIONAL_TEXT] = Field(
        None, alias="bootstrap.servers", examples=["broker-1:9092,broker-2:9092"]
    )
    """Kafka bootstrap.servers: host:port[,host:port]."""
    topics: Annotated[tuple[str, ...], _TOPICS] = Field((), examples=[["orders", "payments"]])
    """Kafka topics to subscribe to: a list, or one comma-separated string."""
    topic_pattern: Annotated[str | None, OPTIONAL_TEXT] = Field(None, alias="topic.pattern", examples=["orders\\..*"])
    """A Java regex of topics to subscribe to (instead of topics)."""
    starting_offsets: Annotated[str, TEXT] = Field("earliest", alias="starting.offsets", examples=["latest"])
    """earliest | latest | Spark's JSON form."""
    include_headers: Annotated[bool, BOOL] = Field(True, alias="include.headers")
    """Read Kafka headers (the quarantine table keeps them)."""
    max_offsets_per_trigger: Annotated[int | None, integer(1, optional=True)] = Field(
        None, alias="max.offsets.per.trigger", examples=[100_000]
    )
    """The most records per micro-batch."""
    options: Annotated[Mapping[str, str], string_map()] = Field(
        default_factory=lambda: MappingProxyType({}), examples=[{"kafka.security.protocol": "SASL_SSL"}]
    )
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
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)


class TargetConfig(Section):
    """Where good rows go: a Delta table, appended exactly once per batch."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"table": "main.sales.orders", "checkpoint": "checkpoints/orders"},
    ]})
    _key = "target"

    table: Annotated[str, table_ref()] = Field(examples=["main.sales.orders"])
    """The target Delta table: a path (relative to the config's folder) or catalog.schema.table."""
    checkpoint: Annotated[str | None, file_path(optional=True)] = Field(None, examples=["checkpoints/orders"])
    """The streaming checkpoint location (required when streaming), relative to the config's folder."""
    source_columns: Annotated[bool, BOOL] = True
    """Keep _source_topic, _source_partition, _source_offset, _source_timestamp, _source_fingerprint (batch
    re-runs need them)."""
    shared: Annotated[bool, BOOL] = False
    """Other pipelines write the same topics into this target on purpose (else a batch run writing a topic
    another pipeline writes into it is refused before any write)."""
    schema_evolution: Annotated[SchemaEvolution, choice(SchemaEvolution)] = SchemaEvolution.ADD_COLUMNS
    """add_columns (a field the pipeline's output gained is added to the table before the write, NULL in
    older rows; a number Delta's type widening takes, INT to BIGINT, is widened) or fail (the run refuses
    before any write, naming it); a field is never dropped. Any other retyped field is refused either way; a
    removed one is kept by the table and written NULL."""
    written_by: Annotated[WrittenBy, choice(WrittenBy)] = WrittenBy.JOB
    """job (quarantine run writes the tables) or pipeline (a declarative pipeline's updates do:
    quarantine.declarative.declare; run refuses, replay queues records for the pipeline's next update)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TargetConfig:
        """Build from the ``target:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)


_INTERVAL = r"\d+\s*(milliseconds?|seconds?|minutes?|hours?)"


class _TriggerDeclaration(Section):
    """``trigger:`` as a mapping."""

    _key = "trigger"

    processing_time: Annotated[str | None, text("an interval like '10 seconds'", pattern=_INTERVAL)] = None
    """Run a micro-batch every interval, e.g. '10 seconds'."""
    available_now: Any = None
    """Drain what is there and stop (the default)."""


class TriggerConfig(Section):
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
        declared = _TriggerDeclaration.model_validate(dict(raw), context=YAML_CONTEXT)
        if declared.processing_time:
            return cls(kind=TriggerKind.PROCESSING_TIME, interval=declared.processing_time)
        return cls()


TRIGGER = Check(
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


class MetricsConfig(Section):
    """The Delta metrics table (one row per batch per metric)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"table": "main.ops.quarantine_metrics"}]})
    _key = "metrics"

    table: Annotated[str | None, table_ref(optional=True)] = Field(
        default=None, examples=["main.ops.quarantine_metrics"]
    )
    """The metrics Delta table: a path (relative to the config's folder) or catalog.schema.table."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MetricsConfig:
        """Build from the ``metrics:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)


class MlflowConfig(Section):
    """MLflow tracking. Disabled means a no-op tracker, never dropped records."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"enabled": True, "tracking_uri": "sqlite:///mlflow.db", "experiment": "orders"},
    ]})
    _key = "mlflow"

    enabled: Annotated[bool, BOOL] = False
    """Log runs to MLflow."""
    tracking_uri: Annotated[str | None, OPTIONAL_TEXT] = Field(default=None, examples=["databricks"])
    """sqlite:///mlflow.db locally; databricks on Databricks; unset: MLflow's own default (environment)."""
    experiment: Annotated[str, TEXT] = Field(default="quarantine", examples=["/Shared/quarantine/orders"])
    """Experiment name (a workspace path on Databricks)."""
    http_timeout_s: Annotated[int, integer(1)] = Field(default=5, examples=[10])
    """MLflow HTTP request timeout in seconds (a bounded delay on outages)."""
    http_max_retries: Annotated[int, integer(0)] = Field(default=0, examples=[2])
    """MLflow HTTP retries per request."""
    buffer_max: Annotated[int, integer(0)] = Field(default=10_000, examples=[50_000])
    """Metric points buffered while the server is down before dropping."""
    sample_messages: Annotated[int, integer(0)] = Field(default=20, examples=[50])
    """Quarantined messages sampled into a run artifact."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MlflowConfig:
        """Build from the ``mlflow:`` mapping as written in YAML."""
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)


class SparkConfig(Section):
    """Settings for a local Spark session (on Databricks the cluster's own apply)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"conf": {"spark.sql.shuffle.partitions": "8"}}]})
    _key = "spark"

    conf: Annotated[Mapping[str, str], string_map()] = Field(
        default_factory=lambda: MappingProxyType({}), examples=[{"spark.sql.shuffle.partitions": "8"}]
    )
    """Spark conf for local sessions, e.g. {spark.sql.shuffle.partitions: '8'}; secrets are redacted."""


