"""Error-context logging (KIP-298), one of a plan's error reporters, and secret redaction of error text.

Two jobs, both about what a person may read:

* **Error-context log lines.** With ``errors.log.enable`` (or a
  ``log_and_continue`` handler for a kind, or a kind that fails the run), each batch,
  once the quarantine table holds its failed records
  (:class:`~quarantine.errorhandling.reporter.ErrorReporter`), logs one line per failed
  record for a bounded sample — at most :data:`SAMPLE_PER_BATCH` records per
  batch, plus a line saying how many more there were — at INFO on the
  ``quarantine.errors`` logger (below Python's default WARNING, so a notebook
  shows none of them unless it asks for that logger's INFO lines): pipeline, run, batch, stage, kind, error class,
  message, attempts and the source coordinates (topic, partition, offset). The
  record's key and value — and the values stage messages quote after ``found``
  (:func:`without_found_values`) — are added only with ``errors.log.include.messages``
  (off by default: payloads may hold personal data), truncated to
  :data:`MAX_PAYLOAD_CHARS`; the (redacted) config is logged once per batch
  with ``errors.log.include.configs``. With ``errors.deadletterqueue.encryption.key`` a line
  carries no message at all (a free-text message may quote the record anywhere): the quarantine
  table keeps it encrypted, and ``include.messages`` cannot be set beside it. Stack traces are never logged; they go
  to the quarantine table, and only with
  ``errors.deadletterqueue.context.stacktrace.enable``. Each line carries a
  :class:`ContextLine` (stage, error class), so that a handler can count lines
  instead of showing them: the ``quarantine`` command's terminal does, unless
  ``--verbose`` (:class:`quarantine.command_logging.ErrorContextTally`).
* **Redaction.** Every configured secret value (:meth:`PipelineConfig.secrets`)
  and every ``password=…``-style pair is replaced by ``[redacted]`` in log
  lines (:func:`redact_text`) and, as Spark columns, in the error struct's
  ``message`` and ``stacktrace`` before they reach the quarantine table
  (:func:`redact_error`), whose ``error_history`` is built from the same struct.

Sampling reads at most :data:`SAMPLE_PER_BATCH` rows of the already-persisted
failed records (``limit`` + ``collect``); it never counts or rescans the source.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from quarantine.columns import ATTEMPTS, ERROR, ERROR_CLASS, KEY, KIND, MESSAGE, OFFSET, PARTITION, STAGE, TOPIC, VALUE
from quarantine.config import ErrorsConfig
from quarantine.errorhandling.reporter import FailedRecords, Reported
from quarantine.log_lines import CONTEXT_ATTR, LOGGER_NAME, ContextLine
from quarantine.redaction import redact_text

__all__ = [
    "MAX_PAYLOAD_CHARS",
    "SAMPLE_PER_BATCH",
    "ErrorContextLogger",
    "sample_errors",
    "without_found_values",
]

#: At most this many failed records are logged per batch.
SAMPLE_PER_BATCH = 20
#: Logged keys/values (with ``errors.log.include.messages``) are cut to this many characters.
MAX_PAYLOAD_CHARS = 256
#: Logged messages are cut to this many characters.
MAX_MESSAGE_CHARS = 1000

def sample_errors(
    failed: DataFrame,
    *,
    error: str = ERROR,
    kinds: Collection[str] | None = None,
    include_messages: bool = False,
    limit: int = SAMPLE_PER_BATCH,
) -> DataFrame:
    """At most ``limit`` failed records, shaped for logging (pure; the caller collects).

    Args:
        failed: rows with the Kafka source coordinates and an error struct column.
        error: the error struct column's name.
        kinds: only these error kinds (None: all).
        include_messages: keep ``key`` and ``value`` (else they are not selected at all).
        limit: the bound.
    """
    err = F.col(error)
    rows = failed.where(err.isNotNull())
    if kinds is not None:
        rows = rows.where(err.getField(KIND).isin(sorted(kinds)))
    cols = [
        err.getField(STAGE).alias(STAGE),
        err.getField(KIND).alias(KIND),
        err.getField(ERROR_CLASS).alias(ERROR_CLASS),
        err.getField(MESSAGE).alias(MESSAGE),
        err.getField(ATTEMPTS).alias(ATTEMPTS),
        F.col(TOPIC), F.col(PARTITION), F.col(OFFSET),
    ]
    if include_messages:
        cols += [F.col(KEY), F.col(VALUE)]
    return rows.select(*cols).limit(limit)


#: What a stage message quoted after ``found``, up to the next field's part (``; field '…``).
_FOUND = re.compile(r"(?<![\w])found (?!(?:null|no such field)(?:;|$))(?:(?!; (?:required )?field ')[\s\S])+")
#: Shown instead, in log lines without ``errors.log.include.messages``.
OMITTED = "found <omitted: errors.log.include.messages is false>"
#: Shown instead of the whole message while the quarantine table is kept encrypted.
ENCRYPTED = "<omitted: the quarantine table keeps it encrypted (errors.deadletterqueue.encryption.key)>"


def without_found_values(message: str) -> str:
    """A stage message without the record content it quoted (pure).

    Built-in stages end each part with ``expected …, found <value>`` (a JSON
    token, or a malformed record's first characters); that value is payload,
    which error-context lines show only with ``errors.log.include.messages``.
    ``found null`` and ``found no such field`` are kept. Free-text exception
    messages (a Python stage's) cannot be parsed this way; they are redacted only.
    """
    return _FOUND.sub(OMITTED, message)


def _payload(b: Any) -> str:
    if b is None:
        return "null"
    raw = bytes(b)
    text = raw.decode("utf-8", errors="backslashreplace")
    if len(text) > MAX_PAYLOAD_CHARS:
        return repr(text[:MAX_PAYLOAD_CHARS]) + f"…(+{len(text) - MAX_PAYLOAD_CHARS} chars)"
    return repr(text)


@dataclass
class ErrorContextLogger:
    """The error-context log's reporter (:class:`~quarantine.errorhandling.reporter.ErrorReporter`):
    writes error-context lines for sampled failed records; every line is redacted.

    Attributes:
        include_messages: add the record's key and value (``errors.log.include.messages``).
        include_configs: log the redacted config once per batch (``errors.log.include.configs``).
        encrypted: the quarantine table is kept encrypted: no line carries a message.
        config: the redacted config (``PipelineConfig.redacted()``).
        secrets: values to mask (``PipelineConfig.secrets()``).
        logger: where lines go.
        lines_logged: records logged so far (the ``total-errors-logged`` metric).
    """

    include_messages: bool = False
    include_configs: bool = False
    encrypted: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger(LOGGER_NAME))
    lines_logged: int = 0

    @classmethod
    def from_config(
        cls, errors: ErrorsConfig, *, config: Mapping[str, Any], secrets: tuple[str, ...]
    ) -> ErrorContextLogger:
        """The logger for a pipeline's ``errors.log.*`` keys."""
        return cls(errors.log_include_messages, errors.log_include_configs, errors.dlq_encryption_key is not None,
                   config, secrets)

    def report(self, failed: FailedRecords) -> Reported:
        """Log a bounded sample of ``failed``'s records of its ``logged_kinds`` (none: nothing is read).

        One ``limit`` + ``collect`` of the failed rows (:func:`sample_errors`), never a count.
        """
        if not failed.logged_kinds:
            return Reported()
        sample = sample_errors(
            failed.failed, error=failed.error, kinds=failed.logged_kinds, include_messages=self.include_messages
        ).collect()
        return Reported(logged=self.log_batch(
            [r.asDict() for r in sample], pipeline=failed.pipeline, run_id=failed.run_id, batch_id=failed.batch_id,
            total=failed.total,
        ))

    def log_batch(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        pipeline: str,
        run_id: str,
        batch_id: int,
        total: int | None = None,
    ) -> int:
        """Log one line per sampled record (and how many were left out).

        Args:
            rows: sampled records (see :func:`sample_errors`; ``Row.asDict()`` or mappings).
            pipeline: the pipeline's name.
            run_id: the run.
            batch_id: the micro-batch.
            total: the batch's failed records of the logged kinds, if known.

        Returns:
            The number of record lines written.
        """
        where = f"pipeline={pipeline} run={run_id} batch={batch_id}"
        if rows and self.include_configs:
            cfg = json.dumps(self.config, sort_keys=True, default=str)
            self._emit(f"error context [{where}] config={cfg}", ContextLine())
        for row in rows:
            message = str(row.get("message") or "")
            if self.encrypted:
                message = ENCRYPTED
            elif not self.include_messages:
                message = without_found_values(message)
            if len(message) > MAX_MESSAGE_CHARS:
                message = message[:MAX_MESSAGE_CHARS] + "…"
            parts = [
                f"error context [{where}]",
                f"stage={row.get('stage')}",
                f"kind={row.get('kind')}",
                f"class={row.get('error_class')}",
                f"topic={row.get(TOPIC)}",
                f"partition={row.get(PARTITION)}",
                f"offset={row.get(OFFSET)}",
                f"attempts={row.get('attempts')}",
                f"message={message!r}",
            ]
            if self.include_messages:
                parts += [f"key={_payload(row.get(KEY))}", f"value={_payload(row.get(VALUE))}"]
            self._emit(" ".join(parts), ContextLine(_text(row.get("stage")), _text(row.get("error_class"))))
        if total is not None and total > len(rows):
            self._emit(
                f"error context [{where}] {total - len(rows)} more failed record(s) not logged "
                f"(at most {SAMPLE_PER_BATCH} per batch); all are in the quarantine table",
                ContextLine(not_logged=total - len(rows)),
            )
        self.lines_logged += len(rows)
        return len(rows)

    def _emit(self, line: str, about: ContextLine) -> None:
        # INFO: a notebook (Python's default WARNING) shows none of them, the CLI counts them
        self.logger.info("%s", redact_text(line, self.secrets), extra={CONTEXT_ATTR: about})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
