"""A command whose optional dependency is not installed exits 3 with the exact ``pip install``
(issue 37: "a missing optional dependency gets its own exit code"), before anything is read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from quarantine.cli import main
from quarantine.errors import MissingDependencyError, QuarantineError
from tests.helpers import orders_config


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


def test_spark_connect_without_its_client_exits_3_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark.sql import SparkSession

    monkeypatch.setitem(sys.modules, "grpc", None)
    monkeypatch.setenv("QUARANTINE_SPARK_REMOTE", "local[1]")
    # a worker that ran a Spark test before has an active session, which the command would use
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    code = main(["stats", "--conf", _conf(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "Spark Connect" in err and err.rstrip().endswith("pip install 'spark-quarantine[connect]'")


def test_the_error_is_a_quarantine_error_carrying_its_extra() -> None:
    exc = MissingDependencyError("X needs Y, which is not installed", "report")
    assert isinstance(exc, QuarantineError) and exc.extra == "report"
    assert str(exc) == "X needs Y, which is not installed: pip install 'spark-quarantine[report]'"
