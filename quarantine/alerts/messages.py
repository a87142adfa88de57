"""An :class:`~quarantine.alerts.events.Alert` as each channel is sent it (pure).

The words are the same everywhere (:func:`lines`): a title, what happened, the run and its
counts, the command to run next. The shapes:

* ``webhook``: a JSON document (:func:`webhook_body`): the fields one by one, and ``text``;
* ``slack``: an incoming webhook's ``{"text": …}`` in Slack's mrkdwn (:func:`slack_body`):
  the title bold, the command as code;
* ``teams``: a Teams workflow's webhook (the "When a Teams webhook request is received"
  trigger) takes a message with an Adaptive Card attachment (:func:`teams_body`);
* ``email``: a plain-text message, the title as its subject (:func:`email_message`).

Every text is redacted with the run's secrets (the config's, and the channels' resolved
webhook URLs and passwords) before it is shaped: an alert never carries one, nor another
channel's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from email.message import EmailMessage
from typing import Any

from quarantine.alerts.events import Alert
from quarantine.redaction import redact_text

__all__ = ["MAX_LINE", "email_message", "json_bytes", "lines", "slack_body", "teams_body", "title", "webhook_body"]

#: The longest line a message carries (a breach's message, a failure's reason), cut with an ellipsis.
MAX_LINE = 1_000


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def title(alert: Alert, secrets: Iterable[str] = ()) -> str:
    """``quarantine orders: breach [warn] expect_column_values_to_match_regex:customer_email``."""
    return _cut(redact_text(f"quarantine {alert.pipeline}: {alert.headline}", tuple(secrets)))


def lines(alert: Alert, secrets: Iterable[str] = ()) -> list[str]:
    """The message's lines after its title: what happened, the run, the counts, what to run next."""
    out = list(alert.details)
    where = f"batch {alert.batch_id}" if alert.batch_id is not None else "run end"
    run = f"{alert.kind.value} {alert.run} ({where}, {_when(alert.at)})"
    out.append(f"{run}: {alert.counts.text()}" if alert.counts is not None else run)
    if alert.held:
        out.append(f"{alert.held} earlier {alert.event.value} alert(s) of this run were not sent (alerts.rate_limit)")
    if alert.next:
        out.append(f"next: {alert.next}")
    keep = tuple(secrets)
    return [_cut(redact_text(line, keep)) for line in out]


def webhook_body(alert: Alert, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The generic webhook's JSON document: each field, and ``text`` (the title and lines)."""
    keep = tuple(secrets)
    head, body = title(alert, keep), lines(alert, keep)
    return {
        "source": "quarantine",
        "event": alert.event.value,
        "pipeline": alert.pipeline,
        "run_id": alert.run,
        "run_kind": alert.kind.value,
        "batch_id": alert.batch_id,
        "at": alert.at.astimezone(dt.UTC).isoformat(),
        "title": head,
        "details": [_cut(redact_text(d, keep)) for d in alert.details],
        "counts": None if alert.counts is None else {
            "records_in": alert.counts.records_in,
            "records_ok": alert.counts.records_ok,
            "records_quarantined": alert.counts.records_quarantined,
        },
        "held": alert.held,
        "next": redact_text(alert.next, keep),
        "text": "\n".join([head, *body]),
    }


def _mrkdwn(text: str) -> str:
    """Text with Slack's three control characters escaped (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(alert: Alert, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """A Slack incoming webhook's payload: ``{"text": …}``, the title bold, the command as code."""
    keep = tuple(secrets)
    body = [_mrkdwn(line) for line in lines(alert, keep)]
    if body and body[-1].startswith("next: "):
        body[-1] = f"next: `{body[-1][len('next: '):]}`"
    return {"text": "\n".join([f"*{_mrkdwn(title(alert, keep))}*", *body])}


def teams_body(alert: Alert, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """A Teams workflow webhook's payload: a message with one Adaptive Card (title, then each line)."""
    keep = tuple(secrets)
    blocks: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": title(alert, keep), "weight": "Bolder", "size": "Medium", "wrap": True}
    ]
    blocks += [{"type": "TextBlock", "text": line, "wrap": True} for line in lines(alert, keep)]
    return {
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": None,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": blocks,
            },
        }],
    }


def email_message(alert: Alert, sender: str, to: Iterable[str], secrets: Iterable[str] = ()) -> EmailMessage:
    """A plain-text email: the title as the subject, the lines as the body."""
    keep = tuple(secrets)
    message = EmailMessage()
    message["Subject"] = title(alert, keep)
    message["From"] = sender
    message["To"] = ", ".join(to)
    message.set_content("\n".join(lines(alert, keep)) + "\n")
    return message


def json_bytes(body: dict[str, Any]) -> bytes:
    """A body as the bytes POSTed (UTF-8 JSON)."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8")
