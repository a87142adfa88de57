"""The shipped jar coordinates against the real Maven Central and against Maven itself."""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from quarantine.spark.jars import MAVEN_CENTRAL, local_jars, spark_jar_dir, spark_jars

REPO = Path(__file__).resolve().parents[2]


def _digest(path: Path, algorithm: str) -> str:
    return hashlib.new(algorithm, path.read_bytes()).hexdigest()


def _maven_resolved() -> Path:
    """``<jar cache>/spark``: what ``mvn`` resolves from ``jvm/spark/pom.xml`` (run once if missing)."""
    folder = Path(os.environ.get("QUARANTINE_JAR_CACHE") or REPO / ".cache" / "jars") / "spark"
    if not any(folder.glob("*.jar")):
        subprocess.run(["bash", str(REPO / "scripts" / "resolve_jars.sh")], check=True)
    return folder


def test_the_shipped_coordinates_resolve_from_maven_central_to_the_files_maven_resolves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    maven = _maven_resolved()
    monkeypatch.setenv("QUARANTINE_JAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("QUARANTINE_MAVEN_REPO", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)

    paths = [Path(p) for p in local_jars()]

    assert all(p.parent == spark_jar_dir() for p in paths)
    assert sorted(p.name for p in paths) == sorted(p.name for p in maven.glob("*.jar"))  # the pom's set, no more
    for path in paths:
        assert _digest(path, "sha256") == _digest(maven / path.name, "sha256"), path.name
    for jar, path in zip(spark_jars(), paths, strict=True):  # and the checksum Maven Central publishes
        with urllib.request.urlopen(f"{MAVEN_CENTRAL}{jar.repository_path}.sha1", timeout=60) as response:
            published = response.read().decode().split()[0]
        assert _digest(path, "sha1") == published, jar.coordinate
