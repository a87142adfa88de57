"""The read-only commands over path tables import no engine but delta-rs and DuckDB (issue 53).

``report`` and ``replay --dry-run``'s selection among them.

Each command runs in a fresh interpreter (``python -c``: the CLI's ``main``) over a Delta
table written here by delta-rs (no JVM in this tier), and the child prints the modules it
imported: none of pandas, Great Expectations or MLflow may be among them, and no JVM starts
(no SparkContext gateway, no session).

pyspark's Python modules themselves are imported still: loading the config validates its
stages against the stage table (issue 51: each stage module declares its options beside its
code, which is built on ``pyspark.sql``). Issue 53 asks for none; that remainder is open.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.support.crash import write_conf

pytestmark = pytest.mark.unit

#: Top-level packages the JVM-free path must not import.
ENGINES = ("pandas", "great_expectations", "mlflow")

_CHILD = """
import json, sys
from quarantine.cli import main
code = main(sys.argv[1:])
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
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["code"] == 0, done.stdout + done.stderr
    assert "duckdb" in report["modules"] or command[0] == "views"
    if command[0] == "report":
        assert "Plotly.newPlot(" in (tmp_path / "r.html").read_text(encoding="utf-8")
    if command[0] == "replay":
        assert done.stdout.splitlines()[0] == "replay --dry-run (nothing written): 0 open record(s) selected"
    assert not set(ENGINES) & set(report["modules"]), sorted(set(ENGINES) & set(report["modules"]))
    assert report["gateway"] is False, "a JVM was started (SparkContext's gateway)"
