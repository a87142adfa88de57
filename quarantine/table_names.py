"""Table names as SQL text: a path or a catalog name, quoted so no name can be read as more SQL.

Pure string functions with no engine behind them: Spark's SQL (:mod:`quarantine.tables`),
the SQL library's binding (:mod:`quarantine.sql`) and the JVM-free read path
(:mod:`quarantine.ops.duck`) share them. :mod:`quarantine.tables` re-exports them.
"""

from __future__ import annotations

import os
import re

__all__ = ["has_uri_scheme", "is_local_path", "is_path", "name_parts", "quote_part", "sql_literal", "table_ref"]

#: A URI scheme such as ``dbfs:`` (two letters or more: one letter is a Windows drive).
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")


def has_uri_scheme(name: str) -> bool:
    """Whether ``name`` starts with a URI scheme: ``s3:``, ``dbfs:``, ``abfss:``, ``file:`` …"""
    return bool(_URI.match(name))


def is_path(name: str) -> bool:
    """Whether a table reference is a path rather than a catalog name: THE rule, for the config and every engine.

    A path has a ``/``, starts with ``.`` or ``~``, or starts with a URI scheme (``dbfs:x``,
    ``s3://b/t``); anything else (``orders``, ``main.ops.quarantine``) is a catalog name.
    """
    return "/" in name or name.startswith((".", "~")) or has_uri_scheme(name)


def is_local_path(name: str) -> bool:
    """Whether a table reference is a path on this machine's file system: a path without a URI scheme."""
    return is_path(name) and not has_uri_scheme(name)


def table_ref(name: str) -> str:
    """A table reference as SQL text (SQL, :meth:`DataFrame.mergeInto`): ``delta.`/abs/path``` or a quoted name.

    A local path is made absolute (``~`` expanded) first: Spark reads
    ``delta.`data/demo/quarantine``` as a table name, not a folder
    (``UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY``). A URI (``s3://…``, ``dbfs:/…``)
    is kept as given. A catalog name (``catalog.schema.table``, ``schema.table``)
    has each part quoted, so no name can be read as more SQL.
    """
    if is_path(name):
        path = name if has_uri_scheme(name) else os.path.abspath(os.path.expanduser(name))
        return "delta." + quote_part(path)
    return ".".join(quote_part(part) for part in name_parts(name))


#: One part of a catalog name: a run of characters other than ``.`` and a backquote, or
#: anything in backquotes (a doubled backquote is one), followed by a ``.`` or the end.
_NAME_PART = re.compile(r"(?:([^.`]+)|`((?:[^`]|``)+)`)(?:\.|$)")


def name_parts(name: str) -> list[str]:
    """The parts of a catalog name, back-quotes removed: ``main.raw.`my.orders``` -> ``["main", "raw", "my.orders"]``.

    Raises:
        ValueError: ``name`` is not a dot-separated list of parts (the config refuses such a name first).
    """
    parts: list[str] = []
    at = 0
    while at < len(name):
        m = _NAME_PART.match(name, at)
        if m is None or m.end() == at or (m.end() == len(name) and name.endswith(".")):
            raise ValueError(f"not a table name: {name!r}")
        parts.append(m.group(1) if m.group(1) is not None else m.group(2).replace("``", "`"))
        at = m.end()
    if not parts:
        raise ValueError("an empty table name")
    return parts


def quote_part(part: str) -> str:
    """One name part in back-quotes, a back-quote in it doubled."""
    return "`" + part.replace("`", "``") + "`"


def sql_literal(value: str | int | float) -> str:
    """``value`` as a SQL literal: numbers as such, text single-quoted with ``\\`` and ``'`` escaped.

    Raises:
        TypeError: ``value`` is a boolean (no SQL literal is meant by it here).
    """
    if isinstance(value, bool):
        raise TypeError("a boolean is not a query parameter value")
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
