"""Shared fixtures: one local Spark session (Delta on, UI off) for the whole run.

Tiers: tests/unit never start Spark; tests/integration use the ``spark`` fixture;
tests/e2e also start a real Kafka broker or a real ``mlflow server``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QUARANTINE_SPARK_LOG_LEVEL", "ERROR")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from quarantine.session import get_spark

    session = get_spark(
        "quarantine-tests",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "3g",
            "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        },
    )
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A fresh directory for this test's Delta tables."""
    d = tmp_path / "tables"
    d.mkdir()
    return d
