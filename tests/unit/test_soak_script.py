"""The soak script's metrics-conflict fault: its janitor's row fits the metrics table, and a
fault that fails for another reason than a commit conflict fails the soak.

The soak of 2026-11-28 (stop 47) found its janitor's 153 appends all refused by
``createDataFrame`` (a row of 8 values against a schema that had gained ``run_kind``),
counted as the worker's "own failures" while the soak still exited 0.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pyspark.sql.types import _make_type_verifier

from quarantine.schema import METRICS_SCHEMA

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak_kafka.py"


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak_kafka", _SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("soak_kafka", module)
    spec.loader.exec_module(module)
    return module


def test_the_janitors_row_fits_the_metrics_schema() -> None:
    row = _soak().janitor_row(7)
    _make_type_verifier(METRICS_SCHEMA)(row)  # what createDataFrame checks: raises on a short or mistyped row
    named = dict(zip(METRICS_SCHEMA.fieldNames(), row, strict=True))
    assert named["pipeline"] == "soak-metrics-janitor" and named["batch_id"] == 7 and named["run_kind"] == "run"


def test_only_commit_conflicts_are_expected_failures_of_the_fault() -> None:
    soak = _soak()
    conflicts = {"own_failures": {"MetadataChanged": 3, "ConcurrentAppend": 1}}
    assert soak.broken_faults(conflicts) == {}
    assert soak.broken_faults({"own_failures": {"PySparkValueError": 153, "MetadataChanged": 2}}) == {
        "PySparkValueError": 153
    }
    assert soak.broken_faults({"commits": {"optimize": 1}}) == {}
