"""The ``alerts:`` section: the channels a pipeline tells, on which events, and how often.

The listener that sends the messages (:mod:`quarantine.alerts.listener`) reads it.
A webhook URL and an SMTP password are secrets: written as ``${env:NAME}`` or
``{{secrets/<scope>/<key>}}`` (:mod:`quarantine.secret_refs`), redacted wherever the config
is shown (their keys, ``webhook`` and ``password``, are secret-looking keys:
:func:`quarantine.redaction.is_secret_key`).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationInfo, model_validator

from quarantine.errors import ConfigError
from quarantine.secret_refs import REFERENCE
from quarantine.values.section import Section
from quarantine.values.types import (
    OPTIONAL_TEXT,
    Check,
    choice,
    fail,
    integer,
    number,
    text,
)

__all__ = [
    "AlertEvent",
    "AlertsConfig",
    "ChannelConfig",
    "ChannelKind",
    "SmtpTls",
    "interval_seconds",
    "is_loopback",
]


class AlertEvent(StrEnum):
    """What a channel is told of (a channel's ``events:``)."""

    BREACH = "breach"
    """A tolerance limit or an aggregate expectation breached (``warn`` and ``fail`` alike)."""
    RUN_FAILED = "run_failed"
    """The run failed (the one-line reason the command line prints)."""
    STUCK = "stuck"
    """Records open longer than ``stuck_hours`` or failed more than ``stuck_failures`` times."""
    ERROR_RATE = "error_rate"
    """A topic's quarantined share of a batch over ``error_rate_percent``."""


class ChannelKind(StrEnum):
    """The shape of what a channel is sent."""

    WEBHOOK = "webhook"
    """A JSON document (:func:`quarantine.alerts.messages.webhook_body`) POSTed to ``webhook``."""
    SLACK = "slack"
    """A Slack incoming webhook's ``{"text": …}`` (mrkdwn)."""
    TEAMS = "teams"
    """A Microsoft Teams workflow's ("When a Teams webhook request is received") Adaptive Card message."""
    EMAIL = "email"
    """A plain-text email over SMTP."""


class SmtpTls(StrEnum):
    """How an email channel's SMTP connection is secured."""

    STARTTLS = "starttls"
    """Plain TCP, then STARTTLS before anything else (port 587)."""
    SSL = "ssl"
    """TLS from the first byte (SMTPS, port 465)."""
    NONE = "none"
    """No TLS: only to a loopback host when a password is set (a relay on the same machine)."""

    @property
    def default_port(self) -> int:
        return {"starttls": 587, "ssl": 465, "none": 25}[self.value]


_INTERVAL = re.compile(r"(\d+)\s*(seconds?|minutes?|hours?|days?)")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def interval_seconds(value: str) -> int:
    """``"15 minutes"`` → 900 (seconds, minutes, hours or days; singular or plural).

    Raises:
        ValueError: ``value`` is not such an interval.
    """
    m = _INTERVAL.fullmatch(value.strip().lower())
    if m is None:
        raise ValueError(f"not an interval: {value!r}")
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2).rstrip("s")]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_WEBHOOK_ALLOWED = (
    "an https:// URL (http:// only to a loopback host), or a reference to one: ${env:NAME} or "
    "{{secrets/<scope>/<key>}}"
)


def _webhook(value: Any) -> str | None:
    """A webhook URL or a secret reference; the message never shows the value (it is a secret)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail(_WEBHOOK_ALLOWED)
    url = value.strip()
    if REFERENCE.fullmatch(url):
        return url
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise fail(_WEBHOOK_ALLOWED) from None
    host = parts.hostname or ""
    if not host or not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host))):
        raise fail(_WEBHOOK_ALLOWED)
    return url


WEBHOOK = Check(_webhook, {"type": ["string", "null"]})


def _addresses(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and "@" in v.strip() for v in value):
        raise fail("a list of email addresses (name@domain)")
    return tuple(v.strip() for v in value)


ADDRESSES = Check(
    _addresses,
    {"anyOf": [{"type": "array", "items": {"type": "string", "pattern": "@"}}, {"type": "string"}]},
    to_plain=list,
)


def _address(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "@" not in value:
        raise fail("an email address (name@domain)")
    return value.strip()


ADDRESS = Check(_address, {"type": ["string", "null"], "pattern": "@"})


def _events(value: Any) -> tuple[AlertEvent, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    allowed = " | ".join(AlertEvent)
    if not isinstance(value, list | tuple) or not value:
        raise fail(f"a non-empty list of events: {allowed}")
    out: list[AlertEvent] = []
    for v in value:
        try:
            out.append(AlertEvent(str(v).strip().lower()))
        except ValueError:
            raise fail(f"events from {allowed}", value=v) from None
    return tuple(dict.fromkeys(out))


EVENTS = Check(
    _events,
    {"anyOf": [{"type": "array", "minItems": 1, "items": {"enum": [e.value for e in AlertEvent]}},
               {"type": "string"}]},
    to_plain=lambda events: [e.value for e in events],
)


class ChannelConfig(Section):
    """One channel: where messages go (a webhook, Slack, Teams or email) and which events it hears."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"name": "oncall", "type": "slack", "webhook": "{{secrets/alerts/slack-webhook}}",
         "events": ["breach", "run_failed", "stuck", "error_rate"]},
        {"name": "data-team", "type": "email", "host": "smtp.example.com", "user": "alerts@example.com",
         "password": "${env:SMTP_PASSWORD}", "from": "alerts@example.com", "to": ["data-team@example.com"]},
    ]})
    _key = "alerts.channels"

    name: Annotated[str, text("a name of letters, digits, _ and -", pattern=r"[A-Za-z0-9_\-]+")] = Field(
        examples=["oncall"]
    )
    """The channel's name, as the run's summary and log lines call it (never by its URL)."""
    type: Annotated[ChannelKind, choice(ChannelKind)] = Field(examples=["slack"])
    """webhook (a JSON document), slack, teams (a Teams workflow's webhook) or email (SMTP)."""
    events: Annotated[tuple[AlertEvent, ...], EVENTS] = Field(
        default=tuple(AlertEvent), examples=[["breach", "run_failed"]],
        json_schema_extra={"default": [e.value for e in AlertEvent]},
    )
    """The events this channel is told of: breach, run_failed, stuck, error_rate (default: all). (Not ``on:``,
    which YAML reads as the boolean true.)"""
    webhook: Annotated[str | None, WEBHOOK] = Field(
        default=None, examples=["{{secrets/alerts/slack-webhook}}"], repr=False
    )
    """webhook, slack, teams: the URL to POST to (a secret: ${env:NAME} or {{secrets/<scope>/<key>}});
    https, or http to a loopback host."""
    host: Annotated[str | None, OPTIONAL_TEXT] = Field(default=None, examples=["smtp.example.com"])
    """email: the SMTP server."""
    port: Annotated[int | None, integer(1, optional=True)] = Field(default=None, examples=[587])
    """email: the SMTP port (default by tls: 587 starttls, 465 ssl, 25 none)."""
    tls: Annotated[SmtpTls, choice(SmtpTls)] = SmtpTls.STARTTLS
    """email: starttls (default), ssl, or none (a password then only to a loopback host)."""
    user: Annotated[str | None, OPTIONAL_TEXT] = Field(default=None, examples=["alerts@example.com"])
    """email: the SMTP login, if the server asks for one."""
    password: Annotated[str | None, OPTIONAL_TEXT] = Field(default=None, examples=["${env:SMTP_PASSWORD}"], repr=False)
    """email: the SMTP password (a secret: ${env:NAME} or {{secrets/<scope>/<key>}})."""
    sender: Annotated[str | None, ADDRESS] = Field(default=None, alias="from", examples=["alerts@example.com"])
    """email: the From address."""
    to: Annotated[tuple[str, ...], ADDRESSES] = Field(default=(), examples=[["data-team@example.com"]])
    """email: the recipients."""

    @property
    def smtp_port(self) -> int:
        """The SMTP port: ``port``, or the TLS mode's default."""
        return self.port or self.tls.default_port

    def problem(self) -> tuple[str, object, str] | None:
        """The first field that does not fit the channel's type: ``(key, value, allowed)``, or None."""
        http = self.type is not ChannelKind.EMAIL
        if http:
            if self.webhook is None:
                return "webhook", None, f"the URL a {self.type} channel POSTs to"
            for key in ("host", "port", "user", "password", "sender", "to"):
                if getattr(self, key) not in (None, ()):
                    shown = "from" if key == "sender" else key
                    return shown, getattr(self, key), f"no {shown}: it is an email channel's key, not a {self.type}'s"
            return None
        if self.webhook is not None:
            return "webhook", self.webhook, "no webhook (an email channel is sent over SMTP with host, port and tls)"
        if self.host is None:
            return "host", None, "the SMTP server of an email channel"
        if self.sender is None:
            return "from", None, "the From address of an email channel"
        if not self.to:
            return "to", None, "the recipients of an email channel"
        if (self.user is None) != (self.password is None):
            return "password", None, "both user and password, or neither"
        if self.password is not None and self.tls is SmtpTls.NONE and not is_loopback(self.host):
            return "tls", self.tls.value, "starttls or ssl: a password is never sent in clear but to a loopback host"
        return None


def _channels(value: Any, info: ValidationInfo) -> tuple[ChannelConfig, ...]:
    """``channels:`` as written → ChannelConfigs; an error names the channel by its index."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise fail("a list of channels")
    out: list[ChannelConfig] = []
    for i, item in enumerate(value):
        if isinstance(item, ChannelConfig):
            out.append(item)
            continue
        try:
            out.append(ChannelConfig.model_validate(item, context=info.context))
        except ConfigError as exc:
            where = exc.key.replace(ChannelConfig._key, f"{ChannelConfig._key}[{i}]", 1)
            raise ConfigError(where, exc.value, exc.allowed) from None
    return tuple(out)


CHANNELS = Check(_channels, {}, takes_info=True, input_type=list[ChannelConfig])


class AlertsConfig(Section):
    """Alerts: the channels told of a breach, a failed run, stuck records or a topic's error rate."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "channels": [{"name": "oncall", "type": "slack", "webhook": "{{secrets/alerts/slack-webhook}}"}],
        "rate_limit": "1 hour",
        "stuck_hours": 24,
        "stuck_failures": 3,
        "error_rate_percent": 5,
    }]})
    _key = "alerts"

    channels: Annotated[tuple[ChannelConfig, ...], CHANNELS] = Field(default=(), examples=[[
        {"name": "oncall", "type": "slack", "webhook": "{{secrets/alerts/slack-webhook}}"},
    ]])
    """Where messages go: each a webhook, slack, teams or email channel and the events it hears (none: no alerts)."""
    rate_limit: Annotated[str, text("an interval like '1 hour' or '15 minutes'", pattern=_INTERVAL.pattern)] = Field(
        default="1 hour", examples=["15 minutes"]
    )
    """At most one message per event and channel in this window (a stream breaching every micro-batch sends
    one); later ones are counted in the next message and in the run's summary."""
    timeout_s: Annotated[float, number(0.1, 300)] = Field(default=10.0, examples=[5])
    """The seconds a message may take to deliver, retries included (errors.retry.*'s backoff); then it is
    given up, said in the run's summary and the metrics table (alerts-undelivered). The run goes on."""
    stuck_hours: Annotated[int, integer(1)] = Field(default=24, examples=[48])
    """stuck: records open at least this many hours (the stuck_records query's hours)."""
    stuck_failures: Annotated[int, integer(1)] = Field(default=3, examples=[2])
    """stuck: or failed more than this many times (the stuck_records query's failures)."""
    error_rate_percent: Annotated[float, number(0, 100)] = Field(default=5.0, examples=[1])
    """error_rate: a topic whose quarantined records are more than this share of a batch's records."""
    error_rate_min_records: Annotated[int, integer(1)] = Field(default=100, examples=[1000])
    """error_rate: a topic with fewer records in the batch is not judged (3 of 5 is not a rate)."""

    @property
    def rate_limit_s(self) -> int:
        """:attr:`rate_limit` in seconds."""
        return interval_seconds(self.rate_limit)

    @model_validator(mode="after")
    def _channels_fit(self) -> AlertsConfig:
        seen: set[str] = set()
        for i, channel in enumerate(self.channels):
            where = f"alerts.channels[{i}]"
            if channel.name in seen:
                raise ConfigError(f"{where}.name", channel.name, "a name not used by another channel")
            seen.add(channel.name)
            problem = channel.problem()
            if problem is not None:
                key, value, allowed = problem
                raise ConfigError(f"{where}.{key}", value, allowed)
        return self
