"""Secret references in config values: ``{{secrets/<scope>/<key>}}``, resolved when they are used.

A config names a secret in one of two ways:

* ``${env:NAME}``: an environment variable, replaced when the config is loaded
  (:func:`quarantine.config.load.parse_config`; on a Databricks job cluster the variable
  may itself hold a secret reference, which the cluster resolves when it starts);
* ``{{secrets/<scope>/<key>}}``: a Databricks secret scope's key, kept as written in the
  config (so :meth:`~quarantine.config.PipelineConfig.redacted` and every log show the
  reference, never the value) and resolved by :func:`resolve` when the value is used:
  an alert channel's webhook URL or SMTP password when the run's listeners are built.

Resolution goes through a :class:`SecretScopes` (injected: tests and notebooks pass their
own). The default, :func:`workspace_scopes`, is the Databricks SDK's ``dbutils.secrets``:
on a cluster the runtime's own, elsewhere the SDK's remote one over the workspace's REST
API with the SDK's usual authentication (``DATABRICKS_HOST`` and a token, a profile…).
A value resolved here is a secret: it is remembered for the life of the process
(:func:`resolved_secrets`), and :meth:`~quarantine.config.PipelineConfig.secrets` includes it, so
every text redacted with a config's secrets (logs, MLflow, the quarantine table's messages, an
error the command line prints) masks it as it masks a secret written in the config.

This module imports no engine; the Databricks SDK is imported only when a reference is
resolved (it is an optional dependency: the ``local`` install has it through MLflow).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Protocol

from quarantine.errors import ConfigError

__all__ = [
    "REFERENCE",
    "MappingScopes",
    "SecretScopes",
    "is_reference",
    "references",
    "resolve",
    "resolved_secrets",
    "workspace_scopes",
]

#: ``{{secrets/<scope>/<key>}}`` (spaces inside the braces allowed, as Databricks allows them).
REFERENCE = re.compile(r"\{\{\s*secrets/([^/{}\s]+)/([^/{}\s]+)\s*\}\}")


#: Every value :func:`resolve` read, for the life of the process (see the module).
_RESOLVED: dict[str, None] = {}
_LOCK = threading.Lock()


def resolved_secrets() -> tuple[str, ...]:
    """Every secret value this process read from a secret scope (:func:`resolve`), oldest first."""
    with _LOCK:
        return tuple(_RESOLVED)


class SecretScopes(Protocol):
    """Reads one key of a secret scope (``dbutils.secrets``' ``get``)."""

    def get(self, scope: str, key: str) -> str:
        """The secret's value.

        Raises:
            Exception: the scope or key does not exist, or the caller may not read it.
        """


class MappingScopes:
    """Secret scopes held in a mapping ``{(scope, key): value}``: for notebooks and tests.

    Args:
        values: each secret's value by its scope and key.
    """

    def __init__(self, values: Mapping[tuple[str, str], str]) -> None:
        self._values = dict(values)

    def get(self, scope: str, key: str) -> str:
        """The value, or ``KeyError`` naming the scope and key (never a value)."""
        try:
            return self._values[(scope, key)]
        except KeyError:
            raise KeyError(f"no secret {key!r} in scope {scope!r}") from None


def is_reference(value: object) -> bool:
    """Whether ``value`` is a string holding a ``{{secrets/<scope>/<key>}}`` reference."""
    return isinstance(value, str) and REFERENCE.search(value) is not None


def references(value: str) -> list[tuple[str, str]]:
    """The ``(scope, key)`` of each reference in ``value``, in order."""
    return [(m.group(1), m.group(2)) for m in REFERENCE.finditer(value)]


def workspace_scopes() -> SecretScopes:
    """The Databricks SDK's ``dbutils.secrets`` (a cluster's own, or the SDK's remote one).

    Raises:
        ConfigError: the SDK is not installed (``pip install databricks-sdk``), or finds no
            workspace to read from (off a cluster: no ``DATABRICKS_HOST`` and credentials).
    """
    try:  # an optional dependency, imported only when a reference is resolved
        from databricks.sdk import WorkspaceClient
    except ImportError:
        raise ConfigError(
            "{{secrets/<scope>/<key>}}", None,
            "the Databricks SDK to read a secret scope (pip install databricks-sdk), or ${env:NAME} instead",
        ) from None
    try:
        secrets: SecretScopes = WorkspaceClient().dbutils.secrets
    except Exception as exc:  # the SDK's own: no host, no credentials
        raise ConfigError(
            "{{secrets/<scope>/<key>}}", None,
            f"a Databricks workspace to read the secret scope from: the Databricks SDK found none "
            f"({type(exc).__name__}); on a cluster it is the cluster's, elsewhere set DATABRICKS_HOST and a "
            "token (or a profile), or write ${env:NAME} instead",
        ) from None
    return secrets


def resolve(value: str, *, key: str, scopes: SecretScopes | None = None) -> str:
    """``value`` with each ``{{secrets/<scope>/<key>}}`` replaced by the secret's value.

    A value without a reference is returned as it is, and no scope is asked.

    Args:
        value: a config value (``${env:NAME}`` was replaced when the config was loaded).
        key: the config key holding it, for the error.
        scopes: where secrets are read; None: :func:`workspace_scopes` (built only when
            ``value`` holds a reference).

    Raises:
        ConfigError: a secret could not be read; names the key, the scope and the secret's
            key, never a value (the reader's own error is not chained: it may quote one).
    """
    found = references(value)
    if not found:
        return value
    try:
        reader = scopes if scopes is not None else workspace_scopes()
    except ConfigError as exc:
        raise ConfigError(key, value, exc.allowed) from None
    values: dict[tuple[str, str], str] = {}
    for scope, name in found:
        try:
            secret = reader.get(scope, name)
        except Exception as exc:
            raise ConfigError(
                key, value,
                f"a secret the job may read: {{{{secrets/{scope}/{name}}}}} could not be read "
                f"({type(exc).__name__}); check the scope, the key and the job's READ permission on the scope",
            ) from None
        if not isinstance(secret, str) or not secret:
            raise ConfigError(key, value, f"a secret with a value: {{{{secrets/{scope}/{name}}}}} is empty")
        values[(scope, name)] = secret
        with _LOCK:
            _RESOLVED[secret] = None
    return REFERENCE.sub(lambda m: values[(m.group(1), m.group(2))], value)
