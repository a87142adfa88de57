"""Pipeline config: YAML in, frozen typed objects out, strict at load time.

Every unknown key and every bad value is a :class:`~quarantine.errors.ConfigError`
that names the key, the value and what is allowed. Cross-field rules (retry
initial backoff ≤ max, a Kafka source needs topics, the quarantine table is
not the source…) are checked when the object is built, never on first use, so a
bad config fails before any data is read or written.

Error-handling keys keep Kafka Connect's names (``errors.tolerance``,
``errors.retry.timeout``…) and are written flat under ``errors:``::

    errors:
      tolerance: all
      tolerance.limit: 1000
      deadletterqueue.table.name: main.ops.quarantine

The fully flat top-level form (``errors.tolerance: all``) is accepted too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import yaml

from quarantine.errors import ConfigError
from quarantine.redaction import collect_secrets, redact

__all__ = [
    "BreachAction",
    "ErrorsConfig",
    "MetricsConfig",
    "MlflowConfig",
    "PipelineConfig",
    "RateDuration",
    "SourceConfig",
    "SourceFormat",
    "StageSpec",
    "TargetConfig",
    "Tolerance",
    "TriggerConfig",
    "TriggerKind",
    "load_config",
    "parse_config",
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


class SourceFormat(StrEnum):
    """Where records come from. Delta and Parquet sources must be Kafka-shaped."""

    KAFKA = "kafka"
    DELTA = "delta"
    PARQUET = "parquet"


class TriggerKind(StrEnum):
    """Streaming trigger: drain what is there and stop, or run every interval."""

    AVAILABLE_NOW = "available_now"
    PROCESSING_TIME = "processing_time"


class BreachAction(StrEnum):
    """What a failed (aggregate) expectation does to the batch."""

    WARN = "warn"
    FAIL = "fail"
    QUARANTINE_BATCH = "quarantine_batch"


# --------------------------------------------------------------------------- parsing helpers

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


def _enum(key: str, value: Any, enum: type[E]) -> E:
    try:
        return enum(str(value).strip().lower())
    except ValueError:
        allowed = " | ".join(m.value for m in enum)
        raise ConfigError(key, value, f"one of {allowed}") from None


def _int(key: str, value: Any, *, minimum: int | None = None, allow_minus_one: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(key, value, "an integer")
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(key, value, "an integer") from None
    if allow_minus_one and n == -1:
        return n
    if minimum is not None and n < minimum:
        extra = " or -1 (unlimited)" if allow_minus_one else ""
        raise ConfigError(key, value, f"an integer ≥ {minimum}{extra}")
    return n


def _float(key: str, value: Any, *, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool):
        raise ConfigError(key, value, "a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, value, "a number") from None
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        rng = f"in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ConfigError(key, value, f"a number {rng}")
    return x


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(key, value, "true | false")


def _str(key: str, value: Any, *, nonempty: bool = True) -> str:
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise ConfigError(key, value, "a non-empty string")
    return value.strip()


def _mapping(key: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(key, value, "a mapping")
    return value


def _check_keys(prefix: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    for k in given:
        if k not in allowed:
            where = f"{prefix}.{k}" if prefix else str(k)
            raise ConfigError(where, given[k], f"one of the known keys: {', '.join(sorted(allowed))}")


def _frozen(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(m))


# --------------------------------------------------------------------------- errors.*


@dataclass(frozen=True)
class ErrorsConfig:
    """The ``errors.*`` keys (Kafka Connect's names; see the README's mapping table).

    Attributes:
        tolerance: ``none`` fails the run on the first error (after that record
            is durably quarantined); ``all`` quarantines and goes on.
        tolerance_limit: beyond Kafka: fail once a run has seen more than N errors (-1 off).
        tolerance_rate_limit: fail when more than N errors fall in one window (-1 off).
        tolerance_rate_duration: the rate limit's window.
        retry_timeout_ms: total retry budget per operation; 0 no retries, -1 forever.
        retry_delay_max_ms: the largest single backoff delay.
        retry_initial_backoff_ms: the first backoff delay.
        retry_backoff_multiplier: growth per attempt (≥ 1).
        retry_jitter_factor: each delay is scaled by a random factor in [1-j, 1+j].
        retry_retriable: extra exception class names (simple or dotted) to retry.
        log_enable: log each error's context (stage, source coordinates, class).
        log_include_messages: include the record's key/value in those logs.
        log_include_configs: include the (redacted) config in those logs.
        dlq_table_name: the quarantine table (``catalog.schema.table`` or a path).
        dlq_context_stacktrace_enable: keep stack traces in the quarantine table.
        handlers: per error kind, ``continue`` | ``fail`` | ``log_and_continue`` or
            a dotted path to a custom handler (``errors.handler.<kind>``).
    """

    dlq_table_name: str
    tolerance: Tolerance = Tolerance.NONE
    tolerance_limit: int = -1
    tolerance_rate_limit: int = -1
    tolerance_rate_duration: RateDuration = RateDuration.MINUTE
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60_000
    retry_initial_backoff_ms: int = 300
    retry_backoff_multiplier: float = 2.0
    retry_jitter_factor: float = 0.2
    retry_retriable: tuple[str, ...] = ()
    log_enable: bool = False
    log_include_messages: bool = False
    log_include_configs: bool = False
    dlq_context_stacktrace_enable: bool = False
    handlers: Mapping[str, str] = field(default_factory=lambda: _frozen({}))

    def __post_init__(self) -> None:
        if self.retry_initial_backoff_ms > self.retry_delay_max_ms:
            raise ConfigError(
                "errors.retry.initial.backoff.ms",
                self.retry_initial_backoff_ms,
                f"≤ errors.retry.delay.max.ms ({self.retry_delay_max_ms})",
            )

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ErrorsConfig:
        """Build from flat ``errors.*`` keys (without the ``errors.`` prefix)."""
        kinds = ("deserialize", "transform", "validate", "expectation", "sink")
        known = set(_ERRORS_KEYS) | {f"handler.{k}" for k in kinds}
        _check_keys("errors", raw, known)
        kw: dict[str, Any] = {}
        for k, v in raw.items():
            if k.startswith("handler."):
                continue
            attr, parse = _ERRORS_KEYS[k]
            kw[attr] = parse(f"errors.{k}", v)
        handlers = {
            k.split(".", 1)[1]: _str(f"errors.{k}", v) for k, v in raw.items() if k.startswith("handler.")
        }
        for kind, name in handlers.items():
            if name not in ("continue", "fail", "log_and_continue") and "." not in name:
                raise ConfigError(
                    f"errors.handler.{kind}", name,
                    "continue | fail | log_and_continue | a dotted path module.Class",
                )
        kw["handlers"] = _frozen(handlers)
        if "retry_initial_backoff_ms" not in kw and "retry_delay_max_ms" in kw:
            # Kafka accepts any errors.retry.delay.max.ms; the 300 ms first delay is capped by it
            kw["retry_initial_backoff_ms"] = min(cls.retry_initial_backoff_ms, kw["retry_delay_max_ms"])
        if "dlq_table_name" not in kw:
            raise ConfigError(
                "errors.deadletterqueue.table.name", None, "the quarantine table: a path or catalog.schema.table"
            )
        return cls(**kw)


def _retriable(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(key, value, "a list of exception class names")
    for v in value:
        if not _CLASS_NAME.match(v):
            raise ConfigError(key, v, "an exception class name, simple or dotted (pkg.module.Class)")
    return tuple(value)


_CLASS_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


_ERRORS_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "tolerance": ("tolerance", lambda k, v: _enum(k, v, Tolerance)),
    "tolerance.limit": ("tolerance_limit", lambda k, v: _int(k, v, minimum=0, allow_minus_one=True)),
    "tolerance.rate.limit": ("tolerance_rate_limit", lambda k, v: _int(k, v, minimum=0, allow_minus_one=True)),
    "tolerance.rate.duration": ("tolerance_rate_duration", lambda k, v: _enum(k, v, RateDuration)),
    "retry.timeout": ("retry_timeout_ms", lambda k, v: _int(k, v, minimum=0, allow_minus_one=True)),
    "retry.delay.max.ms": ("retry_delay_max_ms", lambda k, v: _int(k, v, minimum=0)),
    "retry.initial.backoff.ms": ("retry_initial_backoff_ms", lambda k, v: _int(k, v, minimum=0)),
    "retry.backoff.multiplier": ("retry_backoff_multiplier", lambda k, v: _float(k, v, lo=1.0)),
    "retry.jitter.factor": ("retry_jitter_factor", lambda k, v: _float(k, v, lo=0.0, hi=1.0)),
    "retry.retriable.exceptions": ("retry_retriable", _retriable),
    "log.enable": ("log_enable", _bool),
    "log.include.messages": ("log_include_messages", _bool),
    "log.include.configs": ("log_include_configs", _bool),
    "deadletterqueue.table.name": ("dlq_table_name", _str),
    "deadletterqueue.context.stacktrace.enable": ("dlq_context_stacktrace_enable", _bool),
}


# --------------------------------------------------------------------------- source / target


@dataclass(frozen=True)
class SourceConfig:
    """Where records come from.

    Attributes:
        format: ``kafka``, or a Kafka-shaped ``delta`` / ``parquet`` table.
        path: a table path (delta/parquet) — or use ``table`` for a catalog name.
        table: a catalog table name (delta).
        streaming: read with ``readStream`` (always true for kafka).
        bootstrap_servers: Kafka ``bootstrap.servers``.
        topics: Kafka topics to subscribe to.
        topic_pattern: a Java regex of topics to subscribe to (instead of ``topics``).
        starting_offsets: ``earliest`` | ``latest`` | Spark's JSON form.
        include_headers: read Kafka headers (default true; the quarantine keeps them).
        max_offsets_per_trigger: cap on records per micro-batch.
        options: extra reader options, passed through verbatim (e.g. ``kafka.security.protocol``).
    """

    format: SourceFormat
    path: str | None = None
    table: str | None = None
    streaming: bool = False
    bootstrap_servers: str | None = None
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    include_headers: bool = True
    max_offsets_per_trigger: int | None = None
    options: Mapping[str, str] = field(default_factory=lambda: _frozen({}))

    @property
    def location(self) -> str:
        """A human name for the source (path, table, or topics)."""
        if self.format is SourceFormat.KAFKA:
            return ",".join(self.topics) if self.topics else f"pattern {self.topic_pattern}"
        return self.path or self.table or "?"

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SourceConfig:
        _check_keys(
            "source", raw,
            {"format", "path", "table", "streaming", "bootstrap.servers", "topics", "topic.pattern",
             "starting.offsets", "include.headers", "max.offsets.per.trigger", "options"},
        )
        fmt = _enum("source.format", raw.get("format", "delta"), SourceFormat)
        topics_raw = raw.get("topics", ())
        if isinstance(topics_raw, str):
            topics_raw = [t.strip() for t in topics_raw.split(",") if t.strip()]
        if not isinstance(topics_raw, list | tuple) or not all(isinstance(t, str) for t in topics_raw):
            raise ConfigError("source.topics", topics_raw, "a list of topic names")
        options = {str(k): str(v) for k, v in _mapping("source.options", raw.get("options")).items()}
        mopt = raw.get("max.offsets.per.trigger")
        src = cls(
            format=fmt,
            path=_str("source.path", raw["path"]) if raw.get("path") is not None else None,
            table=_str("source.table", raw["table"]) if raw.get("table") is not None else None,
            streaming=True if fmt is SourceFormat.KAFKA else _bool("source.streaming", raw.get("streaming", False)),
            bootstrap_servers=(
                _str("source.bootstrap.servers", raw["bootstrap.servers"]) if raw.get("bootstrap.servers") else None
            ),
            topics=tuple(topics_raw),
            topic_pattern=_str("source.topic.pattern", raw["topic.pattern"]) if raw.get("topic.pattern") else None,
            starting_offsets=_str("source.starting.offsets", raw.get("starting.offsets", "earliest")),
            include_headers=_bool("source.include.headers", raw.get("include.headers", True)),
            max_offsets_per_trigger=(
                _int("source.max.offsets.per.trigger", mopt, minimum=1) if mopt is not None else None
            ),
            options=_frozen(options),
        )
        if fmt is SourceFormat.KAFKA:
            if not src.bootstrap_servers:
                raise ConfigError("source.bootstrap.servers", None, "host:port[,host:port] for a kafka source")
            if bool(src.topics) == bool(src.topic_pattern):
                raise ConfigError(
                    "source.topics", list(src.topics) or None, "exactly one of source.topics and source.topic.pattern"
                )
        elif not (src.path or src.table) or (src.path and src.table):
            raise ConfigError(
                "source.path", src.path, f"exactly one of source.path and source.table for a {fmt} source"
            )
        elif fmt is SourceFormat.PARQUET and src.table:
            raise ConfigError("source.table", src.table, "source.path for a parquet source")
        return src


@dataclass(frozen=True)
class TargetConfig:
    """Where good rows go: a Delta table, appended exactly once per batch.

    Attributes:
        table: path or catalog name of the target Delta table.
        checkpoint: the streaming checkpoint location (required when streaming).
        source_columns: keep the source coordinates as ``_source_topic``,
            ``_source_partition``, ``_source_offset``, ``_source_timestamp`` (default true;
            the batch runner's idempotent MERGE needs them).
    """

    table: str
    checkpoint: str | None = None
    source_columns: bool = True

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TargetConfig:
        _check_keys("target", raw, {"table", "checkpoint", "source_columns"})
        if "table" not in raw:
            raise ConfigError("target.table", None, "the target Delta table: a path or catalog.schema.table")
        return cls(
            table=_str("target.table", raw["table"]),
            checkpoint=_str("target.checkpoint", raw["checkpoint"]) if raw.get("checkpoint") else None,
            source_columns=_bool("target.source_columns", raw.get("source_columns", True)),
        )


@dataclass(frozen=True)
class TriggerConfig:
    """Streaming trigger: ``available_now`` (jobs) or ``processing_time`` with an interval."""

    kind: TriggerKind = TriggerKind.AVAILABLE_NOW
    interval: str = "10 seconds"

    @classmethod
    def from_value(cls, raw: Any) -> TriggerConfig:
        if raw is None or raw == "available_now":
            return cls()
        m = _mapping("trigger", raw)
        _check_keys("trigger", m, {"available_now", "processing_time"})
        if "processing_time" in m:
            interval = _str("trigger.processing_time", m["processing_time"])
            if not re.fullmatch(r"\d+\s*(milliseconds?|seconds?|minutes?|hours?)", interval):
                raise ConfigError("trigger.processing_time", interval, "an interval like '10 seconds'")
            return cls(TriggerKind.PROCESSING_TIME, interval)
        return cls()


@dataclass(frozen=True)
class MetricsConfig:
    """The Delta metrics table (one row per batch per metric)."""

    table: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MetricsConfig:
        _check_keys("metrics", raw, {"table"})
        return cls(table=_str("metrics.table", raw["table"]) if raw.get("table") else None)


@dataclass(frozen=True)
class MlflowConfig:
    """MLflow tracking. Disabled means a no-op tracker, never dropped records.

    Attributes:
        enabled: log runs to MLflow.
        tracking_uri: ``sqlite:///mlflow.db`` locally; ``databricks`` on Databricks;
            None means MLflow's own default / environment.
        experiment: experiment name (a workspace path on Databricks).
        http_timeout_s: MLflow HTTP request timeout (bounded delay on outages).
        http_max_retries: MLflow HTTP retries per request.
        buffer_max: metric points buffered while the server is down before dropping.
        sample_messages: quarantined messages sampled into a run artifact.
    """

    enabled: bool = False
    tracking_uri: str | None = None
    experiment: str = "quarantine"
    http_timeout_s: int = 5
    http_max_retries: int = 0
    buffer_max: int = 10_000
    sample_messages: int = 20

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> MlflowConfig:
        _check_keys(
            "mlflow", raw,
            {"enabled", "tracking_uri", "experiment", "http_timeout_s", "http_max_retries",
             "buffer_max", "sample_messages"},
        )
        return cls(
            enabled=_bool("mlflow.enabled", raw.get("enabled", False)),
            tracking_uri=_str("mlflow.tracking_uri", raw["tracking_uri"]) if raw.get("tracking_uri") else None,
            experiment=_str("mlflow.experiment", raw.get("experiment", "quarantine")),
            http_timeout_s=_int("mlflow.http_timeout_s", raw.get("http_timeout_s", 5), minimum=1),
            http_max_retries=_int("mlflow.http_max_retries", raw.get("http_max_retries", 0), minimum=0),
            buffer_max=_int("mlflow.buffer_max", raw.get("buffer_max", 10_000), minimum=0),
            sample_messages=_int("mlflow.sample_messages", raw.get("sample_messages", 20), minimum=0),
        )


@dataclass(frozen=True)
class StageSpec:
    """One stage as declared in YAML: a built-in ``type`` with options, or ``python``.

    Attributes:
        name: the stage's name; also the name of its result column.
        type: a built-in stage type (see :mod:`quarantine.stages`).
        input: what the stage reads: a source column, or an earlier stage's name
            (its result); default: the previous stage, or ``value`` for the first.
        options: the type's options, validated when the stage is built.
        index: position in ``stages`` (for error messages: ``stages[2].options.schema``).
    """

    name: str
    type: str
    input: str | None
    options: Mapping[str, Any]
    index: int

    def key(self, option: str | None = None) -> str:
        """The config path of this stage or one of its options, for error messages."""
        base = f"stages[{self.index}]"
        return f"{base}.{option}" if option else base


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _stages(raw: Any) -> tuple[StageSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError("stages", raw, "a non-empty list of stages")
    specs: list[StageSpec] = []
    seen: set[str] = set()
    for i, s in enumerate(raw):
        m = _mapping(f"stages[{i}]", s)
        _check_keys(f"stages[{i}]", m, {"name", "type", "input", "options"})
        name = _str(f"stages[{i}].name", m.get("name"))
        if not _NAME.match(name):
            raise ConfigError(f"stages[{i}].name", name, "an identifier (letters, digits, _)")
        if name in seen:
            raise ConfigError(f"stages[{i}].name", name, "a name not used by another stage")
        seen.add(name)
        specs.append(
            StageSpec(
                name=name,
                type=_str(f"stages[{i}].type", m.get("type")),
                input=_str(f"stages[{i}].input", m["input"]) if m.get("input") else None,
                options=_frozen(_mapping(f"stages[{i}].options", m.get("options"))),
                index=i,
            )
        )
    return tuple(specs)


# --------------------------------------------------------------------------- the pipeline


@dataclass(frozen=True)
class PipelineConfig:
    """A whole pipeline: source → stages → target + quarantine, and how errors behave.

    Build with :func:`load_config` / :func:`parse_config`; the object is frozen
    and already validated. ``raw`` keeps the YAML as loaded, for
    :meth:`redacted` (MLflow params, logs).
    """

    pipeline: str
    source: SourceConfig
    target: TargetConfig
    stages: tuple[StageSpec, ...]
    errors: ErrorsConfig
    trigger: TriggerConfig = field(default_factory=TriggerConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    spark_conf: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    raw: Mapping[str, Any] = field(default_factory=lambda: _frozen({}), compare=False, repr=False)
    base_dir: str = "."

    def __post_init__(self) -> None:
        self._check_tables_differ()
        if self.source.streaming and not self.target.checkpoint:
            raise ConfigError("target.checkpoint", None, "a checkpoint location for a streaming source")
        if not self.source.streaming and not self.target.source_columns:
            raise ConfigError(
                "target.source_columns", False,
                "true for a batch source (re-runs de-duplicate the target on the source coordinates)",
            )

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


def _norm(name: str | None) -> str:
    return (name or "").rstrip("/").lower()


_TOP_KEYS = {"pipeline", "source", "target", "stages", "errors", "trigger", "metrics", "mlflow", "spark"}


def parse_config(raw: Mapping[str, Any], *, base_dir: str | Path = ".") -> PipelineConfig:
    """Validate a config mapping (as loaded from YAML) into a :class:`PipelineConfig`.

    Raises:
        ConfigError: naming the first bad key, its value and what is allowed.
    """
    raw = dict(_mapping("", raw))
    errors_raw: dict[str, Any] = {}
    for k in list(raw):
        if isinstance(k, str) and k.startswith("errors."):
            errors_raw[k[len("errors."):]] = raw.pop(k)
    errors_raw.update(_mapping("errors", raw.get("errors")))
    _check_keys("", raw, _TOP_KEYS)
    for req in ("pipeline", "source", "target", "stages"):
        if req not in raw:
            raise ConfigError(req, None, "a value (required key)")
    pipeline = _str("pipeline", raw["pipeline"])
    if not _NAME.match(pipeline.replace("-", "_")):
        raise ConfigError("pipeline", pipeline, "a name of letters, digits, _ and -")
    spark_raw = _mapping("spark", raw.get("spark"))
    _check_keys("spark", spark_raw, {"conf"})
    spark_conf = {str(k): str(v) for k, v in _mapping("spark.conf", spark_raw.get("conf")).items()}
    full = dict(raw)
    full["errors"] = errors_raw
    _absolute_paths(raw, errors_raw)
    return PipelineConfig(
        pipeline=pipeline,
        source=SourceConfig.from_mapping(_mapping("source", raw["source"])),
        target=TargetConfig.from_mapping(_mapping("target", raw["target"])),
        stages=_stages(raw["stages"]),
        errors=ErrorsConfig.from_mapping(errors_raw),
        trigger=TriggerConfig.from_value(raw.get("trigger")),
        metrics=MetricsConfig.from_mapping(_mapping("metrics", raw.get("metrics"))),
        mlflow=MlflowConfig.from_mapping(_mapping("mlflow", raw.get("mlflow"))),
        spark_conf=_frozen(spark_conf),
        raw=_frozen(full),
        base_dir=str(base_dir),
    )


def _looks_like_relative_path(value: Any) -> bool:
    return (
        isinstance(value, str) and "/" in value and "://" not in value
        and not value.startswith(("/", "~", "dbfs:", "s3:", "abfss:", "gs:"))
    )


def _absolute_paths(raw: dict[str, Any], errors_raw: dict[str, Any]) -> None:
    """Resolve relative table/checkpoint paths against the working directory, in place.

    Delta treats only absolute paths as path identifiers (``delta.`/x/y```), and a
    streaming checkpoint must not move when the working directory does.
    """
    for section, key in (("source", "path"), ("target", "table"), ("target", "checkpoint"), ("metrics", "table")):
        node = raw.get(section)
        if isinstance(node, Mapping) and _looks_like_relative_path(node.get(key)):
            node = dict(node)
            node[key] = os.path.abspath(node[key])
            raw[section] = node
    dlq = "deadletterqueue.table.name"
    if _looks_like_relative_path(errors_raw.get(dlq)):
        errors_raw[dlq] = os.path.abspath(errors_raw[dlq])


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Load and validate a YAML pipeline config.

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
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError("--conf", str(path), f"valid YAML ({exc})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError("--conf", str(path), "a YAML mapping at the top level")
    raw = dict(raw)
    for dotted, value in (overrides or {}).items():
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
