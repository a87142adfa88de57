"""Local session settings that need no Spark to check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quarantine.spark.session import JVM_CHATTER, JVM_OPTIONS, LOG_CONFIG, _relay, _with_jvm_options, _with_log_config


def test_the_jit_option_is_added_to_the_users_java_options() -> None:
    assert _with_jvm_options("-Dderby.system.home=/tmp/x") == (
        "-Dderby.system.home=/tmp/x -XX:-DontCompileHugeMethods -XX:MaxNodeLimit=240000 -XX:NodeLimitFudgeFactor=8000"
    )
    assert _with_jvm_options("") == " ".join(JVM_OPTIONS)


@pytest.mark.parametrize("theirs", ["-XX:+DontCompileHugeMethods", "-XX:-DontCompileHugeMethods"])
def test_a_user_who_sets_the_flag_keeps_their_value(theirs: str) -> None:
    out = _with_jvm_options(f"-Xss4m {theirs}")
    assert out.startswith(f"-Xss4m {theirs} ") and out.count("DontCompileHugeMethods") == 1


@pytest.mark.parametrize("theirs", ["-XX:MaxNodeLimit=100000", "-XX:NodeLimitFudgeFactor=3000"])
def test_a_user_who_sets_one_of_the_linked_node_limits_gets_neither_of_ours(theirs: str) -> None:
    assert _with_jvm_options(theirs) == f"{theirs} -XX:-DontCompileHugeMethods"


def test_the_jvm_starts_with_quarantines_log_config_unless_the_user_brings_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert LOG_CONFIG.is_file()
    assert _with_log_config("-Xss4m") == f"-Xss4m -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
    theirs = "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.xml"
    assert _with_log_config(theirs) == theirs
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "log4j2.properties.template").write_text("")  # a distribution's template is not a config
    assert "log4j2.configurationFile" in _with_log_config("")
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert _with_log_config("") == ""


def test_the_jvms_own_chatter_is_left_out_of_its_relayed_output_unless_verbose(tmp_path: Path) -> None:
    lines = [
        b"WARNING: Using incubator modules: jdk.incubator.vector\n",
        b"Deleted 0 files and directories in a total of 1 directories.\n",
        b"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n",
    ]
    assert [bool(JVM_CHATTER.match(line)) for line in lines] == [True, True, False]
    for keep_all, expected in ((False, lines[2]), (True, b"".join(lines))):
        src, out = tmp_path / f"in-{keep_all}", tmp_path / f"out-{keep_all}"
        src.write_bytes(b"".join(lines))
        fd = os.open(out, os.O_WRONLY | os.O_CREAT)
        try:
            with src.open("rb") as pipe:
                _relay(pipe, fd, keep_all)
        finally:
            os.close(fd)
        assert out.read_bytes() == expected


def test_a_read_only_session_starts_a_c1_only_jvm_with_small_shuffles_and_the_users_conf_on_top() -> None:
    from quarantine.spark.session import READ_ONLY_JVM_OPTIONS, _local_settings

    settings = _local_settings({"spark.sql.shuffle.partitions": "8"}, read_only=True)
    options = settings["spark.driver.extraJavaOptions"].split()
    assert set(READ_ONLY_JVM_OPTIONS) <= set(options) and not set(JVM_OPTIONS) & set(options)
    assert settings["spark.sql.shuffle.partitions"] == "8"  # the pipeline's spark.conf wins
    assert settings["spark.sql.adaptive.coalescePartitions.initialPartitionNum"] == "2"
    assert set(JVM_OPTIONS) <= set(_local_settings(None)["spark.driver.extraJavaOptions"].split())


def test_the_executors_get_the_jit_options_too_and_keep_the_users_own() -> None:
    """Under a cluster master the tasks (the stages' generated code) run in executor JVMs,
    which spark.driver.extraJavaOptions never reaches (tests/e2e/test_cluster.py failed first)."""
    from quarantine.spark.session import READ_ONLY_JVM_OPTIONS, _local_settings

    assert set(JVM_OPTIONS) <= set(_local_settings(None)["spark.executor.extraJavaOptions"].split())
    users = _local_settings({"spark.executor.extraJavaOptions": "-Dx=1 -XX:MaxNodeLimit=100000"})
    options = users["spark.executor.extraJavaOptions"].split()
    # the user's own flag wins, and its linked flag is left to HotSpot's default with it
    assert options == ["-Dx=1", "-XX:MaxNodeLimit=100000", "-XX:-DontCompileHugeMethods"]
    read_only = _local_settings(None, read_only=True)["spark.executor.extraJavaOptions"].split()
    assert read_only == list(READ_ONLY_JVM_OPTIONS)
