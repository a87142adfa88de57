"""A secret named in a config, read when a command needs it: ``env:NAME`` or ``{{secrets/<scope>/<key>}}``.

A config holds where a secret is, never the secret: ``env:QUARANTINE_KEY`` (an environment
variable of the process that runs the command) or ``{{secrets/quarantine/aes-2026}}`` (a
Databricks secret scope's key, read as every other secret reference is:
:func:`quarantine.secret_refs.resolve`, the Databricks SDK's ``dbutils.secrets`` on a cluster or
over the workspace's API, the value then masked wherever a config's secrets are).
The reference is resolved when a command needs the secret, not when the config loads: a
command that can do without it (``quarantine inspect`` of an encrypted table) runs where
the secret is not set and says so, where ``${env:NAME}`` (replaced when the config loads,
:mod:`quarantine.config.load`) would refuse the whole config.

This module imports no engine; resolving a Databricks reference imports the Databricks SDK
(:mod:`quarantine.secret_refs`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum

from quarantine.errors import ConfigError
from quarantine.secret_refs import REFERENCE, SecretScopes, resolve

__all__ = ["REFERENCE_FORMS", "ReferenceKind", "SecretReference"]

#: The two forms a reference takes, as messages and the docs name them.
REFERENCE_FORMS = "env:NAME (an environment variable) or {{secrets/<scope>/<key>}} (a Databricks secret)"

_ENV = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]*)")


class ReferenceKind(StrEnum):
    """Where a referenced secret is kept."""

    ENV = "env"
    DATABRICKS = "databricks"


@dataclass(frozen=True)
class SecretReference:
    """Where a secret is: an environment variable, or a Databricks secret scope's key.

    Attributes:
        kind: where it is kept.
        name: the environment variable (``ENV``), or the scope's key (``DATABRICKS``).
        scope: the Databricks secret scope (``DATABRICKS`` only).
    """

    kind: ReferenceKind
    name: str
    scope: str = ""

    @classmethod
    def parse(cls, text: str) -> SecretReference:
        """The reference ``text`` writes.

        Raises:
            ValueError: ``text`` is neither form (see :data:`REFERENCE_FORMS`); the message never
                quotes ``text``, which may be a secret written where its reference belongs.
        """
        stripped = text.strip() if isinstance(text, str) else ""
        if m := _ENV.fullmatch(stripped):
            return cls(ReferenceKind.ENV, m[1])
        if m := REFERENCE.fullmatch(stripped):
            return cls(ReferenceKind.DATABRICKS, m[2], scope=m[1])
        raise ValueError(f"where the key is kept, not the key itself: {REFERENCE_FORMS}")

    def __str__(self) -> str:
        if self.kind is ReferenceKind.ENV:
            return f"env:{self.name}"
        return f"{{{{secrets/{self.scope}/{self.name}}}}}"

    def describe(self) -> str:
        """Where the secret is, in words: ``the environment variable QUARANTINE_KEY``."""
        if self.kind is ReferenceKind.ENV:
            return f"the environment variable {self.name}"
        return f"the Databricks secret {self.scope}/{self.name}"

    def resolve(self, *, key: str = "", scopes: SecretScopes | None = None) -> str | None:
        """The secret's value, or None where this process cannot read it.

        An environment variable that is not set (or empty) is None; a Databricks secret is read
        by :func:`quarantine.secret_refs.resolve` (``scopes``, else the Databricks SDK's) and is None
        where it cannot be (no SDK, no workspace, no such secret, no permission): :meth:`unavailable`.

        Args:
            key: the config key naming this reference (for the reader's own messages).
            scopes: where Databricks secrets are read (tests and notebooks pass their own).
        """
        if self.kind is ReferenceKind.ENV:
            return os.environ.get(self.name) or None
        try:
            return resolve(str(self), key=key, scopes=scopes)
        except ConfigError:
            return None

    def unavailable(self) -> str:
        """Why :meth:`resolve` gave None here, in words."""
        if self.kind is ReferenceKind.ENV:
            return f"{self.describe()} is not set"
        return (f"{self.describe()} could not be read here (the Databricks SDK reads it on a cluster, elsewhere "
                "with DATABRICKS_HOST and a token; the job needs READ on the scope)")
