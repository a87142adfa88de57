"""A tolerance breach: an aggregate expectation or an error limit that failed, and what it does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from quarantine.log_lines import BREACH_ATTR
from quarantine.values.types import BreachAction

__all__ = ["BREACH_ATTR", "Breach", "BreachAction"]  # BREACH_ATTR: the attribute its log line carries

@dataclass(frozen=True)
class Breach:
    """A tolerance breach: an aggregate expectation or an error limit that failed.

    Attributes:
        name: what breached (expectation type + column, or the limit's config key).
        action: what the breach does (warn, fail, quarantine_batch).
        message: a sentence a person can act on.
        details: the machine-readable result (e.g. GX's validation result JSON).
    """

    name: str
    action: BreachAction
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)
