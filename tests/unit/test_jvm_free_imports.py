"""The operator's quick commands import no engine they do not use (issue 53).

Each command runs in a fresh interpreter (``python -c``: the CLI's ``main``) and the child
prints the top-level packages it imported:

* ``inspect``, ``stats``, ``sql``, ``views --print``, ``report``, ``replay --dry-run``'s
  selection and ``discard --dry-run`` over path tables (a Delta table written
  here by delta-rs, no JVM in this tier) import delta-rs and DuckDB and none of pyspark (its
  Python modules included: py4j, ``pyspark.sql``), pandas, Great Expectations or MLflow.
  Loading the config validates its stages against the stage table, whose modules declare
  their options beside their Spark code: they import pyspark where they build columns or
  types, never at import (:mod:`quarantine.schema` builds its Spark types on first use).
* ``--help`` and ``--version`` import none of them either.
* ``validate`` (the demo's config, a Great Expectations suite included) imports no pandas,
  Great Expectations or MLflow and starts no JVM. It does import ``pyspark.sql.types``: it
  builds the stages, whose declared types (a cast's targets, a json schema, lineage's
  inputs) are pyspark ``DataType`` objects; that remainder of issue 53 is open.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.support.crash import write_conf

pytestmark = pytest.mark.unit

#: Top-level packages the JVM-free path must not import.
ENGINES = ("pyspark", "py4j", "pandas", "great_expectations", "mlflow")

#: What ``validate`` must not import: the engines but pyspark's Python modules (see the module doc).
NOT_IN_VALIDATE = ("pandas", "great_expectations", "mlflow")

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import json, sys
from quarantine.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # --help and --version exit through argparse
    code = exc.code
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules}),
                  "gateway": "pyspark" in sys.modules and sys.modules["pyspark"].SparkContext._gateway is not None}))
"""


def _quarantine(path: Path) -> None:
    at = dt.datetime(2026, 11, 1, 12, tzinfo=dt.UTC)
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = pa.table({
        "pipeline": ["p"], "topic": ["orders"], "partition": pa.array([0], pa.int32()), "offset": [7],
        "timestamp": pa.array([at], pa.timestamp("us", "UTC")), "key": [b"k"], "value": [b"\xff"],
        "headers": pa.array([[{"key": "trace", "value": b"1"}]], headers),
        "stage": ["decode"], "kind": ["deserialize"], "error_class": ["InvalidUtf8"], "message": ["bad"],
        "error_count": pa.array([1], pa.int32()), "status": ["open"],
        "first_seen_at": pa.array([at], pa.timestamp("us", "UTC")),
        "last_seen_at": pa.array([at], pa.timestamp("us", "UTC")),
        "resolved_at": pa.array([None], pa.timestamp("us", "UTC")), "resolution": pa.array([None], pa.string()),
        "error_history": pa.array([[{"at": at, "run_id": "r", "stage": "decode", "error_class": "InvalidUtf8",
                                     "message": "bad"}]]),
    })
    write_deltalake(str(path), table)


@pytest.mark.parametrize("command", [
    ["stats"], ["inspect", "--json"], ["sql", "top_errors"], ["sql", "open_records", "--json"], ["views", "--print"],
    ["report", "--out", "{tmp}/r.html"], ["report", "--out", "{tmp}/r.html", "--since", "2026-11-01"],
    # a selection of none: a selection of some prints itself, then starts Spark for the stages' outcomes
    ["replay", "--dry-run", "--where", "stage = 'parse' AND `offset` > 1"],
    ["discard", "--dry-run", "--where", "stage = 'decode'"],  # the selection is the whole answer
])
def test_a_read_only_command_over_path_tables_imports_no_spark_pandas_gx_or_mlflow(
    tmp_path: Path, command: list[str]
) -> None:
    _quarantine(tmp_path / "quarantine")
    conf = write_conf({
        "pipeline": "p",
        "source": {"format": "delta", "path": str(tmp_path / "source")},
        "target": {"table": str(tmp_path / "target")},
        "errors": {"deadletterqueue.table.name": str(tmp_path / "quarantine")},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }, tmp_path / "p.yml")
    at = 2 if command[0] == "sql" else 1
    args = [a.replace("{tmp}", str(tmp_path)) for a in [*command[:at], "--conf", str(conf), *command[at:]]]
    report = _run(args)
    assert "duckdb" in report["modules"] or command[0] == "views"
    if command[0] == "report":
        assert "Plotly.newPlot(" in (tmp_path / "r.html").read_text(encoding="utf-8")
    if command[0] == "replay":
        assert report["stdout"].splitlines()[0] == "replay --dry-run (nothing written): 0 open record(s) selected"
    if command[0] == "discard":
        assert report["stdout"].splitlines()[:2] == [
            "discard --dry-run (nothing written): 1 open record(s) would be discarded:",
            "           1  decode / InvalidUtf8: bad",
        ]
    assert not set(ENGINES) & set(report["modules"]), sorted(set(ENGINES) & set(report["modules"]))


@pytest.mark.parametrize("command", [["--help"], ["--version"]])
def test_help_and_version_import_no_engine(command: list[str]) -> None:
    report = _run(command)
    assert not set(ENGINES) & set(report["modules"]), sorted(set(ENGINES) & set(report["modules"]))
    assert "quarantine" in report["modules"]


def test_validate_imports_no_pandas_gx_or_mlflow_and_starts_no_jvm() -> None:
    report = _run(["validate", "--conf", "conf/orders_demo.yml"])
    assert "config ok: pipeline orders_demo" in report["stdout"]
    assert "expect_order(ExpectationStage)" in report["stdout"]  # its suite checked against the GX catalog
    assert not set(NOT_IN_VALIDATE) & set(report["modules"]), sorted(set(NOT_IN_VALIDATE) & set(report["modules"]))


def _run(args: list[str]) -> dict[str, Any]:
    """Run the CLI with ``args`` in a fresh interpreter; its exit code, modules and output.

    Asserts it exited 0 and started no JVM (no SparkContext gateway).
    """
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert report["code"] == 0, done.stdout + done.stderr
    assert report["gateway"] is False, "a JVM was started (SparkContext's gateway)"
    report["stdout"] = done.stdout
    return report
