"""Servers the alert tests send to, each on 127.0.0.1 and started by the test: they record what they receive.

* :class:`RecordingHttp`: answers POSTs from a script of statuses (500 then 200…), after a
  delay if asked, and records each request's path, headers and body;
* :class:`RecordingSmtp`: an SMTP server (aiosmtpd) that records each message, and asks for a
  login when given one;
* :class:`SecretsApi`: the Databricks REST API's ``/api/2.0/secrets/get``, the endpoint the
  Databricks SDK's ``dbutils.secrets.get`` calls off a cluster (with ``DATABRICKS_HOST`` and
  ``DATABRICKS_TOKEN`` pointing at it);
* :func:`closed_port`: a port nothing listens on (a connection to it is refused).
"""

from __future__ import annotations

import base64
import email
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

__all__ = ["Received", "RecordingHttp", "RecordingSmtp", "SecretsApi", "closed_port"]


@dataclass(frozen=True)
class Received:
    """One request as the server got it."""

    path: str
    headers: Mapping[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _LocalHttp:
    """An HTTP server on 127.0.0.1 (a free port) serving ``handler``, on a thread, for a ``with`` block."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class RecordingHttp(_LocalHttp):
    """An HTTP server on 127.0.0.1 that records each POST and answers with ``statuses`` in turn
    (the last one for every request after), each after ``delay_s``.

    Use as a context manager; :meth:`url` gives a path's URL.
    """

    def __init__(self, statuses: Sequence[int] = (200,), *, delay_s: float = 0.0) -> None:
        self.statuses = list(statuses)
        self.delay_s = delay_s
        self.received: list[Received] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.received.append(Received(self.path, dict(self.headers), body, time.monotonic()))
                    status = owner.statuses[min(len(owner.received), len(owner.statuses)) - 1]
                if owner.delay_s:
                    time.sleep(owner.delay_s)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the client gave up waiting
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._serve(Handler)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def bodies(self, path: str | None = None) -> list[Any]:
        """The JSON bodies received (at ``path`` only, when given), in order."""
        with self._lock:
            return [r.json() for r in self.received if path is None or r.path == path]


class _Mailbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        message = email.message_from_bytes(envelope.content, policy=default_policy)
        assert isinstance(message, EmailMessage)
        self.messages.append(message)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    return _free_port()


class RecordingSmtp:
    """An SMTP server on 127.0.0.1 (aiosmtpd, no TLS) that records each message; with ``login``,
    it asks for that user and password (over plain text: loopback only)."""

    def __init__(self, login: tuple[str, str] | None = None) -> None:
        self.mailbox = _Mailbox()
        self.logins: list[tuple[str, bool]] = []
        self.port = _free_port()
        kwargs: dict[str, Any] = {}
        if login is not None:
            user, password = login

            def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
                given = (data.login.decode(), data.password.decode()) if isinstance(data, LoginPassword) else ("?", "")
                ok = given == (user, password)
                self.logins.append((given[0], ok))
                return AuthResult(success=ok)

            kwargs = {"authenticator": authenticate, "auth_required": True, "auth_require_tls": False}
        self._controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port, **kwargs)

    @property
    def messages(self) -> list[EmailMessage]:
        return self.mailbox.messages

    def __enter__(self) -> RecordingSmtp:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


class SecretsApi(_LocalHttp):
    """The Databricks REST API's secrets endpoint, serving ``values`` (``{(scope, key): value}``) to a
    caller with the bearer ``token``; use :meth:`environment` as the SDK's settings."""

    def __init__(self, values: Mapping[tuple[str, str], str], token: str = "dapi-local-test") -> None:
        self.values = dict(values)
        self.token = token
        self.asked: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                found = None
                if url.path == "/api/2.0/secrets/get" and self.headers.get("Authorization") == f"Bearer {owner.token}":
                    owner.asked.append((query.get("scope", ""), query.get("key", "")))
                    found = owner.values.get((query.get("scope", ""), query.get("key", "")))
                if found is None:
                    status, body = 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such secret"}
                else:
                    status, body = 200, {"key": query["key"], "value": base64.b64encode(found.encode()).decode()}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._serve(Handler)

    def environment(self) -> dict[str, str]:
        """What the Databricks SDK reads to call this server."""
        return {"DATABRICKS_HOST": f"http://127.0.0.1:{self.port}", "DATABRICKS_TOKEN": self.token}
