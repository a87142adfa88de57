"""The config's sections: errors, source, target, trigger, metrics, MLflow, Spark (their choices: ``choices``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from quarantine.config.choices import (
    SchemaEvolution,
    SourceFormat,
    TriggerKind,
    WrittenBy,
)
from quarantine.errorhandling.settings import DEFAULT_INITIAL_BACKOFF_MS, ErrorsConfig
from quarantine.errors import ConfigError, QuarantineError
from quarantine.values.section import YAML_CONTEXT, Section, schema_of
from quarantine.values.types import (
    BOOL,
    OPTIONAL_TABLE_NAME,
    OPTIONAL_TEXT,
    TEXT,
    Check,
    choice,
    fail,
    file_path,
    integer,
    string_map,
    table_ref,
    text,
)

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

    def require_source_columns(self) -> None:
        """Check that a replay can write this target: it is de-duplicated on the source columns.

        Raises:
            QuarantineError: ``source_columns`` is false.
        """
        if not self.source_columns:
            raise QuarantineError("replay needs target.source_columns: true (the target is de-duplicated on them)")


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


