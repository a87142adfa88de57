"""The local session the library builds: Delta on, and generated code JIT-compiled.

And the test session's one difference from it: expressions interpreted (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any


def test_the_local_jvm_jit_compiles_huge_generated_methods(spark: Any) -> None:
    # Whole-stage generated code for a pipeline's stages is over HotSpot's 8000-byte
    # limit and, once error branches are live, over C2's node limit; without these flags
    # it runs in the bytecode interpreter (session.JVM_OPTIONS).
    args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert {"-XX:-DontCompileHugeMethods", "-XX:MaxNodeLimit=240000", "-XX:NodeLimitFudgeFactor=8000"} <= set(args)
    assert any(a.startswith("-Dderby.system.home=") for a in args)  # the user's/defaults' options stay


def test_the_local_session_builds_columns_without_sending_each_call_site_to_the_jvm(spark: Any) -> None:
    # PySpark 4's DataFrame debugging sends every Column call's Python call site to the JVM
    # (about eight Py4J round trips a call); a batch builds thousands of Columns
    # (session.LOCAL_DEFAULTS: dataFrameDebugging off, measured in benchmarks/README.md).
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()


def test_a_large_batch_is_shuffled_into_partitions_of_bounded_size(spark: Any) -> None:
    # The shuffle that makes a Delta source's coordinates unique starts at 64 partitions and
    # adaptive execution merges them to ~64 MB (here 256 KB, with its 1 MB minimum, for a
    # ~7 MB shuffle): the data, not a fixed 4 (or the test session's 2), decides how many,
    # so no partition holds a quarter of a 5M-record batch. (The values are hashes: a
    # shuffle of repeated text compresses to nothing and ends in one partition.)
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from quarantine.spark.session import LOCAL_DEFAULTS

    # the library's default, which the test session lowers to 2 for its small data (tests/conftest.py)
    initial = "spark.sql.adaptive.coalescePartitions.initialPartitionNum"
    assert LOCAL_DEFAULTS[initial] == "64"
    session_value = spark.conf.get(initial)
    spark.conf.set(initial, LOCAL_DEFAULTS[initial])
    spark.conf.set("spark.sql.adaptive.advisoryPartitionSizeInBytes", str(256 * 1024))
    try:
        df = spark.range(200_000).select(
            (F.col("id") % 1000).alias("offset"), F.sha2(F.col("id").cast("string"), 256).alias("value")
        )
        shuffled = df.withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("offset")))
        sizes = shuffled.rdd.glom().map(len).collect()
        assert sum(sizes) == 200_000
        assert 2 < len(sizes) <= 64 and max(sizes) < 200_000 / 2  # more than 2, each bounded
        small = spark.range(100).withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("id")))
        assert small.rdd.getNumPartitions() <= 2  # a small batch still ends in a few
    finally:
        spark.conf.unset("spark.sql.adaptive.advisoryPartitionSizeInBytes")
        spark.conf.set(initial, session_value)


def test_the_test_session_evaluates_interpreted_unless_the_matrix_asks_for_generated_code(spark: Any) -> None:
    # tests/conftest.py: INTERPRETED. `make test-matrix` sets QUARANTINE_TEST_CODEGEN=1
    # (tests/unit/test_tiers.py checks it does); the library's own sessions never set these.
    import os

    from quarantine.spark.session import LOCAL_DEFAULTS

    generated = os.environ.get("QUARANTINE_TEST_CODEGEN") == "1"
    assert spark.conf.get("spark.sql.codegen.wholeStage") == ("true" if generated else "false")
    assert spark.conf.get("spark.sql.codegen.factoryMode") == ("FALLBACK" if generated else "NO_CODEGEN")
    assert not {"spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode"} & set(LOCAL_DEFAULTS)
