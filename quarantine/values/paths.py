"""A field named by its path: ``device.screen_w`` is the field ``screen_w`` of the struct ``device``.

Stage options that name a field of their input (a ``checks`` rule's ``column``, a ``cast``
stage's ``columns``, a ``json`` stage's ``required``) take a top-level name or a path into
nested structs, written with dots. A name that is a top-level field as written is that field,
dots and all (a JSON key may hold a dot); any other name is read as a path. A path goes
through structs only: an array's elements or a map's values have no path.

Pure: the types are Spark's, the columns are built only when a stage is applied, and a name is
shown in messages as the user wrote it (never upper-cased).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

__all__ = ["FieldPath", "field_path", "path_type", "read_path", "sql_path", "with_path_type"]

#: A field's path from its input: one name per struct it goes through.
FieldPath = tuple[str, ...]


def field_path(name: str, struct: DataType | None = None) -> FieldPath:
    """The path ``name`` names in ``struct``: the top-level field of that name when ``struct`` has one,
    else ``name``'s dot-separated parts (also when ``struct`` is not known)."""
    from pyspark.sql.types import StructType

    if isinstance(struct, StructType) and name in struct.fieldNames():
        return (name,)
    return tuple(name.split(".")) if "." in name.strip(".") else (name,)


def path_type(struct: DataType | None, path: FieldPath) -> DataType | None:
    """The type of the field at ``path`` in ``struct``; None when a step is not a struct's field
    (or ``struct`` is not known)."""
    from pyspark.sql.types import StructType

    current = struct
    for part in path:
        if not isinstance(current, StructType) or part not in current.fieldNames():
            return None
        current = current[part].dataType
    return current


def with_path_type(struct: StructType, path: FieldPath, to: DataType) -> StructType:
    """``struct`` with the field at ``path`` of type ``to`` (added at the end of its struct when absent;
    a step that is not a struct becomes one)."""
    from pyspark.sql.types import StructField, StructType

    head, rest = path[0], path[1:]
    fields = {f.name: f for f in struct.fields}
    if rest:
        inner = fields[head].dataType if head in fields else None
        inner_struct = inner if isinstance(inner, StructType) else StructType([])
        fields[head] = StructField(head, with_path_type(inner_struct, rest, to))
    else:
        fields[head] = StructField(head, to)
    return StructType(list(fields.values()))


def read_path(value: Column, path: FieldPath) -> Column:
    """The field at ``path`` of the struct column ``value`` (NULL where a struct on the way is NULL)."""
    out = value
    for part in path:
        out = out.getField(part)
    return out


def sql_path(path: FieldPath) -> str:
    """``path`` as Spark's multi-part name (each part in backticks), as :meth:`Column.withField` reads it."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in path)
