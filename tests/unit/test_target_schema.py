"""The pipeline's output against the target's schema, as pure functions over StructTypes (no Spark)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
)

from quarantine.config import SchemaEvolution
from quarantine.errors import SchemaMismatchError
from quarantine.sinks.target_schema import (
    FieldChange,
    SchemaChange,
    add_columns_sql,
    check,
    compare,
    lacking,
    widen_sql,
    writes_into,
)

TABLE = StructType([
    StructField("id", LongType()), StructField("name", StringType()), StructField("qty", IntegerType()),
])


def _with(*fields: StructField) -> StructType:
    return StructType([*TABLE.fields, *fields])


def test_the_same_schema_is_no_change_whatever_the_nullability_or_the_case() -> None:
    rows = StructType([
        StructField("ID", LongType(), False), StructField("name", StringType()), StructField("qty", IntegerType()),
    ])
    assert compare(TABLE, rows) == SchemaChange()


def test_a_new_field_is_added() -> None:
    change = compare(TABLE, _with(StructField("color", StringType())))
    assert change == SchemaChange(added=(FieldChange(("color",), None, StringType()),))
    assert add_columns_sql(change) == "`color` string"


def test_a_removed_field_is_said_apart_and_not_refused() -> None:
    rows = StructType(TABLE.fields[:2])
    change = compare(TABLE, rows)
    assert change.removed == (FieldChange(("qty",), IntegerType(), None),) and not change.added
    check(change, table="t", evolution=SchemaEvolution.FAIL)  # no error


def test_a_removed_field_the_table_holds_not_null_is_refused() -> None:
    table = StructType([*TABLE.fields, StructField("sku", StringType(), nullable=False)])
    with pytest.raises(SchemaMismatchError, match=r"column sku is STRING NOT NULL in the table"):
        check(compare(table, TABLE), table="t", evolution=SchemaEvolution.ADD_COLUMNS)


def test_a_new_nested_field_is_added_by_its_path() -> None:
    table = StructType([StructField("addr", StructType([StructField("city", StringType())]))])
    rows = StructType([StructField("addr", StructType([
        StructField("city", StringType()), StructField("zip", StringType()),
    ]))])
    change = compare(table, rows)
    assert [c.name for c in change.added] == ["addr.zip"]
    assert add_columns_sql(change) == "`addr`.`zip` string"
    assert lacking(table, change) == change.added
    assert lacking(rows, change) == ()  # a concurrent writer added it first


def test_a_retyped_field_is_refused_in_one_line_naming_table_column_and_both_types() -> None:
    rows = StructType([*TABLE.fields[:2], StructField("qty", StringType())])
    with pytest.raises(SchemaMismatchError) as caught:
        check(compare(TABLE, rows), table="main.sales.orders", evolution=SchemaEvolution.ADD_COLUMNS)
    text = str(caught.value)
    assert "main.sales.orders" in text and "qty is INT in the table" in text and "makes it STRING" in text
    assert "cast stage" in text and "new target" in text and "target.schema_evolution" in text
    assert "\n" not in text


def test_a_field_inside_an_array_of_structs_that_changes_is_a_retyped_column() -> None:
    table = StructType([StructField("items", ArrayType(StructType([StructField("sku", StringType())])))])
    rows = StructType([StructField("items", ArrayType(StructType([
        StructField("sku", StringType()), StructField("n", IntegerType()),
    ])))])
    assert [c.name for c in compare(table, rows).retyped] == ["items"]


@pytest.mark.parametrize(
    ("rows", "table", "ok"),
    [
        (IntegerType(), LongType(), True),
        (FloatType(), DoubleType(), True),
        (NullType(), StringType(), True),
        (LongType(), IntegerType(), False),
        (IntegerType(), StringType(), False),
        (IntegerType(), DoubleType(), True),
        (LongType(), DoubleType(), False),
        (DoubleType(), IntegerType(), False),
    ],
)
def test_only_a_number_delta_would_widen_into_the_column_is_written_into_it(
    rows: DataType, table: DataType, ok: bool
) -> None:
    assert writes_into(rows, table) is ok


@pytest.mark.parametrize(("wider", "name"), [(LongType(), "BIGINT"), (DoubleType(), "DOUBLE")])
def test_a_wider_number_delta_can_widen_is_widened_or_refused_under_fail(wider: DataType, name: str) -> None:
    rows = StructType([*TABLE.fields[:2], StructField("qty", wider)])
    change = compare(TABLE, rows)
    assert change.widened == (FieldChange(("qty",), IntegerType(), wider),) and not change.retyped
    assert widen_sql(change) == (f"`qty` TYPE {wider.simpleString()}",)
    check(change, table="t", evolution=SchemaEvolution.ADD_COLUMNS)
    with pytest.raises(SchemaMismatchError, match=rf"delta\.enableTypeWidening.*ALTER COLUMN qty TYPE {name}"):
        check(change, table="t", evolution=SchemaEvolution.FAIL)
    assert lacking(TABLE, change) == change.widened
    assert lacking(rows, change) == ()


def test_a_change_delta_cannot_widen_losslessly_is_refused() -> None:
    table = StructType([*TABLE.fields[:2], StructField("qty", LongType())])
    rows = StructType([*TABLE.fields[:2], StructField("qty", DoubleType())])
    with pytest.raises(SchemaMismatchError, match="qty is BIGINT in the table but the pipeline now makes it DOUBLE"):
        check(compare(table, rows), table="t", evolution=SchemaEvolution.ADD_COLUMNS)


def test_a_type_delta_cannot_widen_into_gives_no_widening_advice() -> None:
    rows = StructType([*TABLE.fields[:2], StructField("qty", StringType())])
    with pytest.raises(SchemaMismatchError) as caught:
        check(compare(TABLE, rows), table="t", evolution=SchemaEvolution.ADD_COLUMNS)
    assert "enableTypeWidening" not in str(caught.value)


def test_fail_refuses_new_fields_naming_them_but_not_the_source_columns_an_older_table_lacks() -> None:
    rows = _with(StructField("_source_fingerprint", LongType()))
    check(compare(TABLE, rows), table="t", evolution=SchemaEvolution.FAIL, always_added=("_source_fingerprint",))
    rows = _with(StructField("color", StringType()))
    with pytest.raises(SchemaMismatchError, match=r"color STRING.*schema_evolution is fail"):
        check(compare(TABLE, rows), table="t", evolution=SchemaEvolution.FAIL)
    check(compare(TABLE, rows), table="t", evolution=SchemaEvolution.ADD_COLUMNS)


def test_a_new_field_of_no_type_is_refused() -> None:
    with pytest.raises(SchemaMismatchError, match="no type"):
        check(compare(TABLE, _with(StructField("x", NullType()))), table="t", evolution=SchemaEvolution.ADD_COLUMNS)


def test_a_new_target_keeps_statistics_of_its_coordinates_past_deltas_32_columns() -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from quarantine.schema import TARGET_SOURCE_COLUMNS
    from quarantine.sinks.target import layout_properties

    def target(n: int, nested: int = 0) -> StructType:
        payload = [StructField(f"f{i}", StringType()) for i in range(n)]
        if nested:
            payload.append(StructField("s", StructType([StructField(f"n{i}", LongType()) for i in range(nested)])))
        return StructType(payload + list(TARGET_SOURCE_COLUMNS.fields))

    assert layout_properties(target(29)) == {}, "the offset is the 32nd leaf column"
    assert layout_properties(target(30)) == {"delta.dataSkippingNumIndexedCols": "-1"}
    assert layout_properties(target(20, nested=10)) == {"delta.dataSkippingNumIndexedCols": "-1"}, (
        "a struct's fields count one by one")
    assert layout_properties(StructType([StructField(f"f{i}", StringType()) for i in range(50)])) == {}, (
        "a target without the coordinates needs none")
