"""The README's local Kafka demo, as written (README "Streaming from Kafka (local demo)").

``scripts/kafka_broker.sh start | produce | status | stop`` with the README's arguments,
``quarantine run --conf conf/local.yml`` (an ``available_now`` drain, in-process), then
the continuous variant with its processing-time trigger as the user runs it: a process
of its own, stopped with Ctrl-C (SIGINT) once it has written the records produced after
the drain. The changes to the README's commands: the broker's folder and port
(``KAFKA_DEMO_DIR``, ``KAFKA_DEMO_PORT``, which the README names), so the test does not
touch a developer's own demo broker, and ``--set source.bootstrap.servers=`` to match.
``conf/`` is copied next to the test's data, so the tables land in its ``data/``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from tests.support.kafka import free_port
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]


def _script(argv: list[str], env: dict[str, str]) -> str:
    assert argv[0] == "scripts/kafka_broker.sh", argv
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{shlex.join(argv)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _lines(key: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in block(key).lines()]


def _counts(spark: Any, data: Path) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        spark.read.format("delta").load(str(data / name)).count() for name in ("orders", "quarantine")
    )


@pytest.mark.timeout(1500)
def test_the_readmes_local_kafka_demo_runs_as_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    while not _free(port + 1):  # the controller listens on the next port
        port = free_port()
    env = {**os.environ, "KAFKA_DEMO_DIR": str(tmp_path / "kafka-demo"), "KAFKA_DEMO_PORT": str(port)}
    bootstrap = f"127.0.0.1:{port}"
    start, produce, status = _lines("broker-start")
    assert [start[1], produce[1], status[1]] == ["start", "produce", "status"]
    (stop,) = _lines("broker-stop")
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data" / "kafka-demo"
    continuous: subprocess.Popen[str] | None = None
    try:
        assert "started (pid" in _script(start, env)
        assert f"produced {int(produce[2]):,} order events" in _script(produce, env)
        assert _script(status, env).startswith("running (pid") and bootstrap in _script(status, env)

        (run_argv,) = _lines("stream-run")
        assert run_argv[:2] == ["quarantine", "run"]
        assert main([*run_argv[1:], "--set", f"source.bootstrap.servers={bootstrap}"]) == 0
        ok, bad = _counts(spark, data)
        assert ok + bad == int(produce[2]) and 0 < bad < ok, (ok, bad)
        capsys.readouterr()

        # the continuous run: more records arrive while it runs; Ctrl-C stops it
        (cont_argv,) = _lines("stream-run-continuous")
        assert cont_argv[:2] == ["quarantine", "run"] and "trigger={processing_time: 10 seconds}" in cont_argv
        log = (tmp_path / "continuous.log").open("w")
        continuous = subprocess.Popen(
            [sys.executable, "-m", "quarantine", *cont_argv[1:], "--set", f"source.bootstrap.servers={bootstrap}"],
            cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
            stdout=log, stderr=subprocess.STDOUT, text=True,
        )
        more = 500
        _script([produce[0], "produce", str(more)], env)
        deadline = time.monotonic() + 600
        while sum(_counts(spark, data)) < ok + bad + more:
            assert continuous.poll() is None, (tmp_path / "continuous.log").read_text()[-4000:]
            assert time.monotonic() < deadline, (tmp_path / "continuous.log").read_text()[-4000:]
            time.sleep(2)
        continuous.send_signal(signal.SIGINT)
        continuous.wait(120)
        ok2, bad2 = _counts(spark, data)
        assert ok2 + bad2 == ok + bad + more and ok2 > ok and bad2 > bad
    finally:
        if continuous is not None and continuous.poll() is None:
            continuous.kill()
            continuous.wait(60)
        stopped = _script(stop, env)
    assert "stopped (pid" in stopped
    assert "not running" in subprocess.run(status, cwd=REPO, env=env, capture_output=True, text=True).stdout
