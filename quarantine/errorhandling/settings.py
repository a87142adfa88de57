"""The error handling's settings: the ``errors.*`` keys (Kafka Connect's names) and their choices.

Below the config (which holds them as its ``errors:`` section) and below the stages (whose
retries they set), so that neither imports the other to read them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from quarantine.columns import ErrorKind
from quarantine.errors import ConfigError
from quarantine.redaction import REDACTED
from quarantine.secret_reference import REFERENCE_FORMS, SecretReference
from quarantine.values.section import YAML_CONTEXT, Section
from quarantine.values.types import (
    BOOL,
    CLASS_NAMES,
    OPTIONAL_TEXT,
    Check,
    choice,
    fail,
    integer,
    number,
    string_map,
    table_ref,
    text,
)

__all__ = [
    "DEFAULT_INITIAL_BACKOFF_MS", "ErrorsConfig", "HandlerResponse", "RateDuration", "ReusedCoordinates", "Tolerance",
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


#: The first delay of a retry, unless ``errors.retry.delay.max.ms`` is smaller (then that).
DEFAULT_INITIAL_BACKOFF_MS = 300
class HandlerResponse(StrEnum):
    """What a handler decides for a kind's errors in one batch."""

    CONTINUE = "continue"
    FAIL = "fail"
    LOG_AND_CONTINUE = "log_and_continue"

    @property
    def continues(self) -> bool:
        return self is not HandlerResponse.FAIL

    @property
    def logs(self) -> bool:
        return self is HandlerResponse.LOG_AND_CONTINUE


#: An encryption key's id: stored beside the bytes it encrypted, and in each encrypted text.
KEY_ID_PATTERN = r"[A-Za-z0-9._-]{1,64}"
_KEY_ID_ALLOWED = "a key id: 1 to 64 letters, digits, '.', '_' or '-'"
_KEY_ID = re.compile(KEY_ID_PATTERN)


def _reference(value: Any) -> str | None:
    """A secret reference as written (``env:NAME`` / ``{{secrets/<scope>/<key>}}``); never echoes a value."""
    if value is None or value == "":
        return None
    try:
        return str(SecretReference.parse(value))
    except ValueError as exc:
        raise fail(f"{exc} (${{env:NAME}} would put the key itself in the config when it loads)",
                   value=REDACTED) from None


_SECRET_REFERENCE = Check(_reference, {"type": ["string", "null"], "description": REFERENCE_FORMS})


def _key_id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str | int) or not _KEY_ID.fullmatch(str(value).strip()):
        raise fail(_KEY_ID_ALLOWED)
    return str(value).strip()


def _old_keys(value: Any) -> Mapping[str, str]:
    """Key id -> secret reference, each checked (a value that is not a reference is never echoed)."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise fail("a mapping of key id to where that key is (" + REFERENCE_FORMS + ")")
    out: dict[str, str] = {}
    for kid, ref in value.items():
        if not _KEY_ID.fullmatch(str(kid)):
            raise fail(_KEY_ID_ALLOWED, value=kid, at=str(kid))
        try:
            out[str(kid)] = str(SecretReference.parse(ref))
        except ValueError as exc:
            raise fail(str(exc), value=REDACTED, at=str(kid)) from None
    return MappingProxyType(out)


_OLD_KEYS = Check(
    _old_keys,
    {"type": ["object", "null"], "propertyNames": {"pattern": f"^{KEY_ID_PATTERN}$"},
     "additionalProperties": {"type": "string"}},
    to_plain=dict,
)

_HANDLER = text(
    f"{' | '.join(HandlerResponse)} | a dotted path module.Class",
    pattern="|".join(HandlerResponse) + r"|.*\..*",
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
    dlq_encryption_key: Annotated[str | None, _SECRET_REFERENCE] = Field(
        None, alias="deadletterqueue.encryption.key", examples=["env:QUARANTINE_KEY"]
    )
    """Keep the quarantine table's record bytes encrypted (key, value, header values, and the
    message, stack trace and history messages that may quote them): where the AES key (16, 24 or 32
    bytes) is, env:NAME or {{secrets/<scope>/<key>}}, read when a command needs it. Unset: kept as read."""
    dlq_encryption_key_id: Annotated[str | None, Check(_key_id, {"type": ["string", "null"]})] = Field(
        None, alias="deadletterqueue.encryption.key.id", examples=["2026-12"]
    )
    """The id of deadletterqueue.encryption.key, stored beside what it encrypts (required with it)."""
    dlq_encryption_old_keys: Annotated[Mapping[str, str], _OLD_KEYS] = Field(
        default_factory=lambda: MappingProxyType({}), alias="deadletterqueue.encryption.old.keys",
        examples=[{"2026-06": "env:QUARANTINE_KEY_2026_06"}],
    )
    """Keys rows were written under before (key id: env:NAME or {{secrets/<scope>/<key>}}): read, never written with."""
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
        named = {k.value: getattr(self, f"handler_{k.value}") for k in ErrorKind}
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

    @model_validator(mode="after")
    def _encryption_named_whole(self) -> ErrorsConfig:
        key, kid = self.dlq_encryption_key, self.dlq_encryption_key_id
        if key is not None and kid is None:
            raise ConfigError("errors.deadletterqueue.encryption.key.id", None,
                              f"{_KEY_ID_ALLOWED} (required with deadletterqueue.encryption.key)")
        if key is None and kid is not None:
            raise ConfigError("errors.deadletterqueue.encryption.key.id", kid,
                              "no value without deadletterqueue.encryption.key (where the key it names is kept)")
        if kid is not None and kid in self.dlq_encryption_old_keys:
            raise ConfigError("errors.deadletterqueue.encryption.old.keys", kid,
                              f"other ids than deadletterqueue.encryption.key.id ({kid}): it is the writing key")
        if key is not None and self.log_include_messages:
            raise ConfigError("errors.log.include.messages", True, "false while deadletterqueue.encryption.key is "
                              "set: it logs record content, which the encryption keeps out of readable files")
        return self

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ErrorsConfig:
        """Build from flat ``errors.*`` keys (without the ``errors.`` prefix)."""
        return cls.model_validate(dict(raw), context=YAML_CONTEXT)
