"""A config's relative SQLite store (the demo's ``sqlite:///mlflow.db``) is the folder a run starts in,
every time, in a process that has run in another folder before (a notebook, the test workers).

MLflow keeps one SQLAlchemy engine per URI string for the life of the process
(``SqlAlchemyStore._engine_map``), and SQLite opens a relative path against the folder of the
first connection: every later run of ``sqlite:///mlflow.db`` in that process wrote to the first
folder's store, whatever folder it ran in. Two tests on one worker that ran the demo config from
their own folders wrote one store, and a test counting its runs saw the other's (issue 50).
Real MLflow, no server and no Spark.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from quarantine.config import MlflowConfig
from quarantine.listeners.mlflow import LOCAL_TRACKING_URI, resolve_tracking_uri


def test_a_relative_sqlite_store_is_the_folder_each_run_starts_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = MlflowConfig(enabled=True, tracking_uri=LOCAL_TRACKING_URI, experiment="store-a")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    monkeypatch.chdir(first)
    MlflowClient(tracking_uri=resolve_tracking_uri(config)).create_experiment("store-a")
    monkeypatch.chdir(second)
    client = MlflowClient(tracking_uri=resolve_tracking_uri(config))

    assert client.get_experiment_by_name("store-a") is None  # not the first folder's store
    client.create_experiment("store-b")
    assert (second / "mlflow.db").is_file()
    monkeypatch.chdir(first)
    again = MlflowClient(tracking_uri=resolve_tracking_uri(config))
    assert again.get_experiment_by_name("store-a") is not None and again.get_experiment_by_name("store-b") is None
    # the URI names that folder's file: what the run logs and a reader opens from anywhere
    assert resolve_tracking_uri(config) == f"sqlite:///{first / 'mlflow.db'}"
