"""``--smoke`` reaches every JVM and local Spark session its benchmark starts, through the environment.

The processes a benchmark starts (``quarantine`` commands, the ``process`` arms, the
``memory`` children, ``declarative``'s Connect server) inherit ``JAVA_TOOL_OPTIONS`` (every
JVM reads it) and ``PYSPARK_SUBMIT_ARGS`` (PySpark's ``spark-submit`` of a local session
does): what ``--smoke`` sets there is what makes their JVMs cheap to start and run.
"""

from __future__ import annotations

import argparse
import os
import shlex

import pytest

from benchmarks import SMOKE_ENV, SMOKE_JVM_OPTIONS, SMOKE_SPARK_CONF, add_smoke, smoke_jvms


@pytest.fixture(autouse=True)
def _smoke_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the variables unset; they are put back as they were after it."""
    for name in SMOKE_ENV:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def _submit_conf() -> dict[str, str]:
    words = shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])
    return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--conf")


def test_smoke_sets_the_jvm_options_and_the_spark_settings_once() -> None:
    ap = argparse.ArgumentParser()
    add_smoke(ap)
    assert ap.parse_args(["--smoke"]).smoke is True
    assert os.environ["JAVA_TOOL_OPTIONS"].split() == list(SMOKE_JVM_OPTIONS)
    assert _submit_conf() == SMOKE_SPARK_CONF
    # what spark-submit runs stays the last word (PySpark's default, when none was given)
    assert shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])[-1] == "pyspark-shell"
    before = {k: os.environ[k] for k in SMOKE_ENV}
    smoke_jvms()  # a second benchmark of the same run: nothing added twice
    assert {k: os.environ[k] for k in SMOKE_ENV} == before


def test_without_smoke_nothing_is_set() -> None:
    ap = argparse.ArgumentParser()
    add_smoke(ap)
    assert ap.parse_args([]).smoke is False
    assert not set(SMOKE_ENV) & set(os.environ)


def test_smoke_keeps_what_the_caller_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1g -XX:TieredStopAtLevel=1")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=true --jars x.jar pyspark-shell")
    smoke_jvms()
    assert os.environ["JAVA_TOOL_OPTIONS"].split() == ["-Xmx1g", *SMOKE_JVM_OPTIONS]
    words = shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])
    assert words[-3:] == ["--jars", "x.jar", "pyspark-shell"]
    # a setting the caller gave is theirs; the others are added
    assert _submit_conf() == {**SMOKE_SPARK_CONF, "spark.sql.codegen.wholeStage": "true"}
