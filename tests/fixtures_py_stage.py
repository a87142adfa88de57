"""Importable user functions for the ``python`` stage tests.

They live in a module (not in the test files) so that YAML-style dotted paths
(``tests.fixtures_py_stage.parse_amount``) resolve on the driver and on Spark's
Python workers alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import Row

__all__ = [
    "NOT_CALLABLE",
    "FailFirstCalls",
    "Recorder",
    "TransientError",
    "add_tax_vectorized",
    "always_none",
    "amount_times_quantity",
    "amount_times_quantity_vectorized",
    "as_row",
    "as_tuple",
    "enrich_forgetting_the_event",
    "enrich_new_fields",
    "enrich_new_fields_batch",
    "enrich_restating_the_event",
    "enrich_without_a_column_batch",
    "event_area",
    "flaky",
    "parse_amount",
    "parse_amount_vectorized",
    "raise_without_message",
    "shout",
    "split_name",
    "text_length",
    "text_length_batch",
    "type_of",
    "type_of_batch",
    "wrong_length_vectorized",
    "wrong_type",
]

NOT_CALLABLE = 42


class TransientError(Exception):
    """An error a retry could fix (a timeout, a 503)."""


def parse_amount(text: str) -> float:
    """``"12.5"`` → 12.5; anything else raises ValueError."""
    return float(text)


def raise_without_message(text: str) -> str:
    """Raises a LookupError with no message (Java's ``getMessage()`` null, Python's empty ``args``)."""
    raise LookupError


def parse_amount_vectorized(s: pd.Series) -> pd.Series:
    """Whole-batch ``float`` parse: one bad value makes the whole call raise."""
    return s.astype(float)


def add_tax_vectorized(s: pd.Series) -> pd.Series:
    """Amounts x 1.2; raises for the whole batch if any amount is negative."""
    if (s < 0).any():
        raise ValueError(f"negative amount in batch: {s[s < 0].tolist()}")
    return s * 1.2


def wrong_length_vectorized(s: pd.Series) -> pd.Series:
    """Drops the last element (a classic vectorized bug)."""
    return s.iloc[:-1]


def amount_times_quantity(row: dict[str, Any]) -> float:
    """Struct input in row mode: a dict per row."""
    return float(row["amount"] * row["quantity"])


def amount_times_quantity_vectorized(df: pd.DataFrame) -> pd.Series:
    """Struct input in vectorized mode: a DataFrame with one column per field."""
    return df["amount"] * df["quantity"]


def split_name(text: str) -> dict[str, str]:
    """A struct result: ``"Ada Lovelace"`` → ``{first: Ada, last: Lovelace}``."""
    first, last = text.split(" ")
    return {"first": first, "last": last}


def shout(text: str) -> str:
    """Unicode-safe upper-casing."""
    return text.upper() + "!"


def wrong_type(text: str) -> Any:
    """Declared INT but returns a string."""
    return f"not a number: {text}"


def always_none(text: str) -> None:
    """Returns None for everything."""
    return None


def flaky(text: str) -> str:
    """Raises a retriable error for ``timeout``, a plain one for ``bad``."""
    if text == "timeout":
        raise TransientError("upstream timed out after 30s")
    if text == "bad":
        raise KeyError(text)
    return text


class Recorder:
    """Appends every value it is called with to a file (one repr per line), and
    raises ValueError for ``"boom"``; used to prove which rows a stage ran on."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)

    def __call__(self, value: Any) -> str:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(repr(value) + "\n")
        if value == "boom":
            raise ValueError("boom is not allowed")
        return str(value)

    def seen(self) -> list[str]:
        """The reprs recorded so far (in no particular order across workers)."""
        p = Path(self.path)
        return p.read_text(encoding="utf-8").splitlines() if p.exists() else []


class FailFirstCalls:
    """Raises TransientError on its first ``n`` calls (per worker copy), then echoes."""

    def __init__(self, n: int) -> None:
        self.remaining = n

    def __call__(self, value: Any) -> Any:
        if self.remaining > 0:
            self.remaining -= 1
            raise TransientError(f"transient failure, {self.remaining} more to go")
        return value


def type_of(value: Any) -> str:
    """What row mode passes: the value's type name and, for a dict, its keys."""
    return type(value).__name__ + (f"[{','.join(value)}]" if isinstance(value, dict) else "")


def type_of_batch(values: Any) -> pd.Series:
    """What vectorized mode passes: the batch's type name and, for a DataFrame, its columns."""
    columns = f"[{','.join(values.columns)}]" if isinstance(values, pd.DataFrame) else ""
    return pd.Series([type(values).__name__ + columns] * len(values))


def as_row(value: dict[str, Any]) -> Any:
    """A struct result as a pyspark Row (for ``returns: "a INT, b STRING"``)."""
    return Row(a=value["a"], b=str(value["b"]))


def as_tuple(value: dict[str, Any]) -> tuple[Any, ...]:
    """A struct result as a tuple in field order (for ``returns: "a INT, b STRING"``)."""
    return (value["a"], str(value["b"]))


def enrich_new_fields(event: dict[str, Any]) -> dict[str, Any]:
    """The new fields only (for ``output: extend``); an event without a page gets an explicit None."""
    return {"section": _section(event.get("page")), "tag_count": _count(event.get("tags"))}


def _section(page: Any) -> str | None:
    return page.split("/")[1] if isinstance(page, str) and page else None


def _count(tags: Any) -> int:
    return 0 if tags is None else len(tags)


def enrich_forgetting_the_event(event: dict[str, Any]) -> dict[str, Any]:
    """The newcomer's function: the new fields, but not ``**event``, while ``returns:`` declares them all."""
    return enrich_new_fields(event)


def enrich_restating_the_event(event: dict[str, Any]) -> dict[str, Any]:
    """``{**event, …}``, and one field changed without ``returns:`` declaring it (``page`` upper-cased)."""
    out = {**event, **enrich_new_fields(event)}
    if event.get("page") == "/shop/x":
        out["page"] = "/SHOP/X"
    return out


def enrich_new_fields_batch(events: pd.DataFrame) -> pd.DataFrame:
    """Vectorized: the batch with the new columns added (``DataFrame.assign`` keeps the input's columns)."""
    return events.assign(section=events["page"].map(_section), tag_count=events["tags"].map(_count))


def enrich_without_a_column_batch(events: pd.DataFrame) -> pd.DataFrame:
    """Vectorized: a DataFrame without the ``tag_count`` column ``returns:`` declares."""
    return pd.DataFrame({"section": events["page"].map(_section)})


def event_area(event: dict[str, Any]) -> int:
    """One scalar from a struct input (for ``output: extend``: a field named after the stage)."""
    return len(event.get("tags") or [])


def text_length(record: dict[str, Any]) -> dict[str, Any]:
    """A new field and a changed one (``s`` trimmed); raises TypeError for a record whose ``s`` is NULL."""
    return {"n": len(record["s"]), "s": record["s"].strip()}


def text_length_batch(records: pd.DataFrame) -> pd.DataFrame:
    """Vectorized :func:`text_length`: NaN (a NullResult) where ``s`` is NULL."""
    return pd.DataFrame({"n": records["s"].str.len(), "s": records["s"].str.strip()})
