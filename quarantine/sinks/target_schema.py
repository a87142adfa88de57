"""The pipeline's output against the target table's schema: what changed, and whether it may be written.

Pure functions over :class:`~pyspark.sql.types.StructType` (no session, no I/O); the
target sink (:func:`quarantine.sinks.target.fit_target`) reads the table's schema, asks
:func:`compare` and :func:`check`, and adds the columns :func:`add_columns_sql` names.

What each change does (``target.schema_evolution``; README, Guarantees):

* **a new field** (top level, or a new field of a struct column): added to the table
  before the batch's writes, NULL in its older rows (``add_columns``, the default), or
  the run is refused before any write (``fail``). It is never dropped.
* **a removed field** (the table has it, the pipeline no longer makes it): kept by the
  table and written NULL in the new rows, as Delta's ``mergeSchema`` and Lakeflow's
  streaming tables do. Nothing is lost; its older rows keep their values.
* **a narrower type** (the pipeline's ``INT`` into the table's ``BIGINT`` or ``DOUBLE``,
  ``FLOAT`` into ``DOUBLE``): written, cast up; no value changes.
* **a wider type Delta's type widening takes** (the table's ``INT`` made ``BIGINT`` or
  ``DOUBLE``, ``FLOAT`` to ``DOUBLE``, ``DATE`` to ``TIMESTAMP_NTZ``): under ``add_columns`` the
  column is widened (``delta.enableTypeWidening`` turned on, a table feature its readers
  need: Delta 3.2+, Databricks Runtime 15.4+), older values unchanged; under ``fail`` refused.
* **any other type** (``INT`` to ``STRING``, ``BIGINT`` to ``INT``, or a change inside an
  array or a map): refused before any write, naming the column, both types and what to do.

Names are matched as Spark matches them by default, ignoring case; the table's spelling
is kept.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StructType,
    TimestampNTZType,
)

from quarantine.config.choices import SchemaEvolution
from quarantine.errors import SchemaMismatchError
from quarantine.tables import table_ref

__all__ = [
    "FieldChange", "SchemaChange", "add_columns_sql", "check", "compare", "lacking", "same_type", "widen_sql",
    "writes_into",
]


@dataclass(frozen=True)
class FieldChange:
    """One field that differs between the table and the pipeline's output.

    Attributes:
        path: the field's name, a nested field's dotted path (``addr.zip``), each part as the
            table spells it (the pipeline's spelling for a new field).
        table_type: its type in the table; None for a new field.
        rows_type: its type in the pipeline's output; None for a removed field.
        required: the table holds the field NOT NULL (a removed field cannot be written NULL).
    """

    path: tuple[str, ...]
    table_type: DataType | None
    rows_type: DataType | None
    required: bool = False

    @property
    def name(self) -> str:
        """The dotted path, as a person reads it."""
        return ".".join(self.path)


@dataclass(frozen=True)
class SchemaChange:
    """How the pipeline's output differs from the table (:func:`compare`); all empty: it fits as it is."""

    added: tuple[FieldChange, ...] = ()
    removed: tuple[FieldChange, ...] = ()
    retyped: tuple[FieldChange, ...] = ()
    #: columns whose type Delta's type widening can widen into the pipeline's (INT to BIGINT or DOUBLE)
    widened: tuple[FieldChange, ...] = ()


#: Integral and floating types, each writable into the ones after it in its row without loss.
_WIDER: tuple[tuple[type[DataType], ...], ...] = (
    (ByteType, ShortType, IntegerType, LongType),
    (FloatType, DoubleType),
)
#: What Delta's type widening may turn a column of each type into, besides :data:`_WIDER`
#: (``LongType`` to ``DoubleType`` is not one: a double cannot hold every long)
#: (``ALTER TABLE … ALTER COLUMN … TYPE``, with ``delta.enableTypeWidening``).
_DELTA_WIDENS: dict[type[DataType], tuple[type[DataType], ...]] = {
    ByteType: (DoubleType,), ShortType: (DoubleType,), IntegerType: (DoubleType,), DateType: (TimestampNTZType,),
}


def _plain(t: DataType) -> str:
    """A type's shape without nullability or metadata, names compared ignoring case."""
    return t.simpleString().lower()


def same_type(a: DataType, b: DataType) -> bool:
    """Whether two types are the same shape (nullability, metadata and the case of names aside)."""
    return _plain(a) == _plain(b)


def writes_into(rows: DataType, table: DataType) -> bool:
    """Whether values of type ``rows`` are written into a column of type ``table`` without loss.

    The same type, a NULL (``void``) column, or a type Delta's type widening would widen
    into ``table`` (a narrower number of the same kind, :data:`_WIDER`; an integer into a
    ``DOUBLE``; a ``DATE`` into a ``TIMESTAMP_NTZ``: :data:`_DELTA_WIDENS`). Structs are not
    judged here (:func:`compare` walks their fields).
    """
    return same_type(rows, table) or isinstance(rows, NullType) or _delta_widens(rows, table)


def _delta_widens(narrow: DataType, wide: DataType) -> bool:
    """Whether Delta's type widening turns a column of type ``narrow`` into ``wide`` (values unchanged)."""
    for row in _WIDER:
        if type(narrow) in row and type(wide) in row:
            return row.index(type(narrow)) < row.index(type(wide))
    return type(wide) in _DELTA_WIDENS.get(type(narrow), ())


def compare(table: StructType, rows: StructType) -> SchemaChange:
    """How ``rows`` (what the pipeline writes) differs from ``table`` (the target's schema).

    Struct columns are compared field by field, to any depth; a struct inside an array or
    a map is compared as a whole (a difference there is a retyped column).
    """
    added: list[FieldChange] = []
    removed: list[FieldChange] = []
    retyped: list[FieldChange] = []
    widened: list[FieldChange] = []

    def walk(t: StructType, r: StructType, at: tuple[str, ...]) -> None:
        have = {f.name.lower(): f for f in t.fields}
        made = {f.name.lower() for f in r.fields}
        for f in r.fields:
            old = have.get(f.name.lower())
            if old is None:
                added.append(FieldChange((*at, f.name), None, f.dataType))
            elif isinstance(old.dataType, StructType) and isinstance(f.dataType, StructType):
                walk(old.dataType, f.dataType, (*at, old.name))
            elif _delta_widens(old.dataType, f.dataType) and not writes_into(f.dataType, old.dataType):
                widened.append(FieldChange((*at, old.name), old.dataType, f.dataType))
            elif not writes_into(f.dataType, old.dataType):
                retyped.append(FieldChange((*at, old.name), old.dataType, f.dataType))
        removed.extend(
            FieldChange((*at, f.name), f.dataType, None, required=not f.nullable)
            for f in t.fields if f.name.lower() not in made
        )

    walk(table, rows, ())
    return SchemaChange(tuple(added), tuple(removed), tuple(retyped), tuple(widened))


def _type(t: DataType) -> str:
    return t.simpleString().upper() if not isinstance(t, StructType | ArrayType | MapType) else t.simpleString()


def check(
    change: SchemaChange, *, table: str, evolution: SchemaEvolution, always_added: Collection[str] = ()
) -> None:
    """Refuse a change the target cannot take, before any write.

    Args:
        change: :func:`compare`'s answer.
        table: the target's name (path or catalog name), for the message.
        evolution: ``target.schema_evolution``.
        always_added: top-level columns added whatever ``evolution`` says (the source
            columns a target of an older version lacks).

    Raises:
        SchemaMismatchError: a field retyped (first), a removed field the table holds NOT
            NULL, a new field of no type (``void``), or a new field under ``fail``; one line
            naming the table, the column, the table's type, the pipeline's type and what to do.
    """
    if change.retyped:
        c = change.retyped[0]
        assert c.table_type is not None and c.rows_type is not None
        others = f" ({len(change.retyped) - 1} more column(s) changed type too)" if len(change.retyped) > 1 else ""
        raise SchemaMismatchError(
            f"target {table}: column {c.name} is {_type(c.table_type)} in the table but the pipeline now makes "
            f"it {_type(c.rows_type)}{others}; nothing was written. Add a cast stage that makes {c.name} "
            f"{_type(c.table_type)} again, or write to a new target (target.table), or migrate the table "
            "yourself; target.schema_evolution only adds columns and widens numbers"
        )
    required = [c for c in change.removed if c.required]
    if required:
        c = required[0]
        assert c.table_type is not None
        raise SchemaMismatchError(
            f"target {table}: column {c.name} is {_type(c.table_type)} NOT NULL in the table but the pipeline no "
            "longer makes it; nothing was written. Make it again in the stages, write to a new target "
            f"(target.table), or drop the constraint (ALTER TABLE … ALTER COLUMN {c.name} DROP NOT NULL)"
        )
    void = [c for c in change.added if isinstance(c.rows_type, NullType)]
    if void:
        raise SchemaMismatchError(
            f"target {table}: new column {void[0].name} has no type (the pipeline makes it a NULL literal); "
            "nothing was written. Give it a type with a cast stage"
        )
    if change.widened and evolution is SchemaEvolution.FAIL:
        c = change.widened[0]
        assert c.table_type is not None and c.rows_type is not None
        raise SchemaMismatchError(
            f"target {table}: column {c.name} is {_type(c.table_type)} in the table but the pipeline now makes it "
            f"{_type(c.rows_type)} and target.schema_evolution is fail; nothing was written. Set "
            "target.schema_evolution: add_columns to widen it (Delta's type widening), widen it yourself "
            f"(ALTER TABLE {table_ref(table)} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true'), then "
            f"ALTER TABLE {table_ref(table)} ALTER COLUMN {c.name} TYPE {_type(c.rows_type)}), or add a cast stage"
        )
    new = [c for c in change.added if not (len(c.path) == 1 and c.path[0] in always_added)]
    if new and evolution is SchemaEvolution.FAIL:
        named = ", ".join(f"{c.name} {_type(c.rows_type)}" for c in new if c.rows_type is not None)
        raise SchemaMismatchError(
            f"target {table}: the pipeline makes new column(s) the table lacks ({named}) and "
            "target.schema_evolution is fail; nothing was written. Set target.schema_evolution: add_columns "
            "to add them (older rows read NULL), add them yourself (ALTER TABLE … ADD COLUMNS), or drop them "
            "from the stages' output"
        )


def _quote(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def add_columns_sql(change: SchemaChange) -> str | None:
    """The column list of ``ALTER TABLE … ADD COLUMNS (…)`` adding ``change``'s new fields (None: none).

    A nested field is added inside its struct by its dotted path, as Delta allows.
    """
    if not change.added:
        return None
    return ", ".join(
        f"{'.'.join(_quote(p) for p in c.path)} {c.rows_type.simpleString()}"
        for c in change.added
        if c.rows_type is not None
    )


def widen_sql(change: SchemaChange) -> tuple[str, ...]:
    """``ALTER TABLE … ALTER COLUMN`` clauses (``… TYPE …``) widening ``change``'s widened columns."""
    return tuple(
        f"{'.'.join(_quote(p) for p in c.path)} TYPE {c.rows_type.simpleString()}"
        for c in change.widened
        if c.rows_type is not None
    )


def lacking(table: StructType, change: SchemaChange) -> tuple[FieldChange, ...]:
    """``change``'s new and widened fields that ``table`` does not hold as the change wants them yet
    (after a concurrent writer may have made the same change)."""

    def found(schema: StructType, path: tuple[str, ...]) -> DataType | None:
        field = next((f for f in schema.fields if f.name.lower() == path[0].lower()), None)
        if field is None or len(path) == 1:
            return None if field is None else field.dataType
        return found(field.dataType, path[1:]) if isinstance(field.dataType, StructType) else None

    def done(c: FieldChange) -> bool:
        have = found(table, c.path)
        return have is not None and c.rows_type is not None and writes_into(c.rows_type, have)

    return tuple(c for c in (*change.added, *change.widened) if not done(c))
