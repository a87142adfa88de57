"""``json``: parse a JSON string against a declared schema.

Since Spark 3, ``from_json`` on malformed input returns a struct of nulls, not
NULL, so "it parsed" cannot be read off the result. This stage parses with a
hidden ``_corrupt_record`` field (PERMISSIVE mode fills it whenever the record
is malformed *or* a field has the wrong type) and, only for rows that failed,
parses again with every field as STRING to say which field was wrong and what
it held. Required fields that are absent or null fail too.

Error classes and their messages (found values are JSON tokens, so strings
appear in double quotes)::

    NullInput             input is NULL; expected a JSON object
    MalformedJson         empty value; expected a JSON object
                          malformed JSON (31 chars); expected a JSON object, found {"order_id": "A1", "amount": 1
    NotAJsonObject        expected a JSON object, found [1,2]
    SchemaMismatch        field 'amount': expected DOUBLE, found "12,50"; field 'quantity': expected INT, found 2.5
                          field 'name': expected STRING, found {"first":"a"}
    MissingRequiredField  required field 'order_id': expected a value, found no such field
    UndeclaredField       undeclared fields 'coupon', 'gift'; the schema declares order_id, amount

A STRING field takes only a JSON string (or null) by default (``strings: strict``): an
object, an array, a number or a boolean there is a SchemaMismatch, as ``"12"`` is for an
INT field. ``strings: coerce`` takes any JSON value and keeps a non-string one as its
JSON text (``{"first":"a"}``, ``12345``), Spark's ``from_json`` behaviour. Strict looks
at the first character of each top-level STRING field's text: a non-string token's text
always starts with one of a few (``{[-0-9tf"``); only rows where one does are parsed
again with those fields as VARIANT, by the same parser, so the token kind is exact. Most
strings (names, ids, emails) cost one look; a string that looks like JSON ("12345",
"2026-11-27", "{x}") costs a second parse of its record. A STRING field nested in a
struct or an array is coerced either way.

Top-level fields the schema does not declare are schema drift. By default
(``undeclared_fields: drop``) they are dropped, as ``from_json`` does, but counted: the
records that held any are the ``schema-drift-records`` metric, and the run summary names
the fields (the stage :class:`~quarantine.stage.ReportsDrift`).
``undeclared_fields: quarantine`` sends such a record to quarantine as an
``UndeclaredField`` naming them (never their values). Finding them costs a second,
lighter scan of each record's top-level keys (``json_object_keys``).

Field-level messages name the field by its path: a wrong type inside a struct is
``field 'device.screen_w': expected INT, found "wide"`` (a field inside an array's or a
map's elements is named by the array or the map). Type names keep the field names as
written (``STRUCT<os: STRING, screen_w: INT>``). ``required`` takes paths too
(``device.os``): a struct that is absent or NULL leaves its fields absent. The value
of a field whose name looks like a credential (:func:`~quarantine.redaction.is_secret_key`:
``password``, ``api_key``…) is never quoted: ``field 'password': expected INT,
found [redacted]``. Quoted payload (a malformed record's first characters) is
masked with the rest of the message on its way to the quarantine table and the
logs (:func:`~quarantine.sinks.redacted_error.redact_error`), which also catches
``"password": "…"`` inside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

from pydantic import ConfigDict, Field

from quarantine.columns import ErrorKind
from quarantine.errors import ConfigError
from quarantine.redaction import REDACTED, is_secret_key
from quarantine.stage import HIDDEN_PREFIX, Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.values.options import NAMES
from quarantine.values.paths import field_path, path_type, read_path
from quarantine.values.spark import snippet, type_name
from quarantine.values.types import TEXT, choice

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType

__all__ = ["STAGE_TYPE", "JsonOptions", "JsonParse", "Strings", "UndeclaredFields", "from_spec"]

_CORRUPT = "_corrupt_record"

#: What the JSON text ``from_json`` gives a STRING field for a token that is not a string can
#: look like: an object or an array (``{``, ``[``), a whole number literal, ``true``, ``false``,
#: a quoted or bare non-numeric number (``"NaN"``, ``NaN``, ``+Infinity``, ``-INF``…). A string's
#: text that looks like none of these ("2026-11-27", "o-17", "tomato") cannot be another token.
_NOT_STRING_LOOK = r'^(?:[{\["]|[+-]?[NI]|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$|true$|false$)'
#: Every first character a text matching :data:`_NOT_STRING_LOOK` can have (a necessary
#: condition, checked before the regex; tests/unit/test_json_string_look.py).
NOT_STRING_FIRST = tuple('{["+-NI0123456789tf')


class Strings(StrEnum):
    """``strings``: what a top-level STRING field of the schema takes."""

    STRICT = "strict"
    """Only a JSON string (or null)."""
    COERCE = "coerce"
    """Any JSON value, a non-string one as its JSON text."""


class UndeclaredFields(StrEnum):
    """``undeclared_fields``: what top-level fields the schema does not declare do."""

    DROP = "drop"
    """They are dropped (counted as drift)."""
    QUARANTINE = "quarantine"
    """A record holding any is an ``UndeclaredField`` error."""
    IGNORE = "ignore"
    """They are dropped uncounted, as Spark's ``from_json`` drops them: no second look at each
    record's keys (``json_object_keys``), and no ``schema-drift-records``."""


class JsonOptions(StageOptions):
    """Options of a ``json`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "schema": "order_id STRING, amount DOUBLE, currency STRING",
        "required": ["order_id"],
        "undeclared_fields": "quarantine",
    }]})

    schema_: Annotated[str, TEXT] = Field(alias="schema", examples=["order_id STRING, amount DOUBLE, currency STRING"])
    """The record's Spark DDL schema, e.g. 'order_id STRING, amount DOUBLE'."""
    required: Annotated[list[str], NAMES] = Field([], examples=[["order_id", "amount"], ["device.os"]])
    """Fields of the schema that must be present and non-null; a field inside a struct by its path (device.os)."""
    strings: Annotated[Strings, choice(Strings)] = Strings.STRICT
    """strict: a top-level STRING field takes only a JSON string or null (an object, array, number or
    boolean is a SchemaMismatch); coerce: any JSON value, a non-string one kept as its JSON text."""
    undeclared_fields: Annotated[UndeclaredFields, choice(UndeclaredFields)] = UndeclaredFields.DROP
    """Top-level fields the schema does not declare: drop (counted in schema-drift-records),
    quarantine (the record is an UndeclaredField error) or ignore (dropped uncounted: no second look
    at each record's keys)."""


@dataclass(frozen=True, repr=False)
class JsonParse(Stage):
    """Parse a JSON object into a struct.

    Attributes:
        name: stage name.
        schema: the declared struct (top-level fields).
        required: fields that must be present and non-null (a nested one by its path: ``device.os``).
        input: the string column or stage (default: the previous stage).
        strings: :attr:`Strings.STRICT` (a top-level STRING field takes only a JSON string or
            null; anything else is a SchemaMismatch) or :attr:`Strings.COERCE` (any JSON value,
            a non-string one as its JSON text).
        undeclared_fields: :attr:`UndeclaredFields.DROP` (top-level fields the schema does not declare
            are dropped, and counted as drift), :attr:`UndeclaredFields.QUARANTINE` (a record holding
            any is an ``UndeclaredField`` error) or :attr:`UndeclaredFields.IGNORE` (dropped uncounted).
    """

    name: str
    schema: StructType
    required: tuple[str, ...] = ()
    input: str | None = None
    strings: Strings = Strings.STRICT
    undeclared_fields: UndeclaredFields = UndeclaredFields.DROP
    kind: ErrorKind = field(default=ErrorKind.DESERIALIZE)

    deterministic = True  # pure Column expressions of the record
    reads_text = True  # JSON text: the raw bytes go through a decode_utf8 stage first

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The declared schema."""
        return self.schema

    def __post_init__(self) -> None:
        if self.strings not in tuple(Strings):
            raise ConfigError(f"stage {self.name}: options.strings", self.strings, " | ".join(Strings))
        if self.undeclared_fields not in tuple(UndeclaredFields):
            raise ConfigError(
                f"stage {self.name}: options.undeclared_fields", self.undeclared_fields, " | ".join(UndeclaredFields)
            )
        missing = _not_in(self.schema, self.required)
        if missing:
            raise ConfigError(
                f"stage {self.name}: options.required",
                missing,
                f"fields of the schema, or paths into its structs ({', '.join(self.schema.fieldNames())})",
            )

    def _strict_strings(self) -> tuple[str, ...]:
        """The top-level STRING fields parsed as VARIANT to check their token kind (strict only)."""
        from pyspark.sql.types import StringType

        if self.strings != Strings.STRICT:
            return ()
        return tuple(f.name for f in self.schema.fields if isinstance(f.dataType, StringType))

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType, VariantType

        checked = self._strict_strings()
        parse_schema = StructType([*self.schema.fields, StructField(_CORRUPT, StringType())])
        options = {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
        # one parse per row: every reference below reads the hidden column (StageContext.once)
        parsed = ctx.once("parsed", F.from_json(value, parse_schema, options))
        fields = {f.name: parsed.getField(f.name) for f in self.schema.fields}
        corrupt = parsed.getField(_CORRUPT).isNotNull()
        mismatch = corrupt
        # strings: strict. from_json gives a STRING field a non-string token's JSON text, which
        # looks like _NOT_STRING_LOOK; a JSON string may too ("12", "{x}"). Only rows
        # with such a text are parsed again, those fields as VARIANT (the same parser, so the
        # token kind is exact): most strings (names, ids, emails) cost one first-letter look.
        wrong_kind: dict[str, tuple[Column, Column]] = {}
        if checked:
            # each field's look computed once (its flag is read twice below), the regex only
            # behind a first-character look: most strings start with none of its characters
            looks = F.array(*[_looks_not_string(fields[n]) for n in checked])
            flags = ctx.once("suspect", looks)
            suspect = {n: flags.getItem(i) for i, n in enumerate(checked)}
            token_schema = StructType([StructField(n, VariantType()) for n in checked])
            tokens = ctx.once("tokens", F.when(F.array_contains(flags, True), F.from_json(value, token_schema)))
            wrong_kind = {
                n: (suspect[n] & _not_a_string(tokens.getField(n)), tokens.getField(n)) for n in checked
            }
            not_strings = ctx.once("not_strings", _any([wrong for wrong, _ in wrong_kind.values()]))
            mismatch = corrupt | not_strings
        result = F.struct(*[fields[f.name].alias(f.name) for f in self.schema.fields])
        required = {r: read_path(parsed, field_path(r, self.schema)) for r in self.required}
        missing = [F.when(required[r].isNull(), F.lit(r)) for r in self.required]
        missing_list = F.concat_ws(", ", *missing) if missing else F.lit("")
        has_missing = missing_list != F.lit("") if missing else F.lit(False)
        # the top-level keys the schema does not declare (NULL when the value is no JSON object)
        declared_names = F.array(*[F.lit(f.name) for f in self.schema.fields])
        keys = (
            F.lit(None).cast("array<string>") if self.undeclared_fields == UndeclaredFields.IGNORE
            else F.array_except(F.json_object_keys(value), declared_names)
        )
        undeclared = ctx.once("undeclared", keys)
        has_undeclared = F.coalesce(F.size(undeclared) > 0, F.lit(False))
        drifted = has_undeclared if self.undeclared_fields == UndeclaredFields.QUARANTINE else F.lit(False)
        failed = value.isNull() | parsed.isNull() | mismatch | has_missing | drifted

        # For messages only, so computed once and only for rows that failed: the variant
        # parse keeps each field's JSON token (quotes included).
        variant = ctx.once("variant", F.when(failed, F.try_parse_json(value)))
        stripped = ctx.once("stripped", F.when(failed, F.regexp_replace(value, r"^\s+", "")))
        is_empty = stripped == F.lit("")
        malformed = parsed.isNull() | variant.isNull()
        not_object = ~stripped.startswith("{")
        error_class = (
            F.when(value.isNull(), F.lit("NullInput"))
            .when(is_empty, F.lit("MalformedJson"))
            .when(variant.isNotNull() & not_object, F.lit("NotAJsonObject"))
            .when(malformed, F.lit("MalformedJson"))
            .when(mismatch, F.lit("SchemaMismatch"))
            .when(has_missing, F.lit("MissingRequiredField"))
            .otherwise(F.lit("UndeclaredField"))
        )
        message = (
            F.when(value.isNull(), F.lit("input is NULL; expected a JSON object"))
            .when(
                is_empty,
                F.format_string("empty value (%d chars of whitespace); expected a JSON object", F.length(value)),
            )
            .when(
                variant.isNotNull() & not_object,
                F.format_string("expected a JSON object, found %s", snippet(F.to_json(variant))),
            )
            .when(
                malformed,
                F.format_string(
                    "malformed JSON (%d chars); expected a JSON object, found %s",
                    F.length(value),
                    snippet(value),
                ),
            )
            .when(mismatch, self._mismatch_message(value, parsed, variant, wrong_kind, ctx))
            .when(has_missing, self._missing_message(required, variant))
            .otherwise(self._undeclared_message(undeclared))
        )
        message = F.when(is_empty & (F.length(value) == 0), F.lit("empty value; expected a JSON object")).otherwise(
            message
        )
        return outcome(result, failed, self.error(error_class, message))

    def _mismatch_message(
        self,
        value: Column,
        parsed: Column,
        variant: Column,
        wrong_kind: Mapping[str, tuple[Column, Column]],
        ctx: StageContext,
    ) -> Column:
        """Name each field whose JSON value did not convert to its declared type (or, for a
        checked STRING field, was not a JSON string)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        text_schema = StructType([StructField(f.name, StringType()) for f in self.schema.fields])
        as_text = ctx.once("as_text", F.when(parsed.getField(_CORRUPT).isNotNull(), F.from_json(value, text_schema)))

        def part(f: StructField) -> Column:
            if f.name in wrong_kind:
                wrong, token = wrong_kind[f.name]
                found = F.to_json(token)  # the token as parsed, e.g. {"first":"a"}
            else:
                wrong = as_text.getField(f.name).isNotNull() & parsed.getField(f.name).isNull()
                found = F.coalesce(F.to_json(_field(variant, f.name)), as_text.getField(f.name))
            return F.when(
                wrong,
                F.format_string(
                    "field '%s': expected %s, found %s",
                    F.lit(f.name),
                    F.lit(type_name(f.dataType)),
                    # a field named like a credential never has its value quoted
                    F.lit(REDACTED) if is_secret_key(f.name) else snippet(found),
                ),
            )

        parts = [part(f) for f in self.schema.fields]
        leaves = _nested_leaves(self.schema)
        if leaves:
            # a field inside a struct: the struct parses, the field is NULL; read again with every
            # field inside the structs as STRING (only for rows that failed) to name its path
            nested_schema = StructType([
                StructField(f.name, _as_text(f.dataType)) for f in self.schema.fields
                if isinstance(f.dataType, StructType)
            ])
            nested = ctx.once(
                "nested_text", F.when(parsed.getField(_CORRUPT).isNotNull(), F.from_json(value, nested_schema))
            )
            parts += [
                F.when(
                    read_path(nested, path).isNotNull() & read_path(parsed, path).isNull(),
                    F.format_string(
                        "field '%s': expected %s, found %s",
                        F.lit(".".join(path)),
                        F.lit(type_name(dtype)),
                        F.lit(REDACTED) if is_secret_key(path[-1])
                        else snippet(F.coalesce(F.to_json(_field(variant, *path)), read_path(nested, path))),
                    ),
                )
                for path, dtype in leaves
            ]
        joined = F.concat_ws("; ", *parts)
        return F.when(joined != "", joined).otherwise(F.lit("record does not match the declared schema"))

    def undeclared(self, column: Column) -> Column:
        """The top-level fields of this row's record the schema does not declare
        (see :class:`quarantine.stage.ReportsDrift`): NULL when none could be read."""
        from pyspark.sql import functions as F

        return F.col(f"{HIDDEN_PREFIX}{self.name}_undeclared")

    def _undeclared_message(self, undeclared: Column) -> Column:
        """``undeclared fields 'a', 'b'; the schema declares x, y`` (names only, never values)."""
        from pyspark.sql import functions as F

        # no higher-order function (transform, array_sort's comparator): one would take the whole
        # stage column out of whole-stage code generation, for every row (sort_array: no nulls here)
        quoted = F.concat(F.lit("'"), F.array_join(F.sort_array(undeclared), "', '"), F.lit("'"))
        noun = F.when(F.size(undeclared) == 1, F.lit("field")).otherwise(F.lit("fields"))
        declares = ", ".join(self.schema.fieldNames())
        return F.format_string(f"undeclared %s %s; the schema declares {declares.replace('%', '%%')}", noun, quoted)

    def _missing_message(self, required: Mapping[str, Column], variant: Column) -> Column:
        """``required field 'x': expected a value, found null`` (or ``found no such field``)."""
        from pyspark.sql import functions as F

        parts = [
            F.when(
                required[r].isNull(),
                F.when(
                    _field(variant, *field_path(r, self.schema)).isNull() & variant.isNotNull(),
                    F.lit(f"required field '{r}': expected a value, found no such field"),
                ).otherwise(F.lit(f"required field '{r}': expected a value, found null")),
            )
            for r in self.required
        ]
        return F.concat_ws("; ", *parts)


def _any(conditions: list[Column]) -> Column:
    """``c1 OR c2 OR …`` (false for none)."""
    from pyspark.sql import functions as F

    out = F.lit(False)
    for c in conditions:
        out = out | c
    return out


def _looks_not_string(text: Column) -> Column:
    """Whether a STRING field's parsed text looks like a non-string token's JSON text
    (:data:`_NOT_STRING_LOOK`); NULL for a NULL field. The regex runs only for a text whose
    first character is one of :data:`NOT_STRING_FIRST` (``AND`` stops at the first false)."""
    from pyspark.sql import functions as F

    return F.substring(text, 1, 1).isin(*NOT_STRING_FIRST) & text.rlike(_NOT_STRING_LOOK)


def _not_a_string(token: Column) -> Column:
    """Whether a field parsed as VARIANT holds a JSON value other than a string or null
    (never NULL: an absent field is not wrong)."""
    from pyspark.sql import functions as F

    return F.coalesce(
        ~F.is_variant_null(token) & (F.schema_of_variant(token) != F.lit("STRING")), F.lit(False)
    )


def _field(variant: Column, *path: str) -> Column:
    """A field of a variant at ``path`` (one name per object level), as a variant (SQL NULL when absent)."""
    from pyspark.sql import functions as F

    steps = "".join("['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']" for name in path)
    return F.try_variant_get(variant, f"${steps}", "variant")


def _not_in(schema: StructType, names: Sequence[str]) -> list[str]:
    """The ``names`` that are neither a field of ``schema`` nor a path into its structs."""
    return [r for r in names if path_type(schema, field_path(r, schema)) is None]


def _nested_leaves(t: DataType, at: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], DataType]]:
    """Every field inside the structs of ``t`` that is not a struct itself, with its path (depth two on)."""
    from pyspark.sql.types import StructType

    out: list[tuple[tuple[str, ...], DataType]] = []
    if isinstance(t, StructType):
        for f in t.fields:
            path = (*at, f.name)
            if isinstance(f.dataType, StructType):
                out += _nested_leaves(f.dataType, path)
            elif len(path) > 1:
                out.append((path, f.dataType))
    return out


def _as_text(t: DataType) -> DataType:
    """``t`` with every field inside its structs read as STRING (a struct stays a struct)."""
    from pyspark.sql.types import StringType, StructField, StructType

    if isinstance(t, StructType):
        return StructType([StructField(f.name, _as_text(f.dataType)) for f in t.fields])
    return StringType()


def _parse_schema(spec: Declaration, raw: object) -> StructType:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType, _parse_datatype_string

    from quarantine.ddl import DDLError, parse_ddl_type

    key = spec.key("options.schema")
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(key, raw, "a DDL string such as 'order_id STRING, amount DOUBLE'")
    if SparkSession.getActiveSession() is None:  # quarantine validate: no Spark
        try:
            parsed: DataType = parse_ddl_type(raw)
        except DDLError as exc:
            raise ConfigError(key, raw, f"a valid Spark DDL schema ({exc})") from None
    else:
        try:
            parsed = StructType.fromDDL(raw)
        except Exception as exc:  # pyspark raises several types; re-raise as ours
            try:
                parsed = _parse_datatype_string(raw)
            except Exception:
                raise ConfigError(key, raw, f"a valid Spark DDL schema ({type(exc).__name__}: {exc})") from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise ConfigError(key, raw, "a struct DDL with at least one field")
    return parsed


def from_spec(spec: Declaration, options: JsonOptions) -> JsonParse:
    """The stage ``spec`` declares, from its validated options.

    Raises:
        ConfigError: the schema is not a struct DDL, or a required field is not in it.
    """
    schema = _parse_schema(spec, options.schema_)
    required = options.required
    not_in = _not_in(schema, required)
    if not_in:
        raise ConfigError(
            spec.key("options.required"), not_in,
            f"fields of options.schema, or paths into its structs ({', '.join(schema.fieldNames())})",
        )
    return JsonParse(
        name=spec.name, schema=schema, required=tuple(required), input=spec.input, strings=options.strings,
        undeclared_fields=options.undeclared_fields,
    )


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType("json", JsonOptions, from_spec, "Parse JSON against a declared schema (deserialize).")
