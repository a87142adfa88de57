"""The Spark session: where it runs (the support matrix), its jars, and a local Connect server."""

__all__ = ["LOG_LEVEL_ENV"]

#: The level of a local JVM's log lines (Spark's, Delta's): ``ERROR`` unless set. It holds
#: from the JVM's start (:data:`quarantine.spark.session.LOG_CONFIG` reads it) and after
#: (``setLogLevel``). Here, not in the session's module, so that the command line sets it
#: before a command starts Spark without importing pyspark.
LOG_LEVEL_ENV = "QUARANTINE_SPARK_LOG_LEVEL"
