"""Catalog names as SQL text: back-quoted parts are one part each, quoted once (``quarantine.tables``)."""

from __future__ import annotations

import pytest

from quarantine.tables import name_parts, table_ref


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
