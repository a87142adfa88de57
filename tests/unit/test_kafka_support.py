"""The test broker's helpers (tests/support/kafka.py) that need no JVM."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support import kafka


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-storage format reads "-t -Xyz…" as a missing value (1 start in 64 failed in CI on
    2026-11-25); Kafka's own Uuid.randomUuid draws again in that case, and so do we."""
    draws: Iterator[uuid.UUID] = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cid = kafka._kafka_uuid()
    assert not cid.startswith("-") and len(cid) == 22
    monkeypatch.undo()
    assert not any(kafka._kafka_uuid().startswith("-") for _ in range(2000))
