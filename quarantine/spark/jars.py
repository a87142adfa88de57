"""The JVM jars a local Spark session adds to PySpark's own, resolved once into a cache.

PySpark ships Spark's jars but neither Delta Lake's nor Spark's Kafka source. Their
Maven coordinates and the SHA-256 of each file ship in this package
(``quarantine/jars.toml``), one list per supported PySpark version, so a wheel
installed anywhere can start a local session: :func:`local_jars` downloads them from
Maven Central over HTTPS with the standard library (no Maven, no Ivy), checks each
file against its shipped SHA-256 and hands Spark the local paths. On Databricks the
runtime has Delta and the Kafka connector: nothing is resolved.

Where they go: ``$QUARANTINE_JAR_CACHE/spark-<pyspark version>/``, by default
``$XDG_CACHE_HOME/quarantine/jars/...`` (``~/.cache/quarantine/jars/spark-4.1.1/``).
Where they come from: ``$QUARANTINE_MAVEN_REPO`` (a mirror with Maven's layout), by
default Maven Central.

Contract of :func:`resolve`:

* A jar is downloaded only when its file is not in the cache with the shipped
  SHA-256; a later call finds it there and needs no network.
* A download goes to a temporary file in the cache folder, is checked, and only then
  renamed to its final name (atomic on one file system): processes resolving at once
  all succeed, and none ever reads a partial jar under the final name.
* A failed download or a checksum mismatch raises :class:`~quarantine.errors.QuarantineError`
  naming the URL and the cache folder, and leaves no file behind.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from quarantine.errors import QuarantineError
from quarantine.redaction import redact_text

__all__ = [
    "MAVEN_CENTRAL",
    "Jar",
    "jar_cache",
    "local_jars",
    "maven_repository",
    "resolve",
    "spark_jar_dir",
    "spark_jars",
    "supported_spark_versions",
]

log = logging.getLogger("quarantine.spark.jars")

#: The default repository (``$QUARANTINE_MAVEN_REPO`` replaces it).
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
#: Seconds a connection or a read may stall before the download fails.
TIMEOUT_S = 60.0
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Jar:
    """One Maven artifact (a plain ``.jar``) and the SHA-256 its file must have.

    Attributes:
        group: the Maven groupId, e.g. ``io.delta``.
        artifact: the artifactId, e.g. ``delta-spark_2.13``.
        version: the version, e.g. ``4.1.0``.
        sha256: the file's SHA-256, lower-case hex.
    """

    group: str
    artifact: str
    version: str
    sha256: str

    @classmethod
    def parse(cls, coordinate: str, sha256: str) -> Jar:
        """A jar from ``group:artifact:version`` and its SHA-256.

        Raises:
            QuarantineError: the coordinate does not have three parts or the digest is
                not 64 hex digits.
        """
        parts = coordinate.split(":")
        digest = sha256.lower()
        if len(parts) != 3 or not all(parts):
            raise QuarantineError(f"jar coordinate {coordinate!r}: expected group:artifact:version")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise QuarantineError(f"jar {coordinate}: expected a SHA-256 of 64 hex digits, found {sha256!r}")
        return cls(parts[0], parts[1], parts[2], digest)

    @property
    def coordinate(self) -> str:
        """``group:artifact:version``."""
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        """The file's name in a Maven repository and in the cache: ``artifact-version.jar``."""
        return f"{self.artifact}-{self.version}.jar"

    @property
    def repository_path(self) -> str:
        """The file's path under a Maven repository's root."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


@cache
def _shipped() -> Mapping[str, tuple[Jar, ...]]:
    text = resources.files("quarantine").joinpath("jars.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)["spark"]
    return {version: tuple(Jar.parse(c, s) for c, s in jars.items()) for version, jars in table.items()}


def supported_spark_versions() -> tuple[str, ...]:
    """The PySpark versions whose jars ship with this package."""
    return tuple(_shipped())


def _pyspark_version() -> str:
    import pyspark

    version: str = pyspark.__version__
    return version


def spark_jars(spark_version: str | None = None) -> tuple[Jar, ...]:
    """The jars a local session adds to PySpark ``spark_version`` (default: the installed one).

    Raises:
        QuarantineError: no jars ship for that version; the message names the supported ones.
    """
    version = spark_version or _pyspark_version()
    jars = _shipped().get(version)
    if jars is None:
        supported = ", ".join(supported_spark_versions())
        raise QuarantineError(
            f"pyspark {version} is not supported for local sessions: no Delta/Kafka jars ship for it "
            f"(supported: {supported}); install a supported pyspark, e.g. pip install \"spark-quarantine[local]\""
        )
    return jars


def jar_cache() -> Path:
    """The root of the jar cache: ``$QUARANTINE_JAR_CACHE``, else ``<user cache>/quarantine/jars``.

    The user cache is ``$XDG_CACHE_HOME``, else ``~/.cache``.
    """
    explicit = os.environ.get("QUARANTINE_JAR_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "quarantine" / "jars"


def spark_jar_dir(spark_version: str | None = None) -> Path:
    """The cache folder of the jars of PySpark ``spark_version`` (default: the installed one)."""
    return jar_cache() / f"spark-{spark_version or _pyspark_version()}"


def maven_repository() -> str:
    """The repository jars are downloaded from: ``$QUARANTINE_MAVEN_REPO`` or :data:`MAVEN_CENTRAL`.

    Always ends with ``/``.
    """
    return (os.environ.get("QUARANTINE_MAVEN_REPO") or MAVEN_CENTRAL).rstrip("/") + "/"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _download(jar: Jar, url: str, target: Path, *, timeout_s: float) -> None:
    """Download ``url`` to ``target`` through a checked temporary file (see the module contract)."""
    where = target.parent

    def failed(reason: str) -> QuarantineError:
        return QuarantineError(redact_text(
            f"could not download {jar.coordinate} from {url} into the jar cache {where}: {reason}. "
            "Check the network or proxy (https_proxy), set QUARANTINE_MAVEN_REPO to a Maven mirror, "
            f"or put {jar.file_name} (SHA-256 {jar.sha256}) into {where} yourself"
        ))

    fd, tmp_name = tempfile.mkstemp(dir=where, prefix=f".{jar.file_name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        received = 0
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as response:
                length = response.headers.get("Content-Length")
                while chunk := response.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    received += len(chunk)
                out.flush()
                os.fsync(out.fileno())
        # URLError, HTTPError and timeouts are OSErrors; HTTPException: a broken response; ValueError: a bad URL
        except (OSError, http.client.HTTPException, ValueError) as exc:
            reason = f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError) else str(exc)
            raise failed(reason or type(exc).__name__) from exc
        if length is not None and length.isdigit() and received != int(length):
            raise failed(f"the connection closed after {received:,} of {int(length):,} bytes")
        found = digest.hexdigest()
        if found != jar.sha256:
            raise QuarantineError(redact_text(
                f"{jar.coordinate} downloaded from {url} has SHA-256 {found}, expected {jar.sha256} "
                f"(shipped with quarantine); nothing was written to the jar cache {where}"
            ))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def resolve(
    jars: Iterable[Jar], dest: Path, *, repository: str | None = None, timeout_s: float = TIMEOUT_S
) -> list[Path]:
    """Make every jar a checked file in ``dest``, downloading the ones it lacks.

    Args:
        jars: what to resolve.
        dest: the cache folder (created if missing).
        repository: the Maven repository's root URL; default :func:`maven_repository`.
        timeout_s: how long a connection or a read may stall.

    Returns:
        The jars' paths in ``dest``, in the order of ``jars``.

    Raises:
        QuarantineError: ``dest`` cannot be created, or a jar could not be downloaded or
            did not match its SHA-256 (see the module contract).
    """
    root = (repository or maven_repository()).rstrip("/") + "/"
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise QuarantineError(
            f"cannot create the jar cache {dest}: {exc}; set QUARANTINE_JAR_CACHE to a writable folder"
        ) from exc
    wanted = list(jars)
    paths = [dest / j.file_name for j in wanted]
    missing = [(j, p) for j, p in zip(wanted, paths, strict=True) if not (p.is_file() and _sha256(p) == j.sha256)]
    if missing:
        log.info("downloading %d jar(s) from %s into %s", len(missing), redact_text(root), dest)
    for jar, path in missing:
        _download(jar, root + jar.repository_path, path, timeout_s=timeout_s)
    return paths


def local_jars() -> list[str]:
    """Local paths of the jars a local session adds to PySpark: Delta and the Kafka source.

    Resolves :func:`spark_jars` into :func:`spark_jar_dir` (downloading once, see the
    module contract). Only for a local session: on Databricks the runtime provides
    them, and :mod:`quarantine.spark.session` does not ask.

    Raises:
        QuarantineError: the installed pyspark is not supported, or a jar could not be
            resolved; the message names the URL and the cache folder.
    """
    return [str(p) for p in resolve(spark_jars(), spark_jar_dir())]
