"""The schema registry's REST client: a subject's versions and schemas by id, typed failures.

:class:`RegistrySchemas` speaks the documented Confluent Schema Registry REST API
(``GET /schemas/ids/{id}``, ``GET /subjects/{subject}/versions``, ``GET
/subjects/{subject}/versions/{version}``) with basic auth and TLS, each schema id fetched
once. :class:`RegistrySource` is what a stage keeps: plain values (it pickles for a Spark
Connect worker) that build the client. Failures are the types of
:mod:`quarantine.stages.schema_sources`, read from the HTTP status and the body's ``error_code``;
:func:`registry_retry` retries the retriable ones under ``errors.retry.*``. Credentials never
reach a message. :func:`listed_versions` is what the avro and protobuf stages share: the
versions a stage's ``schemas:`` registry names, listed when the stage is built, with the
failures named by option.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import RetryPolicy, RetryWithToleranceOperator
from quarantine.errors import ConfigError, RetriesExhaustedError
from quarantine.redaction import redact_text
from quarantine.stage import Declaration, StageOptions
from quarantine.stages.schema_sources import (
    RegistryAuthError,
    RegistryUnreachableError,
    SchemaLookupError,
    UnknownSchemaIdError,
    UnknownSubjectError,
    UnknownVersionError,
)
from quarantine.values.options import (
    CREDENTIAL,
    REGISTRY_URL,
    SUBJECTS,
    existing,
)
from quarantine.values.types import OPTIONAL_TEXT, integer

log = logging.getLogger("quarantine")

__all__ = [
    "RegistrySchemas",
    "RegistrySource",
    "SchemaReference",
    "SubjectVersion",
    "avro_writers",
    "check_registry_url",
    "listed_versions",
    "log_listed",
    "registry_retry",
    "replace_message",
    "warn_not_listed",
    "warn_skipped",
]



class RegistryOptions(StageOptions):
    """A schema registry speaking the Confluent REST API: an avro or protobuf stage's writer schemas are the
    versions of its subject (or subjects), listed when the stage is built."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "url": "https://schema-registry.example.com:8081",
        "subject": "orders-value",
        "user": "${env:SCHEMA_REGISTRY_USER}",
        "password": "${env:SCHEMA_REGISTRY_PASSWORD}",
    }]})

    url: Annotated[str, REGISTRY_URL] = Field(examples=["https://schema-registry.example.com:8081"])
    """The registry's base URL, http(s)://host[:port]."""
    subject: Annotated[str | None, OPTIONAL_TEXT] = Field(None, examples=["orders-value"])
    """The subject whose versions are the writer schemas (Kafka Connect's default for a topic's values:
    ``<topic>-value``). Exactly one of subject and subjects; required with url."""
    subjects: Annotated[list[str] | None, SUBJECTS] = Field(None, examples=[["orders-value", "returns-value"]])
    """Several subjects (a topic whose records are written under more than one)."""
    user: Annotated[str | None, CREDENTIAL] = Field(None, examples=["${env:SCHEMA_REGISTRY_USER}"])
    """Basic-auth user (Confluent Cloud: the API key), usually from the environment as ``${env:NAME}``."""
    password: Annotated[str | None, CREDENTIAL] = Field(None, examples=["${env:SCHEMA_REGISTRY_PASSWORD}"])
    """Basic-auth password (Confluent Cloud: the API secret): write ``${env:NAME}``, never the value; on Databricks
    the job cluster's environment variable holds the secret reference ``{{secrets/<scope>/<key>}}``."""
    ca_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/registry-ca.pem"])
    """PEM file of the certificate authorities that sign the registry's certificate (https; default the
    system's); relative to the config's folder."""
    cert_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/client.pem"])
    """PEM client certificate, for a registry that asks for one (mutual TLS)."""
    key_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/client-key.pem"])
    """The client certificate's private key (PEM), unless cert_file holds it."""
    timeout_s: Annotated[int, integer(1)] = Field(10, examples=[30])
    """Seconds each request to the registry may take."""


def _shown_url(url: str) -> str:
    """The URL without ``user:password@``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def check_registry_url(url: str) -> str:
    """``url`` if it is ``http(s)://host[:port][/path]``; the message never shows its user-info.

    Raises:
        ValueError: it is not.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise ValueError(f"schema registry url: expected http(s)://host[:port], found {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"schema registry url: expected http(s)://host[:port], found {_shown_url(url)!r}")
    return url


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one references: the API's ``{"name", "subject", "version"}``.

    Attributes:
        name: how the referencing schema names it (a Protobuf schema's import path).
        subject: the subject holding it.
        version: its version there.
    """

    name: str
    subject: str
    version: int

    def __str__(self) -> str:
        return f"{self.subject} v{self.version}"


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject, as ``GET /subjects/{subject}/versions/{version}`` answers it.

    Attributes:
        subject: the subject.
        version: its version number (1, 2…).
        schema_id: the schema's globally unique id (what the wire format carries).
        schema: the schema text (Avro JSON for an Avro schema).
        schema_type: ``AVRO`` (the API leaves the field out for Avro), ``PROTOBUF`` or ``JSON``.
        references: the other schemas it references (shown as ``subject v<version>``).
    """

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()


@dataclass(repr=False)
class RegistrySchemas:
    """The HTTP client of a registry speaking the Confluent REST API.

    ``GET /schemas/ids/{id}`` (each id fetched at most once per instance; concurrent
    callers of one id wait for the first fetch), ``GET /subjects/{subject}/versions`` and
    ``GET /subjects/{subject}/versions/{version}``. Each request is made under
    :attr:`retry` (only :class:`RegistryUnreachableError` is retried).

    Attributes:
        url: the registry's base URL (``https://host:8081``; ``user:password@`` allowed).
        user: basic-auth user (overrides the URL's).
        password: basic-auth password (never shown).
        timeout_s: per-request timeout (connect, and each read).
        retry: runs each request (see :func:`registry_retry`); None asks once.
        ca_file: PEM file of the certificate authorities to trust (https; default the system's).
        cert_file: PEM client certificate, for a registry that asks for one (mutual TLS).
        key_file: the client certificate's private key (PEM; default: in ``cert_file``).
        opener: the HTTP call (``urllib.request.urlopen``; injectable).
    """

    url: str
    user: str | None = None
    password: str | None = None
    timeout_s: float = 10.0
    retry: RetryWithToleranceOperator | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    opener: Callable[..., object] = urllib.request.urlopen
    _cache: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    #: how many HTTP requests were made (tests and metrics read it).
    requests: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        check_registry_url(self.url)
        parts = urllib.parse.urlsplit(self.url)
        if self.user is None and parts.username:
            self.user = urllib.parse.unquote(parts.username)
        if self.password is None and parts.password:
            self.password = urllib.parse.unquote(parts.password)
        self.base = _shown_url(self.url).rstrip("/")
        self._tls: ssl.SSLContext | None = None
        if self.ca_file or self.cert_file:
            self._tls = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                self._tls.load_cert_chain(self.cert_file, self.key_file)

    def __repr__(self) -> str:  # no password, no URL userinfo
        return f"RegistrySchemas({self.base!r}, user={self.user!r})"

    def schema(self, schema_id: int) -> str:
        """The schema (its text) registered under ``schema_id``: ``GET /schemas/ids/{id}``.

        Raises:
            UnknownSchemaIdError: 404 with error code 40403.
            RegistryUnreachableError: after the retries.
            SchemaLookupError: any other failure (:class:`RegistryAuthError` for 401/403).
        """
        with self._lock:
            if schema_id not in self._cache:
                body = self._get(f"/schemas/ids/{schema_id}", f"schema id {schema_id}", schema_id)
                schema = body.get("schema") if isinstance(body, dict) else None
                if not isinstance(schema, str):
                    where = f"schema id {schema_id} from {self.base}"
                    raise SchemaLookupError(schema_id, f"{where}: the answer has no 'schema' string")
                self._cache[schema_id] = schema
            return self._cache[schema_id]

    def versions(self, subject: str) -> list[int]:
        """The subject's version numbers: ``GET /subjects/{subject}/versions``.

        Raises:
            UnknownSubjectError: 404 with error code 40401.
            RegistryUnreachableError: after the retries.
            SchemaLookupError: any other failure.
        """
        what = f"the versions of subject {subject!r}"
        body = self._get(f"/subjects/{_segment(subject)}/versions", what)
        if not isinstance(body, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in body):
            raise SchemaLookupError(None, f"{what} from {self.base}: the answer is not a list of version numbers")
        return sorted(body)

    def version(self, subject: str, version: int | str) -> SubjectVersion:
        """One version of a subject: ``GET /subjects/{subject}/versions/{version}``.

        Raises:
            UnknownSubjectError: 404 with error code 40401.
            UnknownVersionError: 404 with error code 40402.
            RegistryUnreachableError: after the retries.
            SchemaLookupError: any other failure (422 with 42202: an invalid version).
        """
        what = f"version {version} of subject {subject!r}"
        body = self._get(f"/subjects/{_segment(subject)}/versions/{_segment(str(version))}", what)
        where = f"{what} from {self.base}"
        if not isinstance(body, dict):
            raise SchemaLookupError(None, f"{where}: the answer is not a JSON object")
        sid, schema, number = body.get("id"), body.get("schema"), body.get("version", version)
        if not isinstance(sid, int) or isinstance(sid, bool) or not isinstance(schema, str):
            raise SchemaLookupError(None, f"{where}: the answer has no 'id' number and 'schema' string")
        refs = body.get("references") or []
        if not isinstance(refs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
            and isinstance(r.get("version"), int) for r in refs
        ):
            raise SchemaLookupError(None, f"{where}: its 'references' are not a list of {{name, subject, version}}")
        return SubjectVersion(
            subject=str(body.get("subject", subject)),
            version=int(number) if isinstance(number, int) else 0,
            schema_id=sid,
            schema=schema,
            schema_type=str(body.get("schemaType") or "AVRO").upper(),
            references=tuple(SchemaReference(r["name"], r["subject"], r["version"]) for r in refs),
        )

    def _secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password,) if s)

    def _get(self, path: str, what: str, schema_id: int | None = None) -> Any:
        """The JSON of ``GET base+path``, under :attr:`retry`."""
        if self.retry is None:
            return self._request(path, what, schema_id)
        try:
            body, _ = self.retry.call(lambda: self._request(path, what, schema_id), name=f"schema registry: {what}")
        except RetriesExhaustedError as exc:
            cause = exc.__cause__
            if isinstance(cause, RegistryUnreachableError):
                raise replace_message(cause, f"{cause} (gave up after {exc.attempts} attempts)") from None
            if isinstance(cause, SchemaLookupError):
                raise cause from None
            raise
        return body

    def _request(self, path: str, what: str, schema_id: int | None) -> Any:
        request = urllib.request.Request(f"{self.base}{path}", headers={
            "Accept": "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, "
                      "application/json",
        })
        if self.user is not None:
            token = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        self.requests += 1
        where = f"{what} from {self.base}"
        try:
            with self.opener(  # type: ignore[attr-defined]
                request, timeout=self.timeout_s, **({"context": self._tls} if self._tls is not None else {})
            ) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            raise self._answer_error(exc, where, schema_id) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            shown = redact_text(str(reason), self._secrets())
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise SchemaLookupError(
                    schema_id, f"{where}: the registry's TLS certificate is not trusted ({shown}); give the "
                    "certificate authority's PEM file as ca_file",
                ) from None
            if isinstance(reason, TimeoutError):
                shown = f"no answer within {self.timeout_s:g} s"
            raise RegistryUnreachableError(schema_id, f"{where}: unreachable ({shown})") from None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SchemaLookupError(schema_id, f"{where}: the answer is not JSON ({exc})") from None

    def _answer_error(self, exc: urllib.error.HTTPError, where: str, schema_id: int | None) -> SchemaLookupError:
        """The typed failure of an HTTP error answer, naming its status, error code and message."""
        try:
            raw = exc.read().decode("utf-8", "replace")[:300]
        except Exception:
            raw = ""
        code: int | None = None
        detail = raw.strip()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict):
            found = body.get("error_code")
            code = found if isinstance(found, int) and not isinstance(found, bool) else None
            detail = str(body.get("message") or "")
        status = exc.code
        said = f"HTTP {status}" + (f", error code {code}" if code is not None else "") + (
            f": {detail}" if detail else ""
        )
        text = f"{where}: {redact_text(said, self._secrets())}"
        kind: type[SchemaLookupError] = SchemaLookupError
        if status == 404 and code == 40403:
            kind, text = UnknownSchemaIdError, f"{where}: not registered ({redact_text(said, self._secrets())})"
        elif status == 404 and code == 40401:
            kind = UnknownSubjectError
        elif status == 404 and code == 40402:
            kind = UnknownVersionError
        elif status == 404:
            text += " (is this the base URL of a Confluent REST API?)"
        elif status in (401, 403):
            kind = RegistryAuthError
            text += " (check the user and password: " + (
                "the registry did not accept them)" if status == 401 else "they lack the right to read this)"
            )
        elif status >= 500 or status == 429:
            kind = RegistryUnreachableError
        return kind(schema_id, text, status=status, error_code=code)


def replace_message(exc: SchemaLookupError, message: str) -> SchemaLookupError:
    """``exc``'s class, id, status and error code with another message."""
    return type(exc)(exc.schema_id, message, status=exc.status, error_code=exc.error_code)


def _segment(text: str) -> str:
    """``text`` as one URL path segment (a subject may hold ``/``, ``:`` or spaces)."""
    return urllib.parse.quote(text, safe="")


def registry_retry(policy: RetryPolicy) -> RetryWithToleranceOperator:
    """An operator that retries :class:`RegistryUnreachableError` (only) with ``policy``'s backoff and budget."""
    retriable = RetriableClassifier.of((), lambda exc: isinstance(exc, RegistryUnreachableError), include_delta=False)
    return RetryWithToleranceOperator(replace(policy, retriable=retriable))


@dataclass(frozen=True, repr=False)
class RegistrySource:
    """A registry and the subjects whose versions are a stage's writer schemas.

    Plain values only (no client, no lock): it is part of an ``avro`` stage, which is
    pickled to the Python worker that runs a stream's batches over Spark Connect. A
    :class:`RegistrySchemas` client is made for each listing.

    Attributes:
        url: the registry's base URL.
        subjects: the subjects (``orders-value``: Kafka Connect's default subject of a topic's values).
        user, password: basic auth (the password is never shown).
        ca_file, cert_file, key_file: TLS (see :class:`RegistrySchemas`).
        timeout_s: per-request timeout.
    """

    url: str
    subjects: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        check_registry_url(self.url)

    def __repr__(self) -> str:
        return f"RegistrySource({self.describe()!r}, user={self.user!r})"

    def describe(self) -> str:
        """``subject orders-value at https://host:8081`` (no credentials)."""
        label = "subject" if len(self.subjects) == 1 else "subjects"
        return f"{label} {', '.join(self.subjects)} at {_shown_url(self.url).rstrip('/')}"

    def client(self, retry: RetryWithToleranceOperator | None = None) -> RegistrySchemas:
        """A new HTTP client of the registry."""
        return RegistrySchemas(
            self.url, user=self.user, password=self.password, timeout_s=self.timeout_s, retry=retry,
            ca_file=self.ca_file, cert_file=self.cert_file, key_file=self.key_file,
        )

    def list(
        self, known: Collection[tuple[str, int]] = (), retry: RetryWithToleranceOperator | None = None
    ) -> list[SubjectVersion]:
        """The versions of every subject not in ``known`` (``(subject, version)`` pairs).

        One ``GET /subjects/{subject}/versions`` per subject, then one
        ``GET /subjects/{subject}/versions/{version}`` per version not known; a version
        deleted between the two (404, 40402) is left out.

        Raises:
            SchemaLookupError: as :meth:`RegistrySchemas.versions` and :meth:`RegistrySchemas.version` do.
        """
        client = self.client(retry)
        found: list[SubjectVersion] = []
        for subject in self.subjects:
            for number in client.versions(subject):
                if (subject, number) in known:
                    continue
                try:
                    found.append(client.version(subject, number))
                except UnknownVersionError:
                    continue
        return found


def avro_writers(versions: Iterable[SubjectVersion]) -> tuple[dict[int, str], list[tuple[SubjectVersion, str]]]:
    """The Avro writer schemas of ``versions`` by schema id, and the versions left out with why.

    Left out: a schema that is not Avro (``schemaType`` ``PROTOBUF`` or ``JSON``), one that
    references other schemas (Spark's ``from_avro`` needs a schema that names every type it
    uses), and one that is not JSON.
    """
    writers: dict[int, str] = {}
    skipped: list[tuple[SubjectVersion, str]] = []
    for v in versions:
        if v.schema_type != "AVRO":
            skipped.append((v, f"a {v.schema_type} schema, not Avro"))
        elif v.references:
            refs = ", ".join(map(str, v.references))
            skipped.append((v, f"it references other schemas ({refs}), which is not supported"))
        else:
            try:
                json.loads(v.schema)
            except ValueError as exc:
                skipped.append((v, f"its schema is not JSON ({exc})"))
                continue
            writers[v.schema_id] = v.schema
    return writers, skipped


def listed_versions(spec: Declaration, options: RegistryOptions) -> tuple[RegistrySource, list[SubjectVersion]]:
    """The registry the options name, and every version of its subjects (each request made once).

    Raises:
        ConfigError: not exactly one of subject and subjects, an unknown subject, refused credentials.
        SchemaLookupError: the registry could not be asked, naming the option and the registry.
    """
    if (options.subject is None) == (options.subjects is None):
        raise ConfigError(spec.key("options.schemas.subject"), options.subject,
                          "exactly one of subject (one subject) and subjects (a list)")
    subjects = (options.subject,) if options.subject is not None else tuple(options.subjects or ())
    registry = RegistrySource(
        url=options.url, subjects=subjects, user=options.user, password=options.password,
        ca_file=options.ca_file, cert_file=options.cert_file, key_file=options.key_file,
        timeout_s=float(options.timeout_s),
    )
    try:
        return registry, registry.list()
    except UnknownSubjectError as exc:
        key = "options.schemas.subject" if options.subject is not None else "options.schemas.subjects"
        raise ConfigError(spec.key(key), options.subject or list(subjects),
                          f"a subject registered at {registry.describe().rsplit(' at ', 1)[1]} ({exc})") from None
    except RegistryAuthError as exc:
        raise ConfigError(spec.key("options.schemas.user"), options.user,
                          f"credentials the registry accepts for {registry.describe()} ({exc})") from None
    except SchemaLookupError as exc:
        raise replace_message(
            exc, f"{spec.key('options.schemas')}: could not list the writer schemas of {registry.describe()}: {exc}"
        ) from None


def warn_skipped(stage: str, skipped: list[tuple[SubjectVersion, str]]) -> None:
    """Log each listed version a stage leaves out, and why (its records are ``UnknownSchemaId``)."""
    for v, why in skipped:
        log.warning(
            "stage %s: schema id %s (%s v%s) is left out: %s; its records are UnknownSchemaId",
            stage, v.schema_id, v.subject, v.version, why,
        )


def warn_not_listed(stage: str, registry: RegistrySource, exc: Exception) -> None:
    """Log a refresh that could not list ``registry`` again (the stage stays as it is)."""
    log.warning(
        "stage %s: could not list the writer schemas of %s again (%s); records with schema ids not "
        "listed yet stay in quarantine, for a later micro-batch's listing or a replay",
        stage, registry.describe(), exc,
    )


def log_listed(stage: str, registry: RegistrySource, added: Iterable[int]) -> None:
    """Log the schema ids a refresh of ``registry`` added to a stage."""
    log.info(
        "stage %s: schema id(s) %s listed in %s; the next micro-batch decodes them",
        stage, ", ".join(map(str, sorted(added))), registry.describe(),
    )
