"""Great Expectations suites: loading, translation to row predicates, batch validation.

* :mod:`.suite` — GX 1.x suite JSON → :class:`Suite` (no GX import).
* :mod:`.translate` — row-level expectations → native Spark predicates (pure).
* :mod:`.stage` — the ``expectation`` stage type (row routing).
* :mod:`.validate` — GX's validation of a batch → tolerance breaches.

Importing this package does not import great_expectations; validating does.
"""

from __future__ import annotations

from quarantine.expectations.suite import ExpectationSpec, Suite, load_suite, parse_suite
from quarantine.expectations.translate import TRANSLATED_TYPES, translate, untranslated_reason
from quarantine.expectations.validate import BreachPolicy, ValidationOutcome, validate_batch

__all__ = [
    "TRANSLATED_TYPES",
    "BreachPolicy",
    "ExpectationSpec",
    "Suite",
    "ValidationOutcome",
    "load_suite",
    "parse_suite",
    "translate",
    "untranslated_reason",
    "validate_batch",
]
