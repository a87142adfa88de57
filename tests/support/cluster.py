"""A real multi-process Spark cluster: Spark's standalone master and two workers, from pyspark itself.

Every other test runs Spark in one JVM (``local[2]``) or over a local Connect server,
where the driver and the executors share a process: a jar only on the driver's class
path, a closure that does not pickle, a Python object held in the driver all pass
unnoticed there. :class:`StandaloneCluster` starts ``org.apache.spark.deploy.master.Master``
and two ``org.apache.spark.deploy.worker.Worker`` (one core each) with pyspark's own
``bin/spark-class``, as child processes on 127.0.0.1; a driver given
:meth:`StandaloneCluster.driver_conf` runs its tasks in executors the workers start,
each a JVM of its own with Python workers of its own.

What the cluster's machines have installed: the venv's interpreter (``PYSPARK_PYTHON``)
and this checkout on ``PYTHONPATH`` (``quarantine`` and the tests' user functions,
``tests.fixtures_py_stage``), as a Databricks cluster has the library installed. Jars
are not installed: they reach the executors only as a driver ships them.
All processes share this machine's file system (as DBFS or Volumes are shared).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

__all__ = ["StandaloneCluster"]

SPARK_CLASS = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class StandaloneCluster:
    """A running standalone cluster (a master and ``workers`` workers); stop it with :meth:`close`.

    Args:
        workdir: the master's and workers' logs, the workers' work dirs (executors'
            stdout/stderr, fetched jars) and local dirs (shuffle, spill).
        repo: this checkout, on the workers' ``PYTHONPATH``.
        workers: how many workers, each with ``cores`` cores and ``memory`` for executors.
        timeout_s: how long the master may take to see every worker alive.
    """

    def __init__(
        self, workdir: Path, repo: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
        timeout_s: float = 240,
    ) -> None:
        self.workdir = workdir
        self.port, self.ui_port = _free_port(), _free_port()
        self._procs: list[subprocess.Popen[bytes]] = []
        env = {
            **os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(repo),
            "SPARK_NO_DAEMONIZE": "1",
        }
        for name in ("SPARK_CONF_DIR", "QUARANTINE_SPARK_REMOTE", "QUARANTINE_SPARK_MASTER"):
            env.pop(name, None)
        try:
            self._start("master", [MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                                   "--webui-port", str(self.ui_port)], env)
            for i in range(workers):
                local = workdir / f"worker-{i}" / "local"
                local.mkdir(parents=True)
                self._start(f"worker-{i}", [
                    WORKER, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                    "--work-dir", str(workdir / f"worker-{i}" / "work"), "--webui-port", "0", self.master,
                ], {**env, "SPARK_LOCAL_DIRS": str(local)})
            self._wait_for_workers(workers, timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def master(self) -> str:
        """The master's URL, what a driver sets ``spark.master`` to."""
        return f"spark://127.0.0.1:{self.port}"

    def driver_conf(self) -> dict[str, str]:
        """The Spark settings of a driver (client mode, on this machine) that runs on this cluster:
        one executor per worker, small ones."""
        return {
            "spark.master": self.master,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": "1g",
            "spark.executor.memory": "768m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
            "spark.default.parallelism": "2",
            # the executors are registered before the first job is planned (not 0 of 2, for 30 s)
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        }

    def state(self) -> dict[str, object]:
        """The master's view (its web UI's ``/json``): workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            state: dict[str, object] = json.load(r)
            return state

    def executor_logs(self) -> str:
        """Every executor's stderr so far (the workers' work dirs), for a failure message."""
        logs = sorted(self.workdir.glob("worker-*/work/app-*/*/stderr"))
        return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)

    def executor_dirs(self) -> list[Path]:
        """The executors' work dirs (``<worker>/work/<app>/<executor id>``) of every application so far."""
        return sorted(p for p in self.workdir.glob("worker-*/work/app-*/*") if p.is_dir())

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        with (self.workdir / f"{name}.log").open("ab") as out:
            self._procs.append(subprocess.Popen(
                [str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.workdir, start_new_session=True,
            ))

    def _wait_for_workers(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a cluster process exited ({dead[0].args}):\n{self._logs()}")
            with contextlib.suppress(OSError, ValueError):
                if self.state().get("aliveworkers") == n:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n} workers not alive after {timeout_s:.0f} s:\n{self._logs()}")
            time.sleep(0.5)

    def _logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.workdir.glob("*.log")))

    def close(self) -> None:
        """Stop the workers (and their executors, in their process groups), then the master."""
        for proc in reversed(self._procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
            # an executor a worker started is in the worker's group: nothing of it outlives the test
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
