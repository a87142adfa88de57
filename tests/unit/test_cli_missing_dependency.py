"""A command whose optional dependency is not installed exits 3 with the exact ``pip install``
(issue 37: "a missing optional dependency gets its own exit code"), before anything is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from quarantine.cli import main
from quarantine.errors import MissingDependencyError, QuarantineError
from tests.helpers import orders_config

REPO = Path(__file__).resolve().parents[2]


def _conf(tmp_path: Path) -> str:
    conf = tmp_path / "pipeline.yml"
    conf.write_text(yaml.safe_dump(orders_config(tmp_path)), encoding="utf-8")
    return str(conf)


def test_report_without_plotly_exits_3_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    code = main(["report", "--conf", _conf(tmp_path), "--out", str(tmp_path / "report.html")])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.startswith("quarantine: missing dependency: ") and "pip install 'spark-quarantine[report]'" in err
    assert not (tmp_path / "report.html").exists()


def test_spark_connect_without_its_client_exits_3_naming_the_extra(tmp_path: Path) -> None:
    """In a fresh process (a test worker may hold an active session, which a command would use),
    with the Connect client's ``grpc`` not importable."""
    script = ("import sys; sys.modules['grpc'] = None\n"
              "from quarantine.cli import main\n"
              "sys.exit(main(['stats', '--conf', sys.argv[1]]))\n")
    env = {**os.environ, "QUARANTINE_SPARK_REMOTE": "local[1]", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script, _conf(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 3, done.stderr
    assert "Spark Connect" in done.stderr
    assert done.stderr.rstrip().endswith("pip install 'spark-quarantine[connect]'")


def test_the_error_is_a_quarantine_error_carrying_its_extra() -> None:
    exc = MissingDependencyError("X needs Y, which is not installed", "report")
    assert isinstance(exc, QuarantineError) and exc.extra == "report"
    assert str(exc) == "X needs Y, which is not installed: pip install 'spark-quarantine[report]'"


def test_connect_server_without_its_packages_exits_3_naming_the_extra(tmp_path: Path) -> None:
    """``quarantine connect-server`` (declarative pipelines) without ``[connect]``: exit 3 and the
    ``pip install`` line, not PySpark's raw import error (issue 54, point 3). A fresh process,
    with the Connect client's ``grpc`` not importable; no server starts."""
    script = ("import sys; sys.modules['grpc'] = None\n"
              "from quarantine.cli import main\n"
              "sys.exit(main(['connect-server', '--port', '1']))\n")
    env = {**os.environ, "SPARK_CONNECT_AUTHENTICATE_TOKEN": "t0k3n", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          check=False, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "connect-server" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith("pip install 'spark-quarantine[connect]'"), done.stderr
