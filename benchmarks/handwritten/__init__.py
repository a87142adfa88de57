"""Hand-written plain PySpark jobs the whole-process benchmark (``bench_process``) runs against.

Each is a small script a careful engineer writes without the library: the same local
session set-up as ``quarantine run`` (:func:`quarantine.spark.session.get_spark`, so the same
jars, settings and JVM options), the same rules for a good record as the benchmark's
quarantine config (:mod:`benchmarks.handwritten.rules`), and none of the library's
guarantees (no exactly-once re-run, no error struct, no metrics).
"""
