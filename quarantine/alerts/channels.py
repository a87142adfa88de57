"""Alert channels: one attempt to deliver one message, over HTTP or SMTP (the I/O edge).

A :class:`Channel` sends an :class:`~quarantine.alerts.events.Alert` once, within a timeout,
and raises when it could not; the listener (:mod:`quarantine.alerts.listener`) retries
with the write retry policy's backoff under the channel's budget and decides what is
retried (:func:`retriable`). A channel holds its secrets (a resolved webhook URL, an SMTP
password) and never shows them: :meth:`Channel.describe` names it by its config name.

Channels are built from the config by :func:`build_channels`, which resolves each
secret reference (:mod:`quarantine.secret_refs`) once, before the run reads a record.
"""

from __future__ import annotations

import http.client
import smtplib
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from quarantine.alerts.events import Alert
from quarantine.alerts.messages import email_message, json_bytes, slack_body, teams_body, webhook_body
from quarantine.config.alerts import AlertEvent, AlertsConfig, ChannelConfig, ChannelKind, SmtpTls
from quarantine.secret_refs import SecretScopes, resolve

__all__ = [
    "Channel",
    "DeliveryError",
    "EmailChannel",
    "HttpChannel",
    "build_channels",
    "retriable",
]

#: What the HTTP channels send as their User-Agent (some webhook hosts refuse urllib's default).
USER_AGENT = "spark-quarantine-alerts"


class DeliveryError(Exception):
    """A channel's endpoint answered, but not with success.

    Attributes:
        said: what it answered, in a few words (``HTTP 500``, ``SMTP 535``), never a URL or a password.
        status: the HTTP status or SMTP code (0: none).
        retriable: whether another attempt may succeed.
    """

    def __init__(self, channel: str, said: str, *, status: int = 0, retriable: bool = True) -> None:
        self.said = said
        self.status = status
        self.retriable = retriable
        super().__init__(f"{channel} answered {said}")


class Channel(Protocol):
    """Where messages go: one attempt at a time."""

    @property
    def name(self) -> str:
        """The channel's config name."""

    @property
    def events(self) -> frozenset[AlertEvent]:
        """The events it hears."""

    def send(self, alert: Alert, timeout_s: float) -> None:
        """Deliver ``alert`` once, within ``timeout_s`` seconds.

        Raises:
            DeliveryError: the endpoint answered with a failure.
            OSError: it could not be reached (refused, timed out, a TLS failure…).
        """

    def describe(self) -> str:
        """``slack channel oncall``: how the summary names it (never a URL or a password)."""


def retriable(exc: BaseException) -> bool:
    """Whether a failed delivery is worth another attempt: a connection that failed or timed
    out, an HTTP 408, 429 or 5xx, an SMTP 4xx; not an HTTP 4xx (a wrong URL, a refused
    payload) nor an SMTP 5xx (a refused login or recipient): another attempt fails the same."""
    if isinstance(exc, DeliveryError):
        return exc.retriable
    return isinstance(exc, OSError | http.client.HTTPException)


@dataclass(frozen=True)
class HttpChannel:
    """A webhook, Slack or Teams channel: POSTs the alert as JSON to its URL.

    Attributes:
        name: the channel's config name.
        kind: webhook, slack or teams: the body's shape.
        url: the URL (resolved; a secret).
        events: the events it hears.
        secrets: every secret of the run, redacted from the bodies it sends.
    """

    name: str
    kind: ChannelKind
    url: str = field(repr=False)
    events: frozenset[AlertEvent] = frozenset(AlertEvent)
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def body(self, alert: Alert) -> bytes:
        """The bytes POSTed for ``alert``."""
        shape = {ChannelKind.SLACK: slack_body, ChannelKind.TEAMS: teams_body}.get(self.kind, webhook_body)
        return json_bytes(shape(alert, self.secrets))

    def send(self, alert: Alert, timeout_s: float) -> None:
        request = urllib.request.Request(
            self.url, data=self.body(alert), method="POST",
            headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT},
        )
        try:
            with _NO_REDIRECTS.open(request, timeout=max(timeout_s, 0.05)) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            code = exc.code
            exc.close()
            raise DeliveryError(
                self.describe(), f"HTTP {code}", status=code, retriable=code in (408, 429) or code >= 500
            ) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            raise (reason if isinstance(reason, OSError) else OSError(str(reason))) from None

    def describe(self) -> str:
        return f"{self.kind.value} channel {self.name}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is refused: the body (and a URL's token) would go elsewhere."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_NoRedirect())


@dataclass(frozen=True)
class EmailChannel:
    """An email channel: sends a plain-text message over SMTP.

    Attributes:
        name: the channel's config name.
        host, port: the SMTP server.
        tls: starttls, ssl or none.
        sender: the From address.
        to: the recipients.
        user, password: the login, if any (the password resolved; a secret).
        events: the events it hears.
        secrets: every secret of the run, redacted from the messages it sends.
    """

    name: str
    host: str
    port: int
    tls: SmtpTls
    sender: str
    to: tuple[str, ...]
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    events: frozenset[AlertEvent] = frozenset(AlertEvent)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def send(self, alert: Alert, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        context = self.context or ssl.create_default_context()

        def left() -> float:  # every step of the conversation within what is left of the attempt
            return max(deadline - time.monotonic(), 0.05)

        smtp: smtplib.SMTP
        if self.tls is SmtpTls.SSL:
            smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=left(), context=context)
        else:
            smtp = smtplib.SMTP(self.host, self.port, timeout=left())
        try:
            if self.tls is SmtpTls.STARTTLS:
                _within(smtp, left())
                smtp.starttls(context=context)
            if self.user is not None and self.password is not None:
                _within(smtp, left())
                smtp.login(self.user, self.password)
            _within(smtp, left())
            smtp.send_message(email_message(alert, self.sender, self.to, self.secrets))
        except smtplib.SMTPResponseException as exc:
            code = exc.smtp_code
            raise DeliveryError(self.describe(), f"SMTP {code}", status=code, retriable=400 <= code < 500) from None
        except smtplib.SMTPRecipientsRefused:
            raise DeliveryError(self.describe(), "a refusal of every recipient", retriable=False) from None
        except smtplib.SMTPException as exc:
            raise OSError(f"{self.describe()}: SMTP {type(exc).__name__}") from None
        finally:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()

    def describe(self) -> str:
        return f"email channel {self.name}"


def _within(smtp: smtplib.SMTP, seconds: float) -> None:
    """The SMTP connection's next reads and writes wait at most ``seconds``."""
    if smtp.sock is not None:
        smtp.sock.settimeout(seconds)


def _secret(value: str | None, key: str, scopes: SecretScopes | None) -> str | None:
    return None if value is None else resolve(value, key=key, scopes=scopes)


def build_channels(
    settings: AlertsConfig, secrets: Sequence[str], scopes: SecretScopes | None = None
) -> tuple[list[Channel], tuple[str, ...]]:
    """The channels of ``settings``, their secret references resolved.

    Args:
        settings: the ``alerts:`` section.
        secrets: the config's secrets (:meth:`~quarantine.config.PipelineConfig.secrets`).
        scopes: where ``{{secrets/…}}`` references are read (default: the Databricks SDK's).

    Returns:
        The channels, and every secret they hold or know of (the config's and the resolved
        ones), to redact from anything shown.

    Raises:
        ConfigError: a secret reference could not be resolved (before anything is read).
    """
    resolved: list[str] = []
    configs: list[tuple[int, ChannelConfig, str | None, str | None]] = []
    for i, c in enumerate(settings.channels):
        url = _secret(c.webhook, f"alerts.channels[{i}].webhook", scopes)
        password = _secret(c.password, f"alerts.channels[{i}].password", scopes)
        resolved += [v for v in (url, password) if v]
        configs.append((i, c, url, password))
    every = tuple(dict.fromkeys([*secrets, *resolved]))
    channels: list[Channel] = []
    for _, c, url, password in configs:
        events = frozenset(c.events)
        if c.type is ChannelKind.EMAIL:
            assert c.host is not None and c.sender is not None
            channels.append(EmailChannel(
                c.name, c.host, c.smtp_port, c.tls, c.sender, c.to, c.user, password, events, every,
            ))
        else:
            assert url is not None
            channels.append(HttpChannel(c.name, c.type, url, events, every))
    return channels, every

