"""Storage faults in words (issue 52, G): the path the JVM was refused, a damaged commit file.

The texts are what Py4J errors carry (the Java stack as text); the processes that meet the
real faults are ``tests/e2e/test_storage_faults.py``.
"""

from __future__ import annotations

from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errors import describe_failure, describe_write_failure, storage_fault

#: A MERGE's task refused a data file in the target's folder (the folder is read-only).
DENIED = (
    "An error occurred while calling o66.sql.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 39.0 failed 1 times\n"
    "Caused by: java.io.FileNotFoundException: /data/t/target/part-00000-5e11.c000.snappy.parquet "
    "(Permission denied)\n"
    "\tat java.base/java.io.FileOutputStream.open0(Native Method)\n"
    "\tat org.apache.hadoop.fs.RawLocalFileSystem.create(RawLocalFileSystem.java:629)\n"
)

#: The quarantine table's commit 2 cut mid-JSON (its checksum no longer matches).
TORN = (
    "An error occurred while calling o90.sql.\n"
    ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
    "file:///data/t/quarantine/_delta_log/00000000000000000002.json.  SQLSTATE: KD001\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(x.scala:1)\n"
    "Caused by: org.apache.hadoop.fs.ChecksumException: Checksum error: "
    "file:/data/t/quarantine/_delta_log/00000000000000000002.json at 2048 exp: -1834466858 got: -1257794610\n"
)

#: The same cut without a checksum file beside it: the JSON ends mid-value.
TORN_JSON = (
    "An error occurred while calling o73.load.\n"
    ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
    "file:///data/t/quarantine/_delta_log/00000000000000000001.json.  SQLSTATE: KD001\n"
    "Caused by: org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed "
    "records are detected in record parsing: [null,null,null].\n"
    "Caused by: com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input in VALUE_STRING\n"
    "\t... 27 more\n"
)

TABLES = {"target": "/data/t/target", "quarantine": "/data/t/quarantine"}


class _Py4JLikeError(Exception):
    """What a Py4JJavaError looks like from Python: a Java stack as text."""


def test_a_refused_path_names_the_table_and_the_path() -> None:
    line = describe_failure(_Py4JLikeError(DENIED), TABLES)
    assert line == "permission denied writing table target at /data/t/target/part-00000-5e11.c000.snappy.parquet"


def test_a_write_failure_names_the_table_from_its_action_and_says_what_to_do() -> None:
    text = describe_write_failure(_Py4JLikeError(DENIED), action="target MERGE", table="/data/t/target", batch_id=0)
    assert text.startswith("target MERGE into /data/t/target failed in batch 0: permission denied writing "
                           "table target at /data/t/target/part-00000")
    assert "o66" not in text and "grant" in text and "\n" not in text


def test_a_torn_commit_file_names_the_table_its_version_and_the_cause() -> None:
    line = describe_failure(_Py4JLikeError(TORN), TABLES)
    assert line.startswith("the commit file /data/t/quarantine/_delta_log/00000000000000000002.json of the "
                           "quarantine table at /data/t/quarantine (version 2) is damaged: Checksum error")
    assert "FAILED_READ_FILE" not in line and "\n" not in line


def test_a_commit_file_cut_mid_json_names_the_parser_s_reason() -> None:
    line = describe_failure(_Py4JLikeError(TORN_JSON), TABLES)
    assert line.startswith("the commit file /data/t/quarantine/_delta_log/00000000000000000001.json of the "
                           "quarantine table at /data/t/quarantine (version 1) is damaged: Unexpected end-of-input")


def test_other_failures_are_no_storage_fault() -> None:
    assert storage_fault(_Py4JLikeError("[CAST_INVALID_INPUT] The value 'abc' cannot be cast")) is None
    missing = "java.io.FileNotFoundException: /data/t/quarantine/_delta_log/00000000000000000002.json"
    assert storage_fault(_Py4JLikeError(missing)) is None


def test_a_storage_fault_is_never_retried_even_when_its_class_is_configured() -> None:
    classifier = RetriableClassifier.of(["java.io.FileNotFoundException", "Exception"])
    assert not classifier(_Py4JLikeError(DENIED)) and not classifier(_Py4JLikeError(TORN))
    assert classifier(_Py4JLikeError("a transient failure"))
