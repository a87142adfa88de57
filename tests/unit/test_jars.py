"""The jar resolver: shipped coordinates, downloaded once, verified, written atomically.

Downloads are served by a real HTTP server on loopback over a fake Maven layout;
``tests/e2e/test_jar_resolution.py`` resolves the shipped coordinates from Maven
Central itself.
"""

from __future__ import annotations

import hashlib
import http.server
import importlib.metadata
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from quarantine.errors import QuarantineError
from quarantine.spark.jars import (
    MAVEN_CENTRAL,
    Jar,
    jar_cache,
    local_jars,
    maven_repository,
    resolve,
    spark_jar_dir,
    spark_jars,
    supported_spark_versions,
)


@dataclass
class FakeMaven:
    """A Maven repository layout under ``root``, served over HTTP at ``url``."""

    root: Path
    url: str
    requests: list[str] = field(default_factory=list)
    delay_s: float = 0.0

    def publish(self, artifact: str, content: bytes, *, group: str = "org.example", version: str = "1.0") -> Jar:
        jar = Jar(group, artifact, version, hashlib.sha256(content).hexdigest())
        path = self.root / jar.repository_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return jar


@pytest.fixture
def maven(tmp_path: Path) -> Iterator[FakeMaven]:
    root = tmp_path / "maven2"
    root.mkdir()
    repo = FakeMaven(root, "")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def copyfile(self, source: Any, outputfile: Any) -> None:
            # Slow, chunked bodies make concurrent downloads overlap for real.
            while chunk := source.read(4096):
                outputfile.write(chunk)
                if repo.delay_s:
                    time.sleep(repo.delay_s)

        def log_message(self, format: str, *args: Any) -> None:
            repo.requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    repo.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield repo
    server.shutdown()
    server.server_close()


def _closed_port_url() -> str:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}/maven2"


def test_jars_are_downloaded_verified_and_land_under_their_maven_file_names(maven: FakeMaven, tmp_path: Path) -> None:
    a = maven.publish("alpha", b"A" * 10_000)
    b = maven.publish("beta", b"B" * 300, group="org.example.sub", version="2.1.0")
    cache = tmp_path / "cache"

    paths = resolve([a, b], cache, repository=maven.url)

    assert paths == [cache / "alpha-1.0.jar", cache / "beta-2.1.0.jar"]
    assert paths[0].read_bytes() == b"A" * 10_000 and paths[1].read_bytes() == b"B" * 300
    assert sorted(maven.requests) == [
        "/org/example/alpha/1.0/alpha-1.0.jar",
        "/org/example/sub/beta/2.1.0/beta-2.1.0.jar",
    ]
    assert sorted(p.name for p in cache.iterdir()) == ["alpha-1.0.jar", "beta-2.1.0.jar"]  # no temp file left


def test_cached_jars_are_not_downloaded_again(maven: FakeMaven, tmp_path: Path) -> None:
    jar = maven.publish("alpha", b"alpha bytes")
    cache = tmp_path / "cache"
    first = resolve([jar], cache, repository=maven.url)
    assert len(maven.requests) == 1

    assert resolve([jar], cache, repository=maven.url) == first
    assert resolve([jar], cache, repository=_closed_port_url()) == first  # no network needed either
    assert len(maven.requests) == 1


def test_a_checksum_mismatch_is_an_error_naming_the_url_and_leaves_no_file_behind(
    maven: FakeMaven, tmp_path: Path
) -> None:
    published = maven.publish("alpha", b"what the repository holds")
    expected = Jar(published.group, published.artifact, published.version, hashlib.sha256(b"what we ship").hexdigest())
    cache = tmp_path / "cache"

    with pytest.raises(QuarantineError) as info:
        resolve([expected], cache, repository=maven.url)

    message = str(info.value)
    assert f"{maven.url}org/example/alpha/1.0/alpha-1.0.jar" in message
    assert str(cache) in message
    assert expected.sha256 in message and published.sha256 in message  # expected and found
    assert list(cache.iterdir()) == []


def test_a_jar_the_repository_does_not_have_is_an_error_naming_the_url_and_the_cache(
    maven: FakeMaven, tmp_path: Path
) -> None:
    missing = Jar("org.example", "nowhere", "9.9", "0" * 64)
    cache = tmp_path / "cache"

    with pytest.raises(QuarantineError) as info:
        resolve([missing], cache, repository=maven.url)

    message = str(info.value)
    assert f"{maven.url}org/example/nowhere/9.9/nowhere-9.9.jar" in message
    assert str(cache) in message and "404" in message
    assert "QUARANTINE_MAVEN_REPO" in message  # what to do
    assert list(cache.iterdir()) == []


def test_an_unreachable_repository_is_an_error_naming_the_url_and_the_cache(tmp_path: Path) -> None:
    jar = Jar("org.example", "alpha", "1.0", "0" * 64)
    repository = _closed_port_url()
    cache = tmp_path / "cache"

    with pytest.raises(QuarantineError) as info:
        resolve([jar], cache, repository=repository)

    assert f"{repository}/org/example/alpha/1.0/alpha-1.0.jar" in str(info.value)
    assert str(cache) in str(info.value)
    assert list(cache.iterdir()) == []


def test_a_connection_dropped_mid_jar_is_an_error_naming_the_url_and_leaves_no_file_behind(tmp_path: Path) -> None:
    class Dropping(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"PK" * 100)  # then the connection closes

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Dropping)
    threading.Thread(target=server.handle_request, daemon=True).start()
    repository = f"http://127.0.0.1:{server.server_address[1]}/"
    cache = tmp_path / "cache"
    try:
        with pytest.raises(QuarantineError) as info:
            resolve([Jar("org.example", "alpha", "1.0", "0" * 64)], cache, repository=repository)
    finally:
        server.server_close()

    assert f"{repository}org/example/alpha/1.0/alpha-1.0.jar" in str(info.value) and str(cache) in str(info.value)
    assert "200 of 100,000 bytes" in str(info.value)  # cut short, not "a different jar"
    assert list(cache.iterdir()) == []


def test_a_cached_jar_that_does_not_match_its_checksum_is_downloaded_again(maven: FakeMaven, tmp_path: Path) -> None:
    jar = maven.publish("alpha", b"the real jar")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "alpha-1.0.jar").write_bytes(b"the real")  # cut short by someone else's copy

    [path] = resolve([jar], cache, repository=maven.url)

    assert path.read_bytes() == b"the real jar"
    assert len(maven.requests) == 1


def test_processes_resolving_at_once_never_see_a_partial_jar(maven: FakeMaven, tmp_path: Path) -> None:
    content = bytes(range(256)) * 256  # 64 KB, served in 4 KB chunks with a pause after each
    jar = maven.publish("alpha", content)
    maven.delay_s = 0.005
    cache = tmp_path / "cache"
    target = cache / "alpha-1.0.jar"
    seen: list[bytes] = []
    results: list[Path | BaseException] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if target.exists():
                seen.append(target.read_bytes())
            time.sleep(0.001)
        seen.append(target.read_bytes())

    def run() -> None:
        try:
            results.extend(resolve([jar], cache, repository=maven.url))
        except BaseException as exc:  # reported below
            results.append(exc)

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=run) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    watcher.join()

    assert results == [target] * 4
    assert seen and all(s == content for s in seen)  # whenever the name existed, the jar was whole
    assert [p.name for p in cache.iterdir()] == ["alpha-1.0.jar"]


def test_the_shipped_coordinates_are_those_of_the_installed_pyspark_and_delta_spark() -> None:
    import pyspark

    jars = {j.artifact: j for j in spark_jars()}
    assert spark_jars() == spark_jars(pyspark.__version__)
    assert jars["spark-sql-kafka-0-10_2.13"].version == pyspark.__version__
    assert jars["delta-spark_2.13"].version == importlib.metadata.version("delta-spark")
    assert jars["delta-storage"].version == importlib.metadata.version("delta-spark")
    assert len(jars) == 7 and {"kafka-clients", "commons-pool2", "spark-token-provider-kafka-0-10_2.13"} <= set(jars)
    assert all(len(j.sha256) == 64 and int(j.sha256, 16) >= 0 for j in jars.values())


def test_an_unsupported_pyspark_version_is_an_error_naming_it_and_the_supported_ones() -> None:
    with pytest.raises(QuarantineError) as info:
        spark_jars("3.5.0")

    assert "3.5.0" in str(info.value)
    assert all(v in str(info.value) for v in supported_spark_versions())


def test_the_cache_is_quarantine_jar_cache_else_the_users_cache_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("QUARANTINE_JAR_CACHE", str(tmp_path / "mine"))
    assert jar_cache() == tmp_path / "mine"
    assert spark_jar_dir("4.1.1") == tmp_path / "mine" / "spark-4.1.1"
    monkeypatch.delenv("QUARANTINE_JAR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jar_cache() == tmp_path / "xdg" / "quarantine" / "jars"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert jar_cache() == tmp_path / "home" / ".cache" / "quarantine" / "jars"


def test_the_repository_is_maven_central_unless_quarantine_maven_repo_names_a_mirror(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("QUARANTINE_MAVEN_REPO", raising=False)
    assert maven_repository() == MAVEN_CENTRAL == "https://repo1.maven.org/maven2/"
    monkeypatch.setenv("QUARANTINE_MAVEN_REPO", "https://mirror.example/maven")
    assert maven_repository() == "https://mirror.example/maven/"


def test_a_session_on_databricks_resolves_no_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from quarantine.spark.session import _local_settings

    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    monkeypatch.setenv("QUARANTINE_JAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QUARANTINE_MAVEN_REPO", _closed_port_url())

    assert _local_settings(None)["spark.jars"] == ""
    assert not (tmp_path / "cache").exists()


def test_local_jars_resolves_the_shipped_coordinates_into_the_folder_of_the_pyspark_version(
    maven: FakeMaven, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A mirror holding other bytes under the shipped names: the shipped SHA-256 decides.
    for jar in spark_jars():
        maven.publish(jar.artifact, b"not the real " + jar.artifact.encode(), group=jar.group, version=jar.version)
    monkeypatch.setenv("QUARANTINE_JAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QUARANTINE_MAVEN_REPO", maven.url)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)

    with pytest.raises(QuarantineError) as info:
        local_jars()

    assert str(spark_jar_dir()) in str(info.value) and maven.url in str(info.value)
    assert list(spark_jar_dir().iterdir()) == []


def test_every_shipped_spark_has_the_same_jars_built_for_its_own_line() -> None:
    """One list per supported pyspark (4.0 for Databricks Runtime 17.3 LTS, 4.1 for 18.x):
    the same seven artifacts, spark-sql-kafka at that pyspark's version, Delta and spark-avro of its line."""
    from quarantine.spark.runtime import SUPPORTED_SPARK_LINES

    versions = supported_spark_versions()
    assert {".".join(v.split(".")[:2]) for v in versions} == set(SUPPORTED_SPARK_LINES)
    assert "4.0.4" in versions and "4.1.1" in versions
    artifacts = {v: {j.artifact: j for j in spark_jars(v)} for v in versions}
    for version, jars in artifacts.items():
        assert set(jars) == set(artifacts["4.1.1"]), version
        assert jars["spark-sql-kafka-0-10_2.13"].version == version
        line = version.rsplit(".", 1)[0]
        assert jars["delta-spark_2.13"].version.startswith(line + "."), version
        assert jars["delta-storage"].version == jars["delta-spark_2.13"].version
        assert jars["spark-avro_2.13"].version.startswith(line + "."), version
        assert spark_jar_dir(version).name == f"spark-{version}"
    assert artifacts["4.0.4"]["delta-spark_2.13"].version == "4.0.1"
    # spark-sql-kafka 4.0.4's pom: kafka-clients 3.9.1, commons-pool2 2.12.0
    assert artifacts["4.0.4"]["kafka-clients"].version == "3.9.1"
    assert artifacts["4.0.4"]["commons-pool2"].version == "2.12.0"
    assert artifacts["4.0.4"]["spark-avro_2.13"].version == "4.0.2"  # the newest 4.0 on Maven Central
    # Delta (2 jars), spark-sql-kafka and spark-avro differ; the token provider, kafka-clients and pool2 are shared
    assert len({j.sha256 for jars in artifacts.values() for j in jars.values()}) == 11


def test_the_local_extra_and_the_matrix_constraints_install_exactly_the_shipped_pysparks() -> None:
    """pyproject's ``local`` extra admits the shipped pysparks (and no other release of
    their lines that PyPI has), and scripts/constraints-spark40.txt pins one of them with
    the Delta its jars list."""
    import tomllib

    from packaging.requirements import Requirement

    repo = Path(__file__).resolve().parents[2]
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    reqs = {r.name: r for r in map(Requirement, project["optional-dependencies"]["local"])}
    on_pypi = [f"4.0.{p}" for p in range(6)] + [f"4.1.{p}" for p in range(5)]
    assert {v for v in on_pypi if v in reqs["pyspark"].specifier} == set(supported_spark_versions())
    deltas = {j.version for v in supported_spark_versions() for j in spark_jars(v) if j.artifact == "delta-spark_2.13"}
    assert {v for v in ["4.0.0", "4.0.1", "4.1.0", "4.2.0"] if v in reqs["delta-spark"].specifier} == deltas
    pins = dict(
        ln.split("==") for ln in (repo / "scripts" / "constraints-spark40.txt").read_text().splitlines()
        if ln and not ln.startswith("#")
    )
    assert pins["pyspark"] in supported_spark_versions()
    assert pins["delta-spark"] == {j.artifact: j for j in spark_jars(pins["pyspark"])}["delta-spark_2.13"].version
    assert project["requires-python"] == ">=3.11,<3.13"
