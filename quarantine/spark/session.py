"""The Spark session: the cluster's on Databricks, a local Delta-enabled one elsewhere.

Locally the Delta and Kafka-source jars are resolved by :mod:`quarantine.spark.jars` (the
coordinates ship in the package; Maven Central → a user cache, once) and handed to
Spark as local paths (``spark.jars``), so no Ivy resolution happens at session start.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

from pyspark.sql import SparkSession

from quarantine.errors import MissingDependencyError
from quarantine.redaction import unlogged_jvm_calls
from quarantine.spark import LOG_LEVEL_ENV
from quarantine.spark.jars import local_jars
from quarantine.spark.runtime import check_runtime, on_databricks
from quarantine.tables import register_warehouse_tables

__all__ = [
    "JVM_CHATTER", "JVM_OPTIONS", "LOG_CONFIG", "LOG_LEVEL_ENV", "READ_ONLY", "READ_ONLY_JVM_OPTIONS", "REMOTE_ENV",
    "get_spark", "local_settings", "on_databricks", "require_connect", "session_setting",
]

#: Set to ``local[2]`` (a local Spark Connect server) or ``sc://host:port`` to run over
#: Spark Connect instead of a classic local session.
REMOTE_ENV = "QUARANTINE_SPARK_REMOTE"

#: The log4j2 configuration a local JVM starts with (``-Dlog4j2.configurationFile``):
#: Spark's defaults at :data:`LOG_LEVEL_ENV`'s level, so that Spark prints nothing of its
#: own at start (its log4j profile, start-up WARNs, "Setting default log level"). A
#: configuration the session's ``spark.driver.extraJavaOptions`` or ``$SPARK_CONF_DIR``
#: brings wins; on Databricks the cluster's logging is left alone.
LOG_CONFIG = Path(__file__).resolve().parent.parent / "log4j2.properties"

#: Lines a local JVM prints outside log4j, left out unless :data:`LOG_LEVEL_ENV` is below
#: ERROR: the JVM's notice of the incubator module Spark's launcher always adds
#: (``--add-modules=jdk.incubator.vector``), and Delta's VACUUM count on stdout
#: (``quarantine maintain`` prints its own).
JVM_CHATTER = re.compile(
    rb"^(?:WARNING: Using incubator modules: |Deleted \d+ files and directories in a total of \d+ directories\.)"
)

#: The files log4j2 finds on the class path by itself (``$SPARK_CONF_DIR`` is on it).
_USER_LOG_CONFIGS = ("log4j2.properties", "log4j2.xml", "log4j2.json", "log4j2.yaml", "log4j2.yml")

#: Local-mode settings sized for a 2-core, 24 GiB machine; tests add UI off.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.shuffle.partitions": "4",
    # a large batch's shuffle starts wide and adaptive execution merges it: 4 fixed partitions
    # hold a multi-million-record batch's raw bytes in one cached block (out of memory)
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "64",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.sql.session.timeZone": "UTC",
    # Delta's log replay defaults to 50 partitions: far too many for local mode.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # off: PySpark 4 sends each Column call's Python call site to the JVM, most of a batch plan's
    # cost (benchmarks/bench_debugging.py); Spark's errors then name no Python line
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.driver.extraJavaOptions": "-Dderby.system.home=/tmp/quarantine-derby",
}

#: JVM options every local session gets, whatever ``spark.driver.extraJavaOptions`` says: HotSpot
#: JIT-compiles a pipeline's whole-stage generated code, one method larger than its defaults
#: compile (``-XX:-DontCompileHugeMethods``) and, once error branches are live, than C2's node
#: limit (``MaxNodeLimit``, with ``NodeLimitFudgeFactor`` in its range). Why and how much:
#: benchmarks/README.md, "Figures the code's comments rest on". On Databricks the cluster owns
#: the JVM: set the same options in the cluster's spark_conf (the bundle's job clusters do).
JVM_OPTIONS: tuple[str, ...] = (
    "-XX:-DontCompileHugeMethods",
    "-XX:MaxNodeLimit=240000",
    "-XX:NodeLimitFudgeFactor=8000",
)
#: What a session for a command that only reads (``get_spark(read_only=True)``) changes in
#: :data:`LOCAL_DEFAULTS`: it reads a quarantine or metrics table and its Delta log once,
#: not a 5M-record batch, so its shuffles start at one partition per core (not 64) and
#: Delta's log replay is one task.
READ_ONLY: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
}
#: The JVM options of a read-only session instead of :data:`JVM_OPTIONS`: its queries are
#: small and run once, so C1 only (``-XX:TieredStopAtLevel=1``): HotSpot's C2 compiles
#: for long loops a short process never reaches.
READ_ONLY_JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)


#: Flags that must be set together (HotSpot checks one against the other at start).
_LINKED_FLAGS: tuple[frozenset[str], ...] = (frozenset({"MaxNodeLimit", "NodeLimitFudgeFactor"}),)
#: ``-XX:+Name``, ``-XX:-Name`` and ``-XX:Name=value``: group 1 is the flag's name.
_XX_FLAG = re.compile(r"^-XX:[+-]?(\w+)")


@contextlib.contextmanager
def session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set the session's ``key`` to ``value`` for the block; its own value (or none) comes back after.

    Only SQL settings a session may change at run time (classic or Spark Connect).
    """
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def get_spark(
    app_name: str = "quarantine",
    conf: Mapping[str, str] | None = None,
    *,
    master: str | None = None,
    read_only: bool = False,
) -> SparkSession:
    """Return the active session on Databricks, else build a local Delta-enabled one.

    With ``$QUARANTINE_SPARK_REMOTE`` set (and no active session, not on Databricks),
    a Spark Connect session instead (:data:`REMOTE_ENV`).

    A session it builds locally (Spark's in-memory catalog) starts with the name of every
    Delta table in its warehouse folder registered again
    (:func:`quarantine.tables.register_warehouse_tables`): a catalog name a run gave its
    table is the same table in the next command, as on Databricks.

    Args:
        app_name: the Spark application name (local only).
        conf: extra Spark settings (the pipeline's ``spark.conf``); applied on top
            of the local defaults, or set on the existing session where allowed.
        master: local master URL; default ``$QUARANTINE_SPARK_MASTER`` or ``local[2]``.
        read_only: a new local session is for a command that reads a few tables and
            exits (``quarantine inspect``, ``stats``, ``sql``, ``report``): it starts
            with :data:`READ_ONLY` (a JVM that answers sooner, sized for small reads).
            An existing session, a Spark Connect one and Databricks' are used as they are.

    Raises:
        QuarantineError: the runtime is outside the support matrix
            (:func:`quarantine.spark.runtime.check_runtime`): locally before a session starts,
            on Databricks before a setting is changed.
    """
    active = SparkSession.getActiveSession()
    remote = os.environ.get(REMOTE_ENV, "").strip()
    if remote and active is None and not on_databricks():
        return _connect_session(remote, app_name, conf)
    if on_databricks() or active is not None:
        spark = active or SparkSession.builder.getOrCreate()
        check_runtime(spark.version)
        with unlogged_jvm_calls():  # conf values may be credentials (storage account keys)
            for k, v in (conf or {}).items():
                # static confs cannot change on a running session; the cluster's value stands
                with contextlib.suppress(Exception):
                    spark.conf.set(k, v)
        return spark
    import pyspark

    check_runtime(pyspark.__version__, databricks=False)
    # Python workers must run this interpreter (the venv with pandas/pyarrow).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.app.name": app_name,
        "spark.master": master or os.environ.get("QUARANTINE_SPARK_MASTER", "local[2]"),
        **_local_settings(conf, read_only=read_only),
    }
    builder = SparkSession.builder
    for k, v in settings.items():
        builder = builder.config(k, v)
    with unlogged_jvm_calls():  # conf values may be credentials (storage account keys)
        _start_jvm(settings)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get(LOG_LEVEL_ENV, "ERROR"))
    # Spark's in-memory catalog starts empty: the names earlier commands gave their tables
    # come back from the warehouse's folders, so every command finds them by name
    register_warehouse_tables(spark)
    return spark


def _start_jvm(settings: Mapping[str, str]) -> None:
    """Start the local JVM (unless this process has one) with its output relayed through :func:`_relay`.

    The JVM is PySpark's, started as PySpark does (``launch_gateway``, the same
    ``spark-submit`` command), with its stdout and stderr piped to two daemon threads
    that write to this process's, leaving out :data:`JVM_CHATTER` unless
    :func:`_jvm_verbose`.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    jconf = SparkConf()
    for k, v in settings.items():
        jconf.set(k, v)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    gateway = launch_gateway(jconf, popen_kwargs=pipes)  # type: ignore[no-untyped-call]
    keep_all = _jvm_verbose()
    for pipe, fd in ((gateway.proc.stdout, 1), (gateway.proc.stderr, 2)):
        threading.Thread(target=_relay, args=(pipe, fd, keep_all), name=f"quarantine-jvm-{fd}", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def _jvm_verbose() -> bool:
    """Whether :data:`LOG_LEVEL_ENV` asks for the JVM's lines below ERROR (``--verbose`` sets WARN)."""
    return os.environ.get(LOG_LEVEL_ENV, "ERROR").upper() not in ("ERROR", "FATAL", "OFF")


def _relay(pipe: IO[bytes], fd: int, keep_all: bool) -> None:
    """Copy ``pipe``'s lines to file descriptor ``fd`` until it closes; :data:`JVM_CHATTER` only with ``keep_all``."""
    for line in iter(pipe.readline, b""):
        if keep_all or not JVM_CHATTER.match(line):
            with contextlib.suppress(OSError):
                os.write(fd, line)


def _local_settings(conf: Mapping[str, str] | None, *, read_only: bool = False) -> dict[str, str]:
    """A local JVM's settings: the defaults (:data:`READ_ONLY`'s too), jars, ``conf``, JVM options, log config."""
    settings = {**LOCAL_DEFAULTS, **(READ_ONLY if read_only else {})}
    jars = [] if on_databricks() else local_jars()  # on Databricks the runtime provides them
    settings["spark.jars"] = ",".join(jars)
    # Also on the driver's class path (local mode: executors share the JVM), so Delta's
    # classes and error-message resources load from any thread — foreachBatch runs on
    # the stream's thread, where the added-jar class loader is not always the context one.
    settings["spark.driver.extraClassPath"] = os.pathsep.join(jars)
    settings.update(conf or {})
    ours = READ_ONLY_JVM_OPTIONS if read_only else JVM_OPTIONS
    options = _with_jvm_options(settings["spark.driver.extraJavaOptions"], ours)
    settings["spark.driver.extraJavaOptions"] = _with_log_config(options)
    # The stages' generated code runs where the tasks run: in the driver's JVM under a
    # local master, in the executors' JVMs under a cluster master (``spark://…``), which
    # the driver's options never reach (tests/e2e/test_cluster.py). Local mode ignores it.
    settings["spark.executor.extraJavaOptions"] = _with_jvm_options(
        settings.get("spark.executor.extraJavaOptions", ""), ours
    )
    return settings


def _with_log_config(options: str) -> str:
    """``options`` plus ``-Dlog4j2.configurationFile=`` :data:`LOG_CONFIG`, unless the user brings one.

    The user's is a ``log4j2.configurationFile`` (or log4j 1's ``log4j.configuration``) in
    ``options``, or a log4j2 file in ``$SPARK_CONF_DIR`` (else ``$SPARK_HOME/conf``), which
    Spark's launcher puts on the class path.
    """
    if "log4j2.configurationFile" in options or "log4j.configuration" in options:
        return options
    spark_home = os.environ.get("SPARK_HOME")
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (os.path.join(spark_home, "conf") if spark_home else None)
    if conf_dir and any(os.path.isfile(os.path.join(conf_dir, name)) for name in _USER_LOG_CONFIGS):
        return options
    return f"{options} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}".strip()


def require_connect(what: str) -> None:
    """Check that Spark Connect's client packages (``pyspark[connect]``: grpcio, pandas, pyarrow…) import.

    Args:
        what: who needs them, for the message (``quarantine connect-server``).

    Raises:
        MissingDependencyError: one is missing; the message ends with
            ``pip install 'spark-quarantine[connect]'`` (the command line exits 3).
    """
    try:
        import grpc  # noqa: F401  (pyspark[connect]'s client; pyspark's own check below names it too)
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies("pyspark.sql.connect.session")
    except ImportError:  # PySpark's PySparkImportError is an ImportError
        raise MissingDependencyError(f"{what}, whose client packages are not installed", "connect") from None


def _connect_session(remote: str, app_name: str, conf: Mapping[str, str] | None) -> SparkSession:
    """A Spark Connect session to ``remote`` (``$QUARANTINE_SPARK_REMOTE``).

    ``local`` / ``local[N]`` starts a Spark Connect server in a local JVM with the same
    settings and jars as a classic local session (what a test of the Connect path
    needs); ``sc://host:port`` connects to a running server, whose settings are its
    own (``conf`` is applied where the server allows).

    Raises:
        MissingDependencyError: the Connect client's packages are missing
            (``pip install 'spark-quarantine[connect]'``).
        QuarantineError: the runtime is outside
            the support matrix.
    """
    import pyspark

    check_runtime(pyspark.__version__, databricks=False)
    require_connect(f"{REMOTE_ENV}={remote} asks for Spark Connect")
    builder = SparkSession.builder.remote(remote).appName(app_name)
    if remote.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings = _local_settings(conf)
    else:
        settings = dict(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    with warnings.catch_warnings(), unlogged_jvm_calls():
        # the local server starts with every setting; the client then tries to set each
        # again at runtime and warns for each static one ("Cannot modify the value…")
        warnings.simplefilter("ignore", UserWarning)
        spark = builder.getOrCreate()
    if remote.startswith("local"):
        register_warehouse_tables(spark)  # as a classic local session does (get_spark)
    return spark


def _with_jvm_options(options: str, ours: tuple[str, ...] = JVM_OPTIONS) -> str:
    """``options`` plus each of ``ours`` (:data:`JVM_OPTIONS`) whose ``-XX`` flag it does not set already.

    A user who sets one flag of a linked pair (``MaxNodeLimit``/``NodeLimitFudgeFactor``)
    gets neither of ours: HotSpot refuses to start when the two disagree.
    """
    given = options.split()
    flags = {m.group(1) for o in given if (m := _XX_FLAG.match(o))}
    for group in _LINKED_FLAGS:
        if flags & group:
            flags |= group
    extra = [o for o in ours if (m := _XX_FLAG.match(o)) is None or m.group(1) not in flags]
    return " ".join([*given, *extra])


def local_settings(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of a local JVM the library starts (a classic session or a Connect server):
    :data:`LOCAL_DEFAULTS`, the Delta/Kafka/Avro jars, ``conf`` on top, the JVM options."""
    return _local_settings(conf)
