"""Failure messages: which table, which batch, Spark's reason in one line, and what to do."""

from __future__ import annotations

from quarantine.errors import describe_failure, describe_write_failure, message_of

JAVA_STACK = (
    "An error occurred while calling o123.execute.\n"
    ": org.apache.spark.SparkException: [INTERNAL_ERROR] The Spark SQL phase execution failed. SQLSTATE: XX000\n"
    "\tat org.apache.spark.SparkException$.internalError(SparkException.scala:107)\n"
    "Caused by: org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] The value 'abc' of the type "
    '"STRING" cannot be cast to "INT" because it is malformed. SQLSTATE: 22018\n'
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.invalidInputInCastToNumberError(x.scala:147)\n"
)


class _Py4JLikeError(Exception):
    """What a Py4JJavaError looks like from Python: no condition, a Java stack as text."""


def test_the_cause_under_an_internal_error_is_what_the_user_reads() -> None:
    line = describe_failure(_Py4JLikeError(JAVA_STACK))
    assert line.startswith("[CAST_INVALID_INPUT] The value 'abc'")
    assert "INTERNAL_ERROR" not in line and "\tat " not in line and "SQLSTATE" not in line


def test_a_write_failure_names_table_batch_reason_and_remedy() -> None:
    text = describe_write_failure(_Py4JLikeError(JAVA_STACK), action="target MERGE", table="main.s.orders", batch_id=7)
    assert text.startswith("target MERGE into main.s.orders failed in batch 7: [CAST_INVALID_INPUT]")
    assert "schema" in text and "\n" not in text


def test_a_concurrent_write_failure_says_to_re_run() -> None:
    exc = _Py4JLikeError("io.delta.exceptions.ConcurrentAppendException: Files were added to the root of the table")
    text = describe_write_failure(exc, action="quarantine MERGE", table="/q", batch_id=0, attempts=9)
    assert "after 9 attempt(s)" in text and "another writer" in text


def test_an_exception_without_a_message_reads_as_no_message() -> None:
    assert message_of(KeyError()) == "KeyError raised with no message"


def test_a_missing_table_is_said_one_way_whoever_reads_it() -> None:
    from quarantine.errors import MissingTableError, QuarantineError

    missing = MissingTableError("quarantine", "data/q")
    assert isinstance(missing, QuarantineError)
    assert str(missing) == ("no quarantine table at data/q yet (errors.deadletterqueue.table.name); a pipeline run "
                            "creates it on its first batch")
    assert str(MissingTableError("metrics", None)) == "no metrics table: the config has no metrics.table"
