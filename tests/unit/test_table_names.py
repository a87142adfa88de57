"""Table names: one rule says what is a path, and catalog names as SQL text: back-quoted parts are one part
each, quoted once (``quarantine.table_names``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quarantine.config import parse_config
from quarantine.table_names import is_local_path, is_path, name_parts, table_ref


@pytest.mark.parametrize(("name", "parts"), [
    ("orders", ["orders"]),
    ("default.orders_t", ["default", "orders_t"]),
    ("spark_catalog.default.q_t", ["spark_catalog", "default", "q_t"]),
    ("default.`orders_t`", ["default", "orders_t"]),
    ("main.raw.`my.orders`", ["main", "raw", "my.orders"]),
    ("`main`.`raw`.`my ``odd`` orders`", ["main", "raw", "my `odd` orders"]),
])
def test_a_catalog_name_is_split_into_its_parts_with_backquotes_removed(name: str, parts: list[str]) -> None:
    assert name_parts(name) == parts


def test_a_back_quoted_part_is_quoted_once_in_sql() -> None:
    # doubling the backquotes the user wrote named another table: ```orders_t```
    assert table_ref("default.`orders_t`") == "`default`.`orders_t`"
    assert table_ref("main.raw.`my.orders`") == "`main`.`raw`.`my.orders`"
    assert table_ref("a.`x``y`") == "`a`.`x``y`"


@pytest.mark.parametrize("name", ["", "a..b", "a.", "`a"])
def test_what_is_not_a_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="table name"):
        name_parts(name)


# --------------------------------------------------------------------------- one path rule


@pytest.mark.parametrize(("name", "path", "local"), [
    ("orders", False, False),
    ("main.ops.quarantine", False, False),
    ("data/q", True, True),
    ("/mnt/q", True, True),
    ("./q", True, True),
    (".q", True, True),  # a hidden folder next to the config
    ("~/q", True, True),
    ("dbfs:q", True, False),  # a URI scheme, no slash
    ("dbfs:/mnt/q", True, False),
    ("s3://bucket/q", True, False),
    ("file:/tmp/q", True, False),
])
def test_one_rule_says_what_is_a_path_for_the_config_the_sql_and_the_engines(
    name: str, path: bool, local: bool, tmp_path: Path
) -> None:
    assert is_path(name) is path
    assert is_local_path(name) is local
    # the SQL names a path as delta.`…` (a URI kept as written), a catalog name part by part
    assert table_ref(name).startswith("delta.`") is path
    # the config reads a table key the same way: a relative path from the config's folder, a name or a URI as written
    raw = {"pipeline": "p", "source": {"format": "delta", "path": "/data/source"},
           "target": {"table": "/data/target"}, "errors": {"deadletterqueue.table.name": name},
           "stages": [{"name": "decode", "type": "decode_utf8"}]}
    kept = parse_config(raw, base_dir=str(tmp_path)).errors.dlq_table_name
    relative = local and not name.startswith(("/", "~"))
    assert kept == (os.path.normpath(os.path.join(tmp_path, name)) if relative else name)
