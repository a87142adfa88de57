"""Rows for people and for scripts: terminal tables (rich) and JSON.

The triage commands (``inspect``, ``stats``, ``sql``) collect a few rows and print
them with this module: :func:`print_table` as a rich table (text is printed as
given, never read as rich markup), :func:`print_json` as one JSON document.
Values are made printable by :func:`plain`: bytes decoded as UTF-8 where they
decode, else as hex (:func:`decode_bytes`); timestamps in ISO 8601.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "HEX",
    "UTF8",
    "decode_bytes",
    "fit_widths",
    "gist",
    "plain",
    "print_json",
    "print_table",
    "printable",
    "shorten",
]

#: ``decode_bytes``'s encodings.
UTF8 = "utf-8"
HEX = "hex"


def decode_bytes(raw: bytes | bytearray | None) -> tuple[str | None, str | None]:
    """``(text, encoding)`` of raw bytes: their UTF-8 text where they decode, else their hex.

    NULL is ``(None, None)``.
    """
    if raw is None:
        return None, None
    data = bytes(raw)
    try:
        return data.decode("utf-8"), UTF8
    except UnicodeDecodeError:
        return data.hex(), HEX


def shorten(text: str | None, width: int) -> str | None:
    """``text`` cut to ``width`` characters, ending in ``…`` when cut (for tables only, never JSON)."""
    if text is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


#: Where a message says the value it found (``…, found 250.0``): the part a cut must keep.
_FOUND = re.compile(r",?\s+found\s")


def _prefix(text: str, width: int) -> str:
    """At most ``width`` characters of ``text``'s beginning, ending between words where one ends
    in the second half (a single long word, or hex, is cut inside); no trailing space or comma."""
    head = text[: max(width, 0)]
    if len(head) < len(text) and text[len(head)].isalnum() and head[-1:].isalnum():  # inside a word
        space = head.rfind(" ")
        if space >= len(head) // 2:
            head = head[:space]
    return head.rstrip(" ,")


def gist(text: str | None, width: int) -> str | None:
    """``text`` in at most ``width`` characters, keeping what a person reads it for (tables only).

    Unchanged when it fits. A message that ends in the value it found (``field 'amount':
    expected between 0 and 100, found 250.0``) keeps its beginning (where it failed) and that
    end, the middle cut: ``field 'amount': expected … found 250.0``. Anything else is cut
    between words where it can, ending in ``…``. The result is never longer than ``width``.
    """
    if text is None or len(text) <= width:
        return text
    found = next(reversed(list(_FOUND.finditer(text))), None)  # the last one
    if found is not None:
        tail = text[found.end() - len("found ") :]
        head_width = width - len(tail) - len(" … ")
        if head_width >= min(12, width // 3):
            return f"{_prefix(text[: found.start()], head_width)} … {tail}"
    return _prefix(text, width - 1).rstrip(":;") + "…"


#: Characters a terminal acts on instead of showing: C0 and C1 controls, DEL, and the bidi
#: overrides and isolates that reorder what follows them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    if m[0] in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[m[0]]
    code = ord(m[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (an escape sequence's ESC, a carriage
    return, a bell, a bidi override) written as its Python escape (``\\x1b``, ``\\r``, ``\\u202e``; tables only)."""
    return _CONTROL.sub(_escape, text)


def plain(value: Any) -> Any:
    """A value of a collected Spark row as JSON-ready Python (recursively).

    bytes: the UTF-8 text, else ``"hex:<hex>"``; datetimes and dates: ISO 8601;
    decimals: float; rows: dicts; lists: lists.
    """
    if isinstance(value, bytes | bytearray):
        text, encoding = decode_bytes(value)
        return text if encoding == UTF8 else f"hex:{text}"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


#: The width a column keeps (or its whole width, when narrower) however narrow the page.
_MIN_WIDTH = 6


def fit_widths(naturals: Sequence[int], available: int) -> list[int]:
    """Column widths within ``available`` characters: narrow columns whole, the page's rest shared by the wide ones.

    Water-filling: a column narrower than an equal share of what is left keeps its
    natural width; the others split the rest equally. No column gets less than
    :data:`_MIN_WIDTH` (or its natural width when that is less), so a very narrow page
    may overflow rather than show empty columns.
    """
    widths = list(naturals)
    if sum(naturals) <= available:
        return widths
    wide = set(range(len(naturals)))
    left = available
    while wide:
        share = left // len(wide)
        fits = {i for i in wide if naturals[i] <= share}
        if not fits:
            for i in wide:
                widths[i] = max(share, min(naturals[i], _MIN_WIDTH))
            break
        for i in fits:
            left -= naturals[i]
        wide -= fits
    return widths


def _cell(value: Any) -> Text:
    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, float):
        return Text(f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}")
    if isinstance(value, dt.datetime):
        return Text(value.strftime("%Y-%m-%d %H:%M:%S"))
    if isinstance(value, int) and not isinstance(value, bool):
        return Text(f"{value:,}" if abs(value) >= 10_000 else str(value))
    shown = plain(value)
    return Text(printable(shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)))


def _fit(cell: Text, width: int) -> Text:
    """``cell`` cut to ``width`` by :func:`gist` (a message keeps the value it found), its style kept."""
    if len(cell.plain) <= width:
        return cell
    return Text(gist(cell.plain, width) or "", style=cell.style)


def _console(out: TextIO | None) -> Console:
    stream = out or sys.stdout
    # Piped output (a file, a test) gets a wide page instead of rich's 80 columns.
    width = None if stream.isatty() else 200
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    out: TextIO | None = None,
    first: Collection[str] = (),
) -> None:
    """Print ``rows`` as a table headed ``title`` (``(no rows)`` under it when empty).

    Cells are text as given (rich markup in data is printed literally), control characters
    escaped (:func:`printable`: data never moves the cursor or recolours the terminal); NULL is ``NULL``;
    timestamps to the second. Each row is one line: a cell wider than its column is cut by
    :func:`gist` (between words, a message keeping the value it found), marked ``…``. The
    columns named in ``first`` keep their whole width (up to half the page between them)
    before the others share what is left (:func:`fit_widths`).
    """
    console = _console(out)
    cells = [[_cell(v) for v in row] for row in rows]
    naturals = [max([len(name), *(len(row[i].plain) for row in cells)]) for i, name in enumerate(columns)]
    # 3 characters of border and padding per column, 1 more for the table's edge
    available = console.width - 3 * len(columns) - 1
    kept = [i for i, name in enumerate(columns) if name in first]
    reserved = {i: min(naturals[i], available // (2 * len(kept))) for i in kept}
    rest = [i for i in range(len(columns)) if i not in reserved]
    shared = dict(zip(rest, fit_widths([naturals[i] for i in rest], available - sum(reserved.values())), strict=True))
    widths = [reserved.get(i, shared.get(i, 0)) for i in range(len(columns))]
    table = Table(show_lines=False)
    for name, width in zip(columns, widths, strict=True):
        # One line per row: a cell wider than its share of the page ends in "…" (JSON has every value whole).
        table.add_column(name, overflow="ellipsis", no_wrap=True, min_width=width, max_width=width)
    for row in cells:
        table.add_row(*(_fit(cell, width) for cell, width in zip(row, widths, strict=True)))
    console.print(Text(title, style="bold"))
    console.print(table)
    if not rows:
        console.print("(no rows)")


def print_json(document: Any, *, out: TextIO | None = None) -> None:
    """Print ``document`` (made JSON-ready by :func:`plain`) as indented JSON, non-ASCII kept."""
    stream = out or sys.stdout
    stream.write(json.dumps(plain(document), indent=2, ensure_ascii=False) + "\n")
