"""A local Spark Connect server that several client commands of a test share.

``QUARANTINE_SPARK_REMOTE=local[2]`` makes every ``quarantine`` command start a Spark
Connect server of its own: a JVM, a SparkContext and the Connect plugin, 20-50 s each on
two busy cores. A test that runs many commands over Connect (the demo, its stats,
replay, upkeep and operator commands) pays that once with a :class:`ConnectServer`:
a child process that starts the same server a ``local[2]`` remote starts (same jars,
same settings: :func:`quarantine.spark.session._local_settings`) on a port of its own and
keeps it up until closed. Its clients connect with ``sc://localhost:<port>``
(:attr:`ConnectServer.remote`), as a notebook on Databricks Connect reaches a cluster
that outlives it; each client gets a session of its own on the server.

One command of the demo test still starts its own server (the README's
``QUARANTINE_SPARK_REMOTE=local[2]`` line, run as written).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ConnectServer"]

# The server: pyspark's own start of a local Connect server (what a ``local[N]`` remote
# runs in the client's process), with the library's local settings and a fixed port.
_SERVER = r"""
import json, sys
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
from quarantine.spark.session import _local_settings

opts = _local_settings(json.loads(sys.argv[1]))
opts["spark.connect.grpc.binding.port"] = sys.argv[2]
RemoteSparkSession._start_connect_server("local[2]", opts)
print("READY", flush=True)
sys.stdin.read()  # until the test closes our stdin
from pyspark import SparkContext
SparkContext.getOrCreate().stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ConnectServer:
    """A running local Spark Connect server (a child process); close it with :meth:`close`.

    Args:
        workdir: where its log goes (``connect-server.log``).
        cwd: the repository (its ``PYTHONPATH``, so the server's Python workers import
            this checkout's ``quarantine`` for a stream's ``foreachBatch``).
        spark_conf: settings on top of the library's local ones.
        timeout_s: how long the server may take to listen.
    """

    def __init__(
        self, workdir: Path, cwd: Path, spark_conf: Mapping[str, str] | None = None, timeout_s: float = 300
    ) -> None:
        self.port = _free_port()
        self.token = uuid.uuid4().hex
        self.log = workdir / "connect-server.log"
        env = {
            **os.environ, "PYTHONPATH": str(cwd), "PYSPARK_PYTHON": sys.executable,
            "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token,
        }
        env.pop("QUARANTINE_SPARK_REMOTE", None)
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, json.dumps(dict(spark_conf or {})), str(self.port)],
                cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out,
            )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = self._proc.stdout.readline()  # READY, or EOF when it died
        if line.strip() != b"READY":
            self.close()
            raise RuntimeError(f"the Spark Connect server did not start:\n{self._tail()}")
        while not self._listening():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.close()
                raise RuntimeError(f"the Spark Connect server does not listen on {self.port}:\n{self._tail()}")
            time.sleep(0.2)

    @property
    def remote(self) -> str:
        """What a client sets ``QUARANTINE_SPARK_REMOTE`` to."""
        return f"sc://localhost:{self.port}"

    def client_env(self) -> dict[str, str]:
        """The environment variables a client of this server needs (its remote and token)."""
        return {"QUARANTINE_SPARK_REMOTE": self.remote, "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token}

    def _listening(self) -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def close(self) -> None:
        """Stop the server (closing its stdin ends it; killed if it does not end in 60 s)."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(30)
