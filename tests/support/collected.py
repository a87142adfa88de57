"""A pytest plugin that writes what a collection found: every test's node id and marker names.

``python -m pytest tests --collect-only -p tests.support.collected`` with
``QUARANTINE_COLLECTED=<file>`` writes ``[[node id, [marker, …]], …]`` as JSON once
collection (and ``tests/conftest.py``'s tier marking) is done. ``tests/unit/test_tiers.py``
collects the suite once this way and checks each selection (``-m unit``, ``-m matrix``…)
against the markers, instead of collecting the whole suite again for each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: The environment variable naming the file the collection is written to.
OUTPUT_ENV = "QUARANTINE_COLLECTED"


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get(OUTPUT_ENV)
    if out:
        items = [[item.nodeid, sorted({m.name for m in item.iter_markers()})] for item in session.items]
        Path(out).write_text(json.dumps(items), encoding="utf-8")
