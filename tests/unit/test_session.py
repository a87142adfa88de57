"""Local session settings that need no Spark to check."""

from __future__ import annotations

import pytest

from quarantine.session import JVM_OPTIONS, _with_jvm_options


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
