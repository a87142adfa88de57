"""A local Spark Connect server with the library's settings and Delta, for ``spark-pipelines``.

``spark-pipelines run`` (Spark Declarative Pipelines) and other Spark Connect clients need
a server; the one ``spark-pipelines`` starts by itself has no Delta. ``quarantine
connect-server --port 15002`` starts a ``local[2]`` server with the jars and settings of a
local session (:func:`quarantine.spark.session.local_settings`) and keeps it up until Ctrl-C or
SIGTERM. Clients present the token the server was started with:
``SPARK_CONNECT_AUTHENTICATE_TOKEN``, set in the server's environment and in theirs.

Its catalog is Spark's in-memory one, as a classic local session's: it forgets every name
when the server stops, while the tables stay in its warehouse folder. Before it answers a
client, the server gives each Delta table there its name again
(:func:`quarantine.tables.register_warehouse_tables`), so a restarted server serves the
tables a declarative pipeline's earlier updates wrote (an update would otherwise try to
create them again over their files: ``DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION``).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping

from quarantine.errors import ConfigError
from quarantine.spark.session import local_settings, require_connect
from quarantine.tables import register_warehouse_tables

__all__ = ["TOKEN_ENV", "serve"]

#: How long a new server may take to answer a first query.
READY_TIMEOUT_S = 120.0

#: The environment variable holding the token the server and its clients share.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


def serve(
    port: int,
    conf: Mapping[str, str] | None = None,
    *,
    ready: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> None:
    """Start the server on ``port`` and block until ``stop`` is set, Ctrl-C or SIGTERM.

    Args:
        port: the gRPC port (``sc://localhost:<port>``).
        conf: Spark settings on top of a local session's (e.g. ``spark.sql.warehouse.dir``).
        ready: called with one line once the server listens.
        stop: set to stop the server (a test's handle); by default a signal stops it.

    The tables in the server's warehouse folder keep their names across restarts (the module doc).

    Raises:
        MissingDependencyError: ``pyspark[connect]``'s packages are missing (the ``connect`` extra).
        ConfigError: ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` is not set (a server without a
            known token cannot be reached by another process's client).
    """
    require_connect("quarantine connect-server starts Spark Connect")
    if not os.environ.get(TOKEN_ENV):
        raise ConfigError(TOKEN_ENV, None, "a token the server and its clients share: export it in the "
                                          "server's shell and in each client's")
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    # a declarative pipeline's tables take the default format: Delta, as on Databricks
    settings = local_settings({"spark.sql.sources.default": "delta", **(conf or {})})
    settings["spark.connect.grpc.binding.port"] = str(port)
    RemoteSparkSession._start_connect_server("local[2]", settings)
    # the server's own session, in this process: its catalog is the one every client's session shares
    served = SparkSession.getActiveSession()
    assert served is not None  # _start_connect_server made it the active one
    register_warehouse_tables(served)
    _wait_until_it_answers(port)
    done = stop or threading.Event()
    if stop is None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: done.set())
    ready(f"Spark Connect server (local[2], Delta) listening on sc://localhost:{port}; Ctrl-C stops it")
    try:
        while not done.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        from pyspark import SparkContext

        SparkContext.getOrCreate().stop()


def _wait_until_it_answers(port: int) -> None:
    """Until a client's first query is answered: the gRPC port listens before the server's
    session exists, and a client then fails with ``No active or default Spark session``."""
    import time

    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            probe = RemoteSparkSession.builder.remote(f"sc://localhost:{port}").create()
            try:
                probe.range(1).collect()
                return
            finally:
                probe.client.close()  # not stop(): in this process stop() may end the server
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
