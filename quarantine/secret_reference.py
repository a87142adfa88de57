"""A secret named in a config, read when a command needs it: ``env:NAME`` or ``{{secrets/<scope>/<key>}}``.

A config holds where a secret is, never the secret: ``env:QUARANTINE_KEY`` (an environment
variable of the process that runs the command) or ``{{secrets/quarantine/aes-2026}}`` (a
Databricks secret scope's key, read with ``dbutils.secrets.get`` on a Databricks cluster).
The reference is resolved when a command needs the secret, not when the config loads: a
command that can do without it (``quarantine inspect`` of an encrypted table) runs where
the secret is not set and says so, where ``${env:NAME}`` (replaced when the config loads,
:mod:`quarantine.config.load`) would refuse the whole config.

This module imports no engine; resolving a Databricks reference imports the Databricks
runtime's ``dbutils`` (present on a cluster only).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum

from quarantine.spark.runtime import on_databricks

__all__ = ["REFERENCE_FORMS", "ReferenceKind", "SecretReference"]

#: The two forms a reference takes, as messages and the docs name them.
REFERENCE_FORMS = "env:NAME (an environment variable) or {{secrets/<scope>/<key>}} (a Databricks secret)"

_ENV = re.compile(r"env:([A-Za-z_][A-Za-z0-9_]*)")
_DATABRICKS = re.compile(r"\{\{\s*secrets/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)\s*\}\}")


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
        if m := _DATABRICKS.fullmatch(stripped):
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

    def resolve(self) -> str | None:
        """The secret's value, or None where this process cannot read it.

        An environment variable that is not set (or empty) is None; a Databricks secret is
        read on a Databricks cluster (``dbutils.secrets.get``) and is None anywhere else.
        """
        if self.kind is ReferenceKind.ENV:
            return os.environ.get(self.name) or None
        if not on_databricks():
            return None
        from databricks.sdk.runtime import dbutils  # the cluster's; not installed off Databricks

        value: str = dbutils.secrets.get(scope=self.scope, key=self.name)
        return value or None

    def unavailable(self) -> str:
        """Why :meth:`resolve` gave None here, in words."""
        if self.kind is ReferenceKind.ENV:
            return f"{self.describe()} is not set"
        return f"{self.describe()} is read on a Databricks cluster only"
