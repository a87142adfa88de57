#!/usr/bin/env bash
# One-time set-up on a fresh machine: a venv with the package and its dev tools,
# and the JVM jars from Maven Central. Idempotent; fast when already done.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
command -v java >/dev/null || { echo "bootstrap: java (17) is required" >&2; exit 1; }
command -v mvn >/dev/null || { echo "bootstrap: mvn is required (apt-get install maven)" >&2; exit 1; }
stamp=".venv/.bootstrap-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  # The distribution was named "quarantine" before it became spark-quarantine: a venv
  # made then keeps that one's editable hook and console script unless it goes first.
  if .venv/bin/python -m pip show -q quarantine >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -q -y quarantine
  fi
  .venv/bin/python -m pip install -q -e ".[dev,bench]"
  rm -f .venv/.bootstrap-* && touch "$stamp"
fi
export QUARANTINE_JAR_CACHE="${QUARANTINE_JAR_CACHE:-$here/.cache/jars}"
bash scripts/resolve_jars.sh
# The jars a local session downloads itself (quarantine/jars.toml), resolved now rather
# than by the first test or demo that starts Spark.
.venv/bin/python -c 'from quarantine.spark.jars import local_jars, spark_jar_dir; local_jars(); print("quarantine.spark.jars: spark ->", spark_jar_dir())'
