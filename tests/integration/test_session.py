"""The local session the library builds: Delta on, and generated code JIT-compiled."""

from __future__ import annotations

from typing import Any


def test_the_local_jvm_jit_compiles_huge_generated_methods(spark: Any) -> None:
    # Whole-stage generated code for a pipeline's stages is over HotSpot's 8000-byte
    # limit and, once error branches are live, over C2's node limit; without these flags
    # it runs in the bytecode interpreter (session.JVM_OPTIONS).
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert {"-XX:-DontCompileHugeMethods", "-XX:MaxNodeLimit=240000", "-XX:NodeLimitFudgeFactor=8000"} <= set(args)
    assert any(a.startswith("-Dderby.system.home=") for a in args)  # the user's/defaults' options stay
