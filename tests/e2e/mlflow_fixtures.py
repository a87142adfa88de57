"""A real ``mlflow server`` on a free loopback port, that tests can kill, pause and restart.

Import the fixture into a test module (``from tests.e2e.mlflow_fixtures import mlflow_server``).
The server keeps its SQLite backend store and artifact root across restarts, so
data logged before a kill is still there after the restart.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

_MLFLOW = Path(sys.executable).with_name("mlflow")


def free_port() -> int:
    """A TCP port nobody listens on right now (loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MlflowServer:
    """One ``mlflow server`` process group (started with ``start_new_session``)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "server.log"

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the server and wait until ``/health`` answers."""
        cmd = [
            str(_MLFLOW), "server",
            "--backend-store-uri", f"sqlite:///{self.root / 'db.sqlite'}",
            "--default-artifact-root", str(self.root / "art"),
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
        ]
        # MLflow 3 starts a job runner and a dozen huey worker processes by default (for
        # GenAI jobs): tracking needs none of them, and on 2 cores they slow every test.
        env = {**os.environ, "MLFLOW_HTTP_REQUEST_TIMEOUT": "5", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    healthy = r.status == 200
                if healthy:
                    # the first API call opens the store; do it here, not in the test's timed calls
                    search = f"{self.url}/api/2.0/mlflow/experiments/search?max_results=1"
                    with urllib.request.urlopen(search, timeout=60) as r:
                        r.read()
                    return
            except OSError:
                pass
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"mlflow server not healthy after {timeout_s}s: {self.log.read_text()[-3000:]}")

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the server's process group (an outage, not a clean stop)."""
        if self.proc is None:
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP the server: connections hang instead of being refused (a slow server)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal(signal.SIGCONT)


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[MlflowServer]:
    """A running ``mlflow server`` on loopback; killed at teardown."""
    root = tmp_path / "mlflow"
    (root / "art").mkdir(parents=True)
    server = MlflowServer(root, free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()
