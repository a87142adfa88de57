"""The support matrix: the Python and Spark versions quarantine runs on, checked at start.

* Python 3.11 and 3.12;
* Spark 4.0 (local: pyspark 4.0.4 + delta-spark 4.0.1; Databricks Runtime 17.3 LTS) and
  Spark 4.1 (local: pyspark 4.1.1 + delta-spark 4.1.0; Databricks Runtime 18.x).

A local session needs the exact pyspark whose Delta/Kafka jars ship in
``quarantine/jars.toml``; a Databricks cluster brings its own Spark, Delta and Kafka
connector, so any patch of a supported Spark line is accepted there. A runtime outside
the matrix fails with :class:`~quarantine.errors.QuarantineError` naming the version
found and the supported ones, before a session is built (local) or anything is read or
written (:meth:`quarantine.pipeline.Pipeline.from_config`).
"""

from __future__ import annotations

import os
import sys

from quarantine.errors import QuarantineError
from quarantine.spark.jars import supported_spark_versions

__all__ = ["DATABRICKS_RUNTIMES", "SUPPORTED_PYTHON", "SUPPORTED_SPARK_LINES", "check_runtime", "on_databricks"]

#: The Python versions (major, minor) quarantine supports.
SUPPORTED_PYTHON: tuple[tuple[int, int], ...] = ((3, 11), (3, 12))
#: The Spark lines (major.minor) quarantine supports, with their Delta.
SUPPORTED_SPARK_LINES: tuple[str, ...] = ("4.0", "4.1")
#: The Databricks Runtime of each Spark line (for messages and the README).
DATABRICKS_RUNTIMES: dict[str, str] = {"4.0": "17.3 LTS", "4.1": "18.x"}


def _line(version: str) -> str:
    return ".".join(version.split(".")[:2])


def on_databricks() -> bool:
    """Whether this process runs on a Databricks cluster (``$DATABRICKS_RUNTIME_VERSION`` is set)."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def _supported_text() -> str:
    local = ", ".join(f"pyspark {v}" for v in supported_spark_versions())
    spark = ", ".join(f"Spark {s} (Databricks Runtime {DATABRICKS_RUNTIMES[s]})" for s in SUPPORTED_SPARK_LINES)
    python = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_PYTHON)
    return f"supported: Python {python}; {spark}; locally {local} (docs: Getting started, Support matrix)"


def check_runtime(
    spark_version: str,
    *,
    python: tuple[int, int] | None = None,
    databricks: bool | None = None,
) -> None:
    """Refuse a runtime outside the support matrix, naming what was found and what is supported.

    Args:
        spark_version: the Spark version in use: ``pyspark.__version__`` before a local
            session starts, ``spark.version`` of a running session (a cluster's).
        python: the interpreter's (major, minor); default the running one.
        databricks: whether this is a Databricks cluster (any patch of a supported Spark
            line is accepted there); default: ``$DATABRICKS_RUNTIME_VERSION`` is set.

    Raises:
        QuarantineError: the Python version, or the Spark version, is not supported.
    """
    found_python = python or (sys.version_info.major, sys.version_info.minor)
    databricks = on_databricks() if databricks is None else databricks
    where = (
        f"Databricks Runtime {os.environ.get('DATABRICKS_RUNTIME_VERSION', '?')}, Spark {spark_version}"
        if databricks
        else f"pyspark {spark_version}"
    )
    found = f"Python {found_python[0]}.{found_python[1]} with {where}"
    if found_python not in SUPPORTED_PYTHON:
        raise QuarantineError(
            f"unsupported runtime: Python {found_python[0]}.{found_python[1]} ({found}); {_supported_text()}"
        )
    # Databricks: any patch of a supported line; locally: a pyspark whose jars ship
    supported = SUPPORTED_SPARK_LINES if databricks else supported_spark_versions()
    if (_line(spark_version) if databricks else spark_version) not in supported:
        hint = "" if databricks else '; install a supported one, e.g. pip install "spark-quarantine[local]"'
        raise QuarantineError(f"unsupported runtime: Spark {spark_version} ({found}); {_supported_text()}{hint}")
