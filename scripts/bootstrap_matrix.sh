#!/usr/bin/env bash
# The second runtime pair of the support matrix (README): Python 3.12 + Spark 4.0 with its
# Delta (scripts/constraints-spark40.txt), in its own venv, for `make test-matrix`.
# Idempotent like bootstrap.sh: the venv is rebuilt only when pyproject.toml or the
# constraints change (the stamp file names both digests).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
venv="${MATRIX_VENV:-.venv-py312-spark40}"
constraints="scripts/constraints-spark40.txt"
py="${MATRIX_PYTHON:-python3.12}"
# A pyenv shim named python3.12 may exist and still fail (not the selected version):
# fall back to pyenv's own 3.12 build.
if ! "$py" --version >/dev/null 2>&1; then
  py="$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | sort -V | tail -1 || true)"
fi
[ -n "$py" ] && "$py" --version >/dev/null 2>&1 || { echo "bootstrap_matrix: python3.12 is required (set MATRIX_PYTHON)" >&2; exit 1; }
command -v java >/dev/null || { echo "bootstrap_matrix: java (17) is required" >&2; exit 1; }
stamp="$venv/.bootstrap-$(cat pyproject.toml "$constraints" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -c "$constraints" -e ".[dev]"
  rm -f "$venv"/.bootstrap-* && touch "$stamp"
fi
export QUARANTINE_JAR_CACHE="${QUARANTINE_JAR_CACHE:-$here/.cache/jars}"
# The broker's jars (tests' kafka_broker) are the same for both pairs.
bash scripts/resolve_jars.sh
"$venv/bin/python" -c 'import sys, pyspark, delta; from quarantine.spark.jars import local_jars, spark_jar_dir; local_jars(); print(f"matrix: python {sys.version.split()[0]}, pyspark {pyspark.__version__}, jars -> {spark_jar_dir()}")'
