"""Views over a quarantine table: ``<table>_open``, ``<table>_summary``, ``<table>_offsets``, ``<table>_resolved``.

Each view's query is a file in ``quarantine/sql/views/`` (:func:`quarantine.sql.view_sources`).
A view reads every pipeline of its table (filter on its ``pipeline`` column).

Where they go:

* a catalog table ``main.ops.quarantine``: next to it, ``main.ops.quarantine_open`` …;
* a path ``/data/demo/quarantine``: ``quarantine_open`` … in the session's current
  schema (the views read ``delta.`/data/demo/quarantine```, made absolute);
* with ``schema``: ``<schema>.<table>_open`` … in that (``[catalog.]schema``).

A local session without a metastore keeps its catalog in memory, so views made
there last as long as the session: create them in the session that queries them
(:func:`create_views`), or print the statements (``quarantine views --print``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quarantine.errors import ConfigError
from quarantine.sql import bind, view_sources
from quarantine.table_names import is_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["View", "create_views", "view_statements"]

_IDENT = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class View:
    """One view over a quarantine table.

    Attributes:
        name: its name as written (``main.ops.quarantine_open``, ``quarantine_open``).
        summary: what it shows.
        sql: its ``CREATE OR REPLACE VIEW`` statement.
    """

    name: str
    summary: str
    sql: str


def _base(table: str, schema: str | None) -> list[str]:
    """The name parts of the views' common prefix (without the ``_suffix``)."""
    if is_path(table):
        leaf = os.path.basename(table.rstrip("/")) or "quarantine"
        parts = [re.sub(r"\W", "_", leaf)]
    else:
        parts = table.split(".")[-1:]
    if schema is not None:
        given = schema.split(".")
        if not 1 <= len(given) <= 2 or not all(_IDENT.match(p) for p in given):
            raise ConfigError("--schema", schema, "a schema name: schema or catalog.schema")
        return [*given, *parts]
    if not is_path(table):
        return [*table.split(".")[:-1], *parts]
    return parts


def view_statements(table: str, *, schema: str | None = None) -> list[View]:
    """The views over the quarantine table ``table`` (path or catalog name), their statements built (pure).

    Raises:
        ConfigError: ``schema`` is not ``schema`` or ``catalog.schema``.
    """
    base = _base(table, schema)
    views = []
    for suffix, query in view_sources().items():
        parts = [*base[:-1], f"{base[-1]}_{suffix}"]
        body = bind(query, {}, {"quarantine": table})
        quoted = ".".join("`" + p.replace("`", "``") + "`" for p in parts)
        views.append(View(".".join(parts), query.summary, f"CREATE OR REPLACE VIEW {quoted}\nAS\n{body}"))
    return views


def create_views(spark: SparkSession, table: str, *, schema: str | None = None) -> list[View]:
    """Create (or replace) the views over ``table``; the views made (see :func:`view_statements`)."""
    views = view_statements(table, schema=schema)
    for v in views:
        spark.sql(v.sql)
    return views
