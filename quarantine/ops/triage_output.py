"""What the read-only commands take and print, whichever engine answers.

``inspect``, ``stats`` and ``sql`` read the quarantine table with the reads of
:mod:`quarantine.ops.reads` (DuckDB over path tables, else Spark), which give this module
plain Python rows; it owns the filter (:class:`RecordFilter`) and the
output (:func:`record_json`, :func:`print_records`, :func:`print_stats`, :func:`print_sql`).
It imports no engine.

Payloads (``key``, ``value``, header values) are shown as UTF-8 text where they decode and
as hex where they do not, with their encoding named in JSON; tables cut long values, JSON
never does. A table kept encrypted (``errors.deadletterqueue.encryption.key``) is shown through
the command's :class:`~quarantine.keyring.KeyRing`, whichever engine read it: a payload or a text
whose key is readable here is shown opened, any other as ``encrypted (N bytes)``.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from quarantine.columns import (
    ENCRYPTION_KEY_ID,
    HEADER_KEY,
    HEADER_VALUE,
    HEADERS,
    KEY,
    OFFSET,
    PARTITION,
    TIMESTAMP,
    TOPIC,
    VALUE,
    QuarantineStatus,
)
from quarantine.display import decode_bytes, gist, plain, print_json, print_table, shorten
from quarantine.errors import ConfigError
from quarantine.keyring import KeyRing, Sealed
from quarantine.sql import Query, catalogue

__all__ = [
    "ALL",
    "ENCRYPTED",
    "INSPECT_COLUMNS",
    "RecordFilter",
    "inspect_rows",
    "list_queries",
    "print_records",
    "print_sql",
    "print_stats",
    "record_json",
    "record_title",
]

#: ``--status all``: every status.
ALL = "all"

#: How many characters of a message / payload / all headers an ``inspect`` table shows.
_MESSAGE_WIDTH = 50
_PAYLOAD_WIDTH = 30
_HEADERS_WIDTH = 80

@dataclass(frozen=True)
class RecordFilter:
    """Which quarantine rows ``inspect`` shows.

    Attributes:
        pipeline: the pipeline (None: every pipeline of the table).
        status: ``open``, ``replayed``, ``discarded`` or :data:`ALL`.
        stage: only this stage (None: any).
        error_class: only this error class (None: any).
        since: only rows last seen at or after this time.
        until: only rows last seen before this time.
        limit: at most this many rows, the most recently seen first.
    """

    pipeline: str | None = None
    status: str = QuarantineStatus.OPEN.value
    stage: str | None = None
    error_class: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 20

    def __post_init__(self) -> None:
        allowed = [s.value for s in QuarantineStatus] + [ALL]
        if self.status not in allowed:
            raise ConfigError("--status", self.status, " | ".join(allowed))
        if self.limit < 1:
            raise ConfigError("--limit", self.limit, "a positive number of rows")
        if self.since and self.until and self.since >= self.until:
            raise ConfigError("--since", self.since.isoformat(), f"a time before --until ({self.until.isoformat()})")


#: A payload's ``encoding`` in JSON when it is shown encrypted (its key is not readable here).
ENCRYPTED = "encrypted"


def _payload(raw: bytes | bytearray | None, key_id: str | None, keys: KeyRing) -> dict[str, str | None]:
    opened = keys.open_bytes(raw, key_id)
    if isinstance(opened, Sealed):
        return {"text": str(opened), "encoding": ENCRYPTED}
    text, encoding = decode_bytes(opened)
    return {"text": text, "encoding": encoding}


def record_json(row: Mapping[str, Any], keys: KeyRing | None = None) -> dict[str, Any]:
    """One quarantine row as ``inspect --json`` prints it: payloads as ``{"text", "encoding"}``, nothing cut.

    A header's key is its text, or ``hex:<hex>`` when its bytes (BINARY in the reads'
    quarantine view) are not UTF-8. An encrypted payload or text is opened with ``keys`` where its key
    is readable, else shown as ``encrypted (N bytes)`` (a payload's encoding ``encrypted``).
    """
    ring = keys or KeyRing.none()
    out: dict[str, Any] = {}
    for name in ("pipeline", TOPIC, PARTITION, OFFSET, TIMESTAMP, "status", "stage", "kind",
                 "error_class", "message", "error_count", "attempts", "first_seen_at", "last_seen_at",
                 "run_id", "batch_id", "resolved_at", "resolution", ENCRYPTION_KEY_ID):
        value = row.get(name)
        out[name] = value.isoformat() if isinstance(value, dt.datetime) else value
    out["message"] = ring.open_text(out["message"])
    key_id = row.get(ENCRYPTION_KEY_ID)
    out[KEY] = _payload(row.get(KEY), key_id, ring)
    out[VALUE] = _payload(row.get(VALUE), key_id, ring)
    out[HEADERS] = [
        {HEADER_KEY: plain(h[HEADER_KEY]), HEADER_VALUE: _payload(h[HEADER_VALUE], key_id, ring)}
        for h in (row.get(HEADERS) or [])
    ]
    return out


def _shown(payload: Mapping[str, str | None]) -> str | None:
    text = payload["text"]
    if text is None:
        return None
    return shorten(text if payload["encoding"] in ("utf-8", ENCRYPTED) else f"hex:{text}", _PAYLOAD_WIDTH)


def inspect_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in records:
        headers = ", ".join(f"{h[HEADER_KEY]}={_shown(h[HEADER_VALUE])}" for h in r[HEADERS]) or None
        rows.append([
            _coordinates(r), r["status"], r["stage"], r["error_class"],
            gist(r["message"], _MESSAGE_WIDTH), r["error_count"],
            r["last_seen_at"] and dt.datetime.fromisoformat(r["last_seen_at"]),
            _shown(r[KEY]), _shown(r[VALUE]), shorten(headers, _HEADERS_WIDTH),
        ])
    return rows


def print_records(title: str, records: list[dict[str, Any]], *, out: TextIO | None = None) -> None:
    """``inspect``'s table of :func:`record_json` records: the message gets its width before the payloads."""
    print_table(title, INSPECT_COLUMNS, inspect_rows(records), out=out, first=("message",))


#: A record's coordinates in one column, as Kafka's tools write them (``orders-0@4``: topic-partition@offset):
#: three columns of their own left the message and the payloads less of the page.
INSPECT_COLUMNS = ("record", "status", "stage", "error_class", "message",
                    "failures", "last_seen_at", KEY, VALUE, HEADERS)


def _coordinates(record: Mapping[str, Any]) -> str:
    """``topic-partition@offset``; a NULL part reads ``NULL``."""
    topic, partition, offset = (("NULL" if record[c] is None else record[c]) for c in (TOPIC, PARTITION, OFFSET))
    return f"{topic}-{partition}@{offset}"




def record_title(f: RecordFilter, table: str) -> str:
    """The title of ``inspect``'s table of the rows ``f`` selects from ``table``."""
    where = f"pipeline {f.pipeline}" if f.pipeline else "every pipeline"
    return f"{f.status} records of {where} in {table} (at most {f.limit}, last seen first)"


def print_stats(tables: Mapping[str, tuple[Sequence[str], list[list[Any]]]], pipeline: str | None,
                *, as_json: bool) -> None:
    """``stats``' output: each title's ``(columns, rows)`` as a table, or all of them as one JSON document."""
    if as_json:
        print_json({title: [dict(zip(cols, row, strict=True)) for row in rows]
                    for title, (cols, rows) in tables.items()})
        return
    where = f"pipeline {pipeline}" if pipeline else "every pipeline"
    for title, (cols, rows) in tables.items():
        print_table(f"{title} ({where})", cols, rows)


def print_sql(query: Query, columns: Sequence[str], rows: list[list[Any]], limit: int, *, as_json: bool,
              keys: KeyRing | None = None) -> None:
    """``sql NAME``'s output: at most ``limit`` of ``rows`` (one more than shown says the output is cut).

    An encrypted text in a cell (a message) is opened with ``keys`` where its key is readable,
    else shown as ``encrypted (N bytes)``.
    """
    ring = keys or KeyRing.none()
    cut = len(rows) > limit
    rows = [[ring.open_text(v) if isinstance(v, str) else v for v in row] for row in rows[:limit]]
    notice = f"the first {limit:,} rows: more rows match (--limit)" if cut else None
    if as_json:
        print_json([dict(zip(columns, row, strict=True)) for row in rows])
        if notice:
            print(notice, file=sys.stderr)  # stdout stays one JSON document
        return
    print_table(f"{query.name}: {query.summary}", columns, rows)
    if notice:
        print(notice)


def list_queries(as_json: bool) -> int:
    """``quarantine sql`` without a name: the library, as a table or JSON; exit code 0."""
    queries = catalogue()
    if as_json:
        print_json([{"name": q.name, "summary": q.summary, "tables": list(q.tables),
                     "params": [{"name": p.name, "type": p.type.value, "default": p.default, "doc": p.doc,
                                 "choices": list(p.choices)}
                                for p in q.params]} for q in queries.values()])
        return 0
    print_table("the SQL library (quarantine sql NAME --conf FILE [--param NAME=VALUE ...])",
                ("name", "what it shows", "parameters"),
                [(q.name, q.summary, ", ".join(f"{p.name}={p.default}" for p in q.params))
                 for q in queries.values()])
    return 0
