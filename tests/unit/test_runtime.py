"""The support matrix is checked at start: a runtime outside it is refused by name, with no Spark."""

from __future__ import annotations

import os
import re

import pytest

from quarantine.errors import QuarantineError
from quarantine.spark.jars import supported_spark_versions
from quarantine.spark.runtime import SUPPORTED_PYTHON, SUPPORTED_SPARK_LINES, check_runtime


@pytest.mark.parametrize("python", SUPPORTED_PYTHON)
@pytest.mark.parametrize("version", ["4.0.4", "4.1.1"])
def test_the_matrix_pairs_pass_locally(python: tuple[int, int], version: str) -> None:
    check_runtime(version, python=python, databricks=False)


@pytest.mark.parametrize("version", ["3.5.6", "4.1.2", "4.0.5", "4.2.0"])
def test_a_local_pyspark_without_shipped_jars_is_refused_naming_it_and_the_supported_ones(version: str) -> None:
    with pytest.raises(QuarantineError) as info:
        check_runtime(version, python=(3, 12), databricks=False)
    text = str(info.value)
    assert f"pyspark {version}" in text and "unsupported runtime" in text
    assert all(f"pyspark {v}" in text for v in supported_spark_versions())
    assert "Python 3.11, 3.12" in text and "Spark 4.0 (Databricks Runtime 17.3 LTS)" in text


@pytest.mark.parametrize("python", [(3, 10), (3, 13), (2, 7)])
def test_a_python_outside_the_matrix_is_refused_naming_it(python: tuple[int, int]) -> None:
    with pytest.raises(QuarantineError) as info:
        check_runtime("4.1.1", python=python, databricks=False)
    assert f"Python {python[0]}.{python[1]}" in str(info.value)
    assert "supported: Python 3.11, 3.12" in str(info.value)


@pytest.mark.parametrize("version", ["4.0.0", "4.0.1", "4.1.0", "4.1.3"])
def test_on_databricks_any_patch_of_a_supported_line_is_accepted(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    check_runtime(version, python=(3, 12))


@pytest.mark.parametrize(("dbr", "version"), [("16.4", "3.5.2"), ("19.0", "4.2.0")])
def test_on_databricks_another_spark_line_is_refused_naming_the_runtime(
    dbr: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", dbr)
    with pytest.raises(QuarantineError) as info:
        check_runtime(version, python=(3, 12))
    text = str(info.value)
    assert f"Databricks Runtime {dbr}, Spark {version}" in text
    assert all(f"Spark {s}" in text for s in SUPPORTED_SPARK_LINES)
    assert "pip install" not in text  # the cluster's runtime is changed in the cluster, not by pip


def test_the_running_interpreter_is_checked_by_default() -> None:
    import sys

    check_runtime("4.1.1", databricks=False)  # this suite runs on a supported Python
    assert (sys.version_info.major, sys.version_info.minor) in SUPPORTED_PYTHON


def test_get_spark_refuses_an_unsupported_pyspark_before_starting_a_session() -> None:
    """No JVM starts: the check runs on ``pyspark.__version__`` before the builder.

    In a fresh interpreter (another test of this process may hold a session), with the
    installed pyspark announcing 3.5.6.
    """
    import subprocess
    import sys

    code = (
        "import pyspark\n"
        "pyspark.__version__ = '3.5.6'\n"
        "from pyspark import SparkContext\n"
        "from quarantine.errors import QuarantineError\n"
        "from quarantine.spark.session import get_spark\n"
        "try:\n"
        "    get_spark('never-started')\n"
        "except QuarantineError as exc:\n"
        "    print(exc)\n"
        "assert SparkContext._jvm is None and SparkContext._active_spark_context is None\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DATABRICKS_RUNTIME_VERSION"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    found = r"unsupported runtime: Spark 3\.5\.6 \(Python 3\.\d+ with pyspark 3\.5\.6\); supported: "
    assert re.match(found, out.stdout)
    assert "locally pyspark 4.1.1, pyspark 4.0.4" in out.stdout
