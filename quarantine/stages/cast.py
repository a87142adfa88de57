"""``cast``: convert fields of a struct to declared Spark types, quarantining what will not convert.

Spark 4 runs in ANSI mode, where a bad ``CAST`` fails the whole job; this stage
uses ``try_cast`` (and ``try_to_timestamp`` / ``try_to_date`` when a format is
given), so a value that does not convert becomes NULL, and then reads that NULL
as a failure: **a field whose input is non-null but whose converted value is
null fails the record**. A NULL input stays NULL (use a ``checks`` stage with
``not_null`` to require it).

The result is the input struct with the converted fields replaced in place
(:meth:`Column.withField`): other fields are kept, field order is kept. Every
field that failed is named in one message, joined by ``; ``::

    field 'created_at': cannot convert "2026-13-45" to TIMESTAMP (format 'yyyy-MM-dd HH:mm:ss')

Error class: ``CastFailed``.

Options::

    columns: {created_at: TIMESTAMP, amount: "DECIMAL(10,2)"}   # field -> Spark type
    formats: {created_at: "yyyy-MM-dd HH:mm:ss"}                # DATE / TIMESTAMP fields only

A field of a nested struct is named by its path (``columns: {device.screen_w: INT}``): it is
converted in place, the struct around it kept. Failure is detected per listed field: casting a
whole struct to a struct whose inner field does not convert yields a struct holding a NULL,
which is not detected, so list the inner field by its path instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import ConfigDict, Field, model_validator

from quarantine.columns import ErrorKind
from quarantine.errors import ConfigError
from quarantine.stage import Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.values.options import (
    text_map,
)
from quarantine.values.paths import field_path, read_path, sql_path, with_path_type
from quarantine.values.spark import parse_spark_type, render_value, type_name
from quarantine.values.types import fail

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

__all__ = ["CAST_FAILED", "Cast", "FieldCast", "from_spec"]

#: The error class of every failure of this stage.
CAST_FAILED = "CastFailed"


class CastOptions(StageOptions):
    """Options of a ``cast`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "columns": {"created_at": "TIMESTAMP", "amount": "DECIMAL(10,2)"},
        "formats": {"created_at": "yyyy-MM-dd HH:mm:ss"},
    }]})

    columns: Annotated[dict[str, str], text_map("a non-empty mapping of field: value", required=True)] = Field(
        examples=[{"created_at": "TIMESTAMP", "amount": "DECIMAL(10,2)"}]
    )
    """Field (or path into nested structs: device.screen_w) to Spark type, e.g. {created_at: TIMESTAMP,
    amount: 'DECIMAL(10,2)'}."""
    formats: Annotated[dict[str, Any], text_map("a mapping of field: value", required=False)] = Field(
        {}, examples=[{"created_at": "yyyy-MM-dd HH:mm:ss"}]
    )
    """Datetime pattern per DATE/TIMESTAMP field of columns, e.g. {created_at: 'yyyy-MM-dd HH:mm:ss'}."""

    @model_validator(mode="after")
    def _formats_of_listed_columns(self) -> Self:
        for f, fmt in self.formats.items():
            if f not in self.columns:
                raise fail(f"a field listed in options.columns ({', '.join(map(str, self.columns))})",
                           at=f"formats.{f}", value=fmt)
        return self


@dataclass(frozen=True)
class FieldCast:
    """One field's conversion.

    Attributes:
        field: the struct field to convert.
        to: the target type.
        format: a datetime pattern (``yyyy-MM-dd HH:mm:ss``) for DATE/TIMESTAMP targets.
    """

    field: str
    to: DataType
    format: str | None = None

    def __post_init__(self) -> None:
        from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

        if self.format is not None and not isinstance(self.to, DateType | TimestampType | TimestampNTZType):
            raise ConfigError(
                f"formats.{self.field}",
                self.format,
                f"no format: {type_name(self.to)} is not DATE or TIMESTAMP",
            )

    def convert(self, value: Column) -> Column:
        """The converted value: NULL when ``value`` is NULL or does not convert."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DateType

        if self.format is None:
            return value.try_cast(self.to)
        text = value.cast("string")
        if isinstance(self.to, DateType):
            return F.try_to_date(text, self.format)
        parsed = F.try_to_timestamp(text, F.lit(self.format))
        return parsed.try_cast(self.to)

    def describe(self) -> str:
        """``TIMESTAMP (format 'yyyy-MM-dd')`` — the target as named in messages."""
        fmt = f" (format '{self.format}')" if self.format else ""
        return f"{type_name(self.to)}{fmt}"


@dataclass(frozen=True, repr=False)
class Cast(Stage):
    """Convert struct fields with ``try_cast``; a non-null value that turns NULL fails.

    Attributes:
        name: stage name.
        fields: the conversions, applied in this order (the struct's order is kept).
        input: the struct column or stage (default: the previous stage).
    """

    name: str
    fields: tuple[FieldCast, ...]
    input: str | None = None
    kind: ErrorKind = field(default=ErrorKind.TRANSFORM)

    deterministic = True  # pure Column expressions of the record

    def __post_init__(self) -> None:
        if not self.fields:
            raise ConfigError(f"stage {self.name}: options.columns", {}, "at least one field: TYPE")

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The input struct with each converted field (or nested field) of its target type (unknown for
        any other input)."""
        from pyspark.sql.types import StructType

        if not isinstance(input_type, StructType):
            return None
        out = input_type
        for fc in self.fields:
            out = with_path_type(out, field_path(fc.field, input_type), fc.to)
        return out

    def fields_read(self) -> tuple[tuple[str, str], ...]:
        """Each converted field, named by its ``options.columns`` key."""
        return tuple((f"options.columns.{fc.field}", fc.field) for fc in self.fields)

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql import functions as F

        input_type = ctx.type_of(value)
        result = value
        bad: list[Column] = []
        for i, fc in enumerate(self.fields):
            path = field_path(fc.field, input_type)
            original = read_path(value, path)
            # one conversion per row: the result, the failure test and the message read it
            converted = ctx.once(f"to{i}", fc.convert(original))
            result = result.withField(sql_path(path), converted)
            bad.append(
                F.when(
                    original.isNotNull() & converted.isNull(),
                    F.format_string(
                        "field '%s': cannot convert %s to %s",
                        F.lit(fc.field),
                        render_value(original),
                        F.lit(fc.describe()),
                    ),
                )
            )
        message = F.concat_ws("; ", *bad)
        failed = F.coalesce(value.isNull() | (message != F.lit("")), F.lit(True))
        null_message = F.lit("input is NULL; expected a struct")
        message = F.when(value.isNull(), null_message).otherwise(message)
        error_class = F.when(value.isNull(), F.lit("NullInput")).otherwise(F.lit(CAST_FAILED))
        return outcome(result, failed, self.error(error_class, message))


def from_spec(spec: Declaration, options: CastOptions) -> Cast:
    """The stage ``spec`` declares, from its validated options.

    Raises:
        ConfigError: an unknown type, or a format for a non-datetime type (a format for a
            field not in ``columns`` is refused by :class:`CastOptions`).
    """
    columns, formats = options.columns, options.formats
    casts: list[FieldCast] = []
    for f, t in columns.items():
        to = parse_spark_type(t, spec.key(f"options.columns.{f}"))
        fmt = formats.get(f)
        try:
            casts.append(FieldCast(str(f), to, fmt))
        except ConfigError as exc:
            raise ConfigError(spec.key(f"options.{exc.key}"), exc.value, exc.allowed) from None
    return Cast(name=spec.name, fields=tuple(casts), input=spec.input)


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "cast", CastOptions, from_spec, "Typed conversions of struct fields with try_cast and formats (transform)."
)
