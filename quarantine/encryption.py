"""The quarantine table's encryption at rest, as Spark columns (``errors.deadletterqueue.encryption.key``).

Two pure DataFrame functions, no Python per row:

* :func:`seal_rows` — quarantine rows (:data:`~quarantine.schema.QUARANTINE_SCHEMA`) with their
  ``key``, ``value``, header values, ``message``, ``stacktrace`` and history messages encrypted
  under the writing key, its id in ``encryption_key_id``: applied where the quarantine writer
  builds its rows (:meth:`quarantine.sinks.quarantine.QuarantineWriter.rows`), so the table, its
  Change Data Feed and the DLQ topic get the same bytes;
* :func:`open_payload` — rows read back with ``key``, ``value`` and the header values opened
  where their key is readable here (a replay runs the stages on them).

Spark's ``aes_encrypt`` in GCM mode with an IV derived from the key and the plaintext (the first
12 bytes of SHA-256 over both): the same value under the same key is the same bytes, so a
micro-batch merged again after a restart finds its message equal and changes nothing, and a
record's DLQ topic key is its table key. What it shows: that two stored values are equal,
never what they are. Layout and text form: :mod:`quarantine.keyring`. A key kept as a Databricks
secret is named in the plan by Databricks' ``secret()`` function on a Databricks cluster; any other
key is a literal of the plan (the Spark UI shows plans; the docs say so).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from quarantine.columns import (
    ENCRYPTION_KEY_ID,
    ERROR_HISTORY,
    HEADER_VALUE,
    HEADERS,
    KEY,
    MESSAGE,
    QUARANTINE_FINGERPRINT,
    STACKTRACE,
    VALUE,
)
from quarantine.keyring import SEALED_TEXT_PREFIX, KeyRing
from quarantine.secret_reference import ReferenceKind, SecretReference
from quarantine.spark.runtime import on_databricks
from quarantine.table_names import sql_literal

__all__ = ["open_payload", "seal_rows", "unreadable"]

#: The IV's length in Spark's GCM layout (bytes of the SHA-256 taken).
_IV_BYTES = 12
#: :func:`seal_rows`' column holding the sealed message between its two projections.
_SEALED_MESSAGE = "__q_sealed_message"


def _key(keys: KeyRing, key_id: str) -> Column:
    """The AES key ``key_id`` as a column: Databricks' ``secret()`` for a Databricks secret on a
    cluster (its value stays out of the plan), else the key's bytes as a literal."""
    ref = SecretReference.parse(keys.references[key_id])
    if ref.kind is ReferenceKind.DATABRICKS and on_databricks():
        return F.expr(f"CAST(secret({sql_literal(ref.scope)}, {sql_literal(ref.name)}) AS BINARY)")
    return F.lit(keys.keys[key_id])


def _seal(data: Column, key: Column) -> Column:
    """``data`` (BINARY) encrypted: Spark's AES-GCM under an IV derived from ``key`` and ``data``."""
    iv = F.substring(F.unhex(F.sha2(F.concat(key, data), 256)), 1, _IV_BYTES)
    return F.aes_encrypt(data, key, F.lit("GCM"), F.lit("DEFAULT"), iv)


def seal_rows(rows: DataFrame, keys: KeyRing, *, fingerprint: Column) -> DataFrame:
    """Quarantine rows with everything a record carried encrypted under ``keys``' writing key (pure).

    ``key``, ``value`` and each header's ``value`` are encrypted bytes; ``message``,
    ``stacktrace`` and the ``error_history`` entry's ``message`` are
    ``encrypted:<key id>:<base64>`` (:mod:`quarantine.keyring`); ``encryption_key_id`` names the
    key; header keys, coordinates, stage, kind, error class, status and times stay as they are.
    NULL stays NULL, an empty value is an encrypted empty value. Rows without a writing key
    (no ``errors.deadletterqueue.encryption.key``) are returned as they are.

    Two projections: the sealed message is computed once and used twice (the row's and its history
    entry's), so Spark keeps the projection computing it apart from the one using it. The first,
    code-generated, seals key, value and message (the costly expressions) and stays under the size
    the JVM compiles a method at (8,000 bytes of bytecode). The second holds the header values'
    ``transform``, a higher-order function that is never code-generated, so that projection is
    interpreted; the stack trace's sealing and the rows' cheap shaping (columns, literals, casts)
    land there too. One projection holding all of it took about twice the CPU
    (benchmarks/README.md, issue 63).

    Args:
        rows: quarantine rows as :func:`quarantine.sinks.quarantine.quarantine_rows` shapes them,
            plaintext: one ``error_history`` entry, whose message is the row's ``message``.
        keys: the pipeline's keys.
        fingerprint: the record's fingerprint as the row must keep it, computed from the plaintext
            (:func:`quarantine.sinks.quarantine.stored_fingerprint`): identity holds under encryption.

    Raises:
        ConfigError: a writing key is configured and this process cannot read it (:meth:`KeyRing.sealing`).
    """
    sealing = keys.sealing()
    if sealing is None:
        return rows
    key_id, _ = sealing
    key = _key(keys, key_id)

    def text(t: Column) -> Column:
        # base64 as one line: Spark's breaks it every 76 characters (MIME) unless a legacy setting says not
        b64 = F.replace(F.base64(_seal(F.encode(t, "UTF-8"), key)), F.lit("\r\n"), F.lit(""))
        return F.concat(F.lit(f"{SEALED_TEXT_PREFIX}{key_id}:"), b64)

    sealed = rows.withColumns({
        _SEALED_MESSAGE: text(F.col(MESSAGE)),
        KEY: _seal(F.col(KEY), key),
        VALUE: _seal(F.col(VALUE), key),
        QUARANTINE_FINGERPRINT: fingerprint,
        ENCRYPTION_KEY_ID: F.lit(key_id),
    })
    message = F.col(_SEALED_MESSAGE)
    return sealed.withColumns({
        MESSAGE: message,
        ERROR_HISTORY: F.array(F.col(ERROR_HISTORY)[0].withField(MESSAGE, message)),
        HEADERS: F.transform(F.col(HEADERS), lambda h: h.withField(HEADER_VALUE, _seal(h[HEADER_VALUE], key))),
        STACKTRACE: text(F.col(STACKTRACE)),
    }).drop(_SEALED_MESSAGE)


def unreadable(keys: KeyRing) -> Column:
    """True for a quarantine row holding bytes encrypted under a key ``keys`` cannot open here (a row
    ``maintain`` stripped keeps its key id, and no bytes)."""
    kid = F.col(ENCRYPTION_KEY_ID)
    held = F.col(KEY).isNotNull() | F.col(VALUE).isNotNull() | F.col(HEADERS).isNotNull()
    return held & kid.isNotNull() & (~kid.isin(*sorted(keys.keys)) if keys.keys else F.lit(True))


def open_payload(rows: DataFrame, keys: KeyRing) -> DataFrame:
    """Quarantine rows with ``key``, ``value`` and the header values opened where ``keys`` can (pure).

    A row whose key is readable here gets its plaintext and ``encryption_key_id`` NULL; a row
    stored as read is as it was; a row under a key not readable here keeps its encrypted bytes
    and its key id (:func:`unreadable` finds them: a replay refuses them before it writes). A
    table written before the column existed holds no encrypted row.
    """
    if ENCRYPTION_KEY_ID not in rows.columns or not keys.keys:
        return rows
    kid = F.col(ENCRYPTION_KEY_ID)

    def opened(data: Column) -> Column:
        out = F.when(kid.isNull(), data)
        for key_id in sorted(keys.keys):
            out = out.when(kid == F.lit(key_id), F.aes_decrypt(data, _key(keys, key_id), F.lit("GCM")))
        return out.otherwise(data)

    return rows.withColumns({
        KEY: opened(F.col(KEY)),
        VALUE: opened(F.col(VALUE)),
        HEADERS: F.transform(F.col(HEADERS), lambda h: h.withField(HEADER_VALUE, opened(h[HEADER_VALUE]))),
        ENCRYPTION_KEY_ID: F.when(~kid.isin(*sorted(keys.keys)), kid),
    })
