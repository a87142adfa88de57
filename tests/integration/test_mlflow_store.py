"""The spark tier's MLflow stores: each test's own, migrated once per worker and copied.

``mlflow_store`` and ``tests.helpers.put_mlflow_store`` stand in for the first open of a
new ``sqlite:///`` store (MLflow's schema migrations, 12-22 s here), so the copy must be what
that open leaves: every table at MLflow's head revision, the Default experiment, no run,
and a file of the test's own (never the repository's ``mlflow.db``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy
from alembic.script import ScriptDirectory
from mlflow.store.db.utils import _get_alembic_config
from mlflow.tracking import MlflowClient

from tests.helpers import put_mlflow_store


def test_a_tests_store_is_its_own_migrated_to_mlflows_head_and_empty(mlflow_store: str, tmp_path: Path) -> None:
    assert mlflow_store == f"sqlite:///{tmp_path / 'mlflow.db'}"
    engine = sqlalchemy.create_engine(mlflow_store)
    try:
        with engine.connect() as conn:
            (revision,) = conn.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).one()
    finally:
        engine.dispose()
    head = ScriptDirectory.from_config(_get_alembic_config(mlflow_store)).get_current_head()
    assert revision == head
    client = MlflowClient(tracking_uri=mlflow_store)
    assert [e.name for e in client.search_experiments()] == ["Default"]
    assert client.search_runs(["0"]) == []
    run = client.create_run(client.create_experiment("own"))  # writable: a run lands in this test's file
    assert [r.info.run_id for r in client.search_runs([run.info.experiment_id])] == [run.info.run_id]


def test_a_store_is_never_copied_over_an_existing_one(mlflow_template: Path, tmp_path: Path) -> None:
    (tmp_path / "mlflow.db").write_bytes(b"runs")
    with pytest.raises(FileExistsError):
        put_mlflow_store(mlflow_template, tmp_path)
    assert (tmp_path / "mlflow.db").read_bytes() == b"runs"
