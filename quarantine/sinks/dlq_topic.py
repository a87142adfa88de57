"""A DLQ topic, as Kafka Connect writes one: quarantined records, also produced to Kafka.

With ``errors.deadletterqueue.topic.name`` set, every record the quarantine writer
made durable in the Delta table is then produced, by this error reporter
(:mod:`quarantine.errorhandling.reporter`), to that topic with its original key,
value and headers, plus Kafka Connect's error headers (``errors.deadletterqueue.
context.headers.enable``, on by default here)::

    __connect.errors.topic / .partition / .offset     where the record came from
    __connect.errors.connector.name                    the pipeline
    __connect.errors.stage                             the stage that failed it
    __connect.errors.class.name                        the stage's kind (deserialize, validate…)
    __connect.errors.exception.class.name              the error class (InvalidUtf8, range…)
    __connect.errors.exception.message                 the message (secrets masked, as in the table)
    __connect.errors.exception.stacktrace              with deadletterqueue.context.stacktrace.enable

Values are UTF-8 text, as Connect writes them. The Delta table stays the system of
record: the produce runs after the table's write, is retried under ``errors.retry.*``
(any failure retried: a Kafka producer error is transient or it is configuration), and
a produce that still fails is logged, counted in ``deadletterqueue-produce-failures``
and never fails the batch nor touches the table's row. Delivery to the topic is
at-least-once: a batch that is run again (a restart before its offsets committed, a
re-run) produces its records again, as Kafka Connect's DLQ reporter does.

Spark's Kafka sink writes it (``DataFrame.write.format("kafka")``): no Python producer,
works over Spark Connect, and the producer settings are the sink's ``kafka.*`` options.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quarantine.columns import HEADER_KEY, HEADER_VALUE, HEADERS, KEY, OFFSET, PARTITION, TOPIC, VALUE
from quarantine.errorhandling.reporter import FailedRecords, Reported
from quarantine.errorhandling.retriable import RetriableClassifier
from quarantine.errorhandling.retry import RetryWithToleranceOperator
from quarantine.errors import RetriesExhaustedError, describe_failure
from quarantine.redaction import redact_text, unlogged_jvm_calls
from quarantine.schema import HEADERS_TYPE

if TYPE_CHECKING:
    from quarantine.config import PipelineConfig

__all__ = ["CONNECT_HEADERS", "DlqTopic", "dlq_records", "dlq_topic"]

log = logging.getLogger("quarantine.sinks.dlq_topic")

#: Kafka Connect's DLQ context headers (``DeadLetterQueueReporter``), by the quarantine column each holds.
CONNECT_HEADERS: tuple[tuple[str, str], ...] = (
    ("__connect.errors.topic", TOPIC),
    ("__connect.errors.partition", PARTITION),
    ("__connect.errors.offset", OFFSET),
    ("__connect.errors.connector.name", "pipeline"),
    ("__connect.errors.stage", "stage"),
    ("__connect.errors.class.name", "kind"),
    ("__connect.errors.exception.class.name", "error_class"),
    ("__connect.errors.exception.message", "message"),
    ("__connect.errors.exception.stacktrace", "stacktrace"),
)


def dlq_records(rows: DataFrame, *, context_headers: bool = True) -> DataFrame:
    """Quarantine rows as Kafka records: ``key``, ``value``, ``headers`` (pure).

    ``rows`` has the quarantine table's columns. The original headers come first, in
    order and unchanged (NULL values kept); Connect's follow, a NULL one (no stack
    trace) left out.
    """
    original = F.coalesce(F.col(HEADERS), F.array().cast(HEADERS_TYPE))
    if not context_headers:
        return rows.select(KEY, VALUE, original.alias(HEADERS))

    def header(name: str, column: str) -> Column:
        text = F.encode(F.col(column).cast("string"), "UTF-8")
        return F.struct(F.lit(name).alias(HEADER_KEY), text.alias(HEADER_VALUE))

    added = F.filter(F.array(*[header(n, c) for n, c in CONNECT_HEADERS]), lambda h: h[HEADER_VALUE].isNotNull())
    return rows.select(KEY, VALUE, F.concat(original, added).alias(HEADERS))


@dataclass(frozen=True, repr=False)
class DlqTopic:
    """Produces quarantine rows to a Kafka topic, after the table has them.

    Attributes:
        topic: the DLQ topic.
        options: the Kafka sink's options (``kafka.bootstrap.servers``, ``kafka.*`` producer settings).
        retry: retries every failure (see :func:`dlq_topic`).
        context_headers: add Kafka Connect's ``__connect.errors.*`` headers.
        secrets: configured secret values, masked in logged errors.
    """

    topic: str
    options: Mapping[str, str]
    retry: RetryWithToleranceOperator
    context_headers: bool = True
    secrets: tuple[str, ...] = field(default=())

    def __repr__(self) -> str:  # the options may hold credentials
        return f"DlqTopic({self.topic!r})"

    def report(self, failed: FailedRecords) -> Reported:
        """Produce ``failed``'s quarantine rows to the topic (the DLQ topic's
        :class:`~quarantine.errorhandling.reporter.ErrorReporter`); never raises for Kafka's failures.

        Returns:
            The attempts made (each sends every record) and those that failed: all of them
            when it gave up (the records are in the table only), else all but the last.
        """
        rows, batch_id = failed.rows, failed.batch_id
        records = dlq_records(rows, context_headers=self.context_headers)

        def send() -> None:
            with unlogged_jvm_calls():  # the options hold credentials (JAAS, SSL keys)
                records.write.format("kafka").options(**dict(self.options)).option("topic", self.topic).save()

        try:
            _, attempts = self.retry.call(send, name=f"DLQ topic produce to {self.topic}")
        except RetriesExhaustedError as exc:
            log.warning(
                "%s",
                redact_text(
                    f"DLQ topic {self.topic}: batch {batch_id}'s quarantined records were not produced after "
                    f"{exc.attempts} attempt(s): {describe_failure(exc.last)}; they are in the quarantine "
                    "table (the system of record), counted in deadletterqueue-produce-failures",
                    self.secrets,
                ),
            )
            return Reported(produce_attempts=exc.attempts, produce_failures=exc.attempts)
        return Reported(produce_attempts=attempts, produce_failures=attempts - 1)


def dlq_topic(config: PipelineConfig) -> DlqTopic | None:
    """The DLQ topic a config asks for (``errors.deadletterqueue.topic.*``), or None."""
    errors = config.errors
    if not errors.dlq_topic_name:
        return None
    servers = errors.dlq_topic_bootstrap_servers or config.source.bootstrap_servers or ""
    options = {"kafka.bootstrap.servers": servers, **dict(errors.dlq_topic_options)}
    writes = RetryWithToleranceOperator.for_writes(errors)
    everything = RetriableClassifier.of((), lambda exc: True, include_delta=False)
    retry = RetryWithToleranceOperator(replace(writes.policy, retriable=everything), writes.tolerance)
    return DlqTopic(
        topic=errors.dlq_topic_name, options=options, retry=retry,
        context_headers=errors.dlq_context_headers_enable, secrets=config.secrets(),
    )
