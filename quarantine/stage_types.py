"""The stage types: one table mapping a ``type:`` to its options model and its factory.

:data:`STAGE_TYPES` is the only list of stage types. Each :class:`StageType` holds the
model of the type's ``options:`` (what the JSON Schema shows an editor, and what
:func:`quarantine.config.load_config` checks when it loads a config: the option names,
their shapes, and that a file an option names exists) and the factory that builds a
stage from those validated options. What needs Spark, GX or user code — that a type
name is a Spark type, that a regex compiles on the JVM, that a function imports, that a
suite's expectations are known to GX — is checked by the factory when the stages are
built (:func:`quarantine.stages.build_stages`, which ``quarantine validate`` runs), still
before anything is read or written.

A new stage type is its options model, its factory and one :func:`register_stage_type`
call (the built-ins are registered at the end of this module).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Union

from pydantic import BaseModel, ConfigDict, Field, Tag, create_model

from quarantine._config_types import (
    BOOL,
    IDENTIFIER,
    OPTIONAL_TEXT,
    TEXT,
    integer,
)
from quarantine._option_types import (
    BOUND,
    CREDENTIAL,
    EXCEPTIONS,
    FIELD,
    MODULE_FOLDER,
    NAMES,
    ON_BREACH,
    REGISTRY_URL,
    SUBJECTS,
    SUITE,
    VALUES,
    WIRE_FORMAT,
    const,
    existing,
    folder_or,
    lowered,
    tagged,
    text_map,
)

__all__ = [
    "CHECKS",
    "RULE_DECLARATIONS",
    "STAGE_TYPES",
    "AvroOptions",
    "CastOptions",
    "ChecksOptions",
    "DecodeUtf8Options",
    "ExpectationOptions",
    "Factory",
    "JsonOptions",
    "ProtobufOptions",
    "PythonOptions",
    "RegistryOptions",
    "StageOptions",
    "StageType",
    "register_stage_type",
    "stage_declaration",
    "unregister_stage_type",
]

class StageOptions(BaseModel):
    """The base of a stage type's options model: frozen, unknown keys refused, attribute docstrings
    as the JSON Schema's descriptions."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


# --------------------------------------------------------------------------- options per stage type


class DecodeUtf8Options(StageOptions):
    """Options of a ``decode_utf8`` stage."""

    nullable: Annotated[bool, BOOL] = False
    """A NULL input is a NULL result (success) instead of a NullInput error; for an optional key."""


class JsonOptions(StageOptions):
    """Options of a ``json`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "schema": "order_id STRING, amount DOUBLE, currency STRING",
        "required": ["order_id"],
        "undeclared_fields": "quarantine",
    }]})

    schema_: Annotated[str, TEXT] = Field(alias="schema", examples=["order_id STRING, amount DOUBLE, currency STRING"])
    """The record's Spark DDL schema, e.g. 'order_id STRING, amount DOUBLE'."""
    required: Annotated[list[str], NAMES] = Field([], examples=[["order_id", "amount"]])
    """Fields of the schema that must be present and non-null."""
    strings: Annotated[str, lowered("strict", "coerce")] = "strict"
    """strict: a top-level STRING field takes only a JSON string or null (an object, array, number or
    boolean is a SchemaMismatch); coerce: any JSON value, a non-string one kept as its JSON text."""
    undeclared_fields: Annotated[str, lowered("drop", "quarantine")] = "drop"
    """Top-level fields the schema does not declare: drop (counted in schema-drift-records) or
    quarantine (the record is an UndeclaredField error)."""


class CastOptions(StageOptions):
    """Options of a ``cast`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "columns": {"created_at": "TIMESTAMP", "amount": "DECIMAL(10,2)"},
        "formats": {"created_at": "yyyy-MM-dd HH:mm:ss"},
    }]})

    columns: Annotated[dict[str, str], text_map("a non-empty mapping of field: value", required=True)] = Field(
        examples=[{"created_at": "TIMESTAMP", "amount": "DECIMAL(10,2)"}]
    )
    """Field to Spark type, e.g. {created_at: TIMESTAMP, amount: 'DECIMAL(10,2)'}."""
    formats: Annotated[dict[str, Any], text_map("a mapping of field: value", required=False)] = Field(
        {}, examples=[{"created_at": "yyyy-MM-dd HH:mm:ss"}]
    )
    """Datetime pattern per DATE/TIMESTAMP field of columns, e.g. {created_at: 'yyyy-MM-dd HH:mm:ss'}."""


class _Rule(StageOptions):
    column: Annotated[str | None, FIELD] = Field(None, examples=["amount"])
    """The struct field checked; omit it to check the stage's input itself."""


class NotNullRule(_Rule):
    """The value is not NULL."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"column": "order_id", "check": "not_null"}]})

    check: Annotated[str, const("not_null")]


class RangeRule(_Rule):
    """min <= value <= max; NULL passes. Bounds are numbers, or date/timestamp strings."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "amount", "check": "range", "min": 0, "max": 10_000},
    ]})

    check: Annotated[str, const("range")]
    min: Annotated[Any, BOUND] = Field(None, examples=[0, "2026-01-01"])
    """Lower bound (at least one of min and max)."""
    max: Annotated[Any, BOUND] = Field(None, examples=[10_000, "2026-12-31 23:59:59"])
    """Upper bound."""
    min_inclusive: Annotated[bool, BOOL] = True
    """Whether the value may equal min."""
    max_inclusive: Annotated[bool, BOOL] = True
    """Whether the value may equal max."""


class InSetRule(_Rule):
    """The value is one of values; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
    ]})

    check: Annotated[str, const("in_set")]
    values: Annotated[list[Any], VALUES] = Field(examples=[["EUR", "USD"]])
    """The allowed values."""


class NotInSetRule(_Rule):
    """The value is none of values; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "customer", "check": "not_in_set", "values": ["test", "unknown"]},
    ]})

    check: Annotated[str, const("not_in_set")]
    values: Annotated[list[Any], VALUES] = Field(examples=[["test", "unknown"]])
    """The forbidden values."""


class RegexRule(_Rule):
    """The value matches a Java regular expression; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "currency", "check": "regex", "pattern": "[A-Z]{3}"},
    ]})

    check: Annotated[str, const("regex")]
    pattern: Annotated[str, TEXT] = Field(examples=["[A-Z]{3}"])
    """A java.util.regex pattern; named groups are (?<name>...)."""
    match: Annotated[str, lowered("full", "search")] = "full"
    """full: the whole value matches; search: the pattern occurs anywhere."""


class LengthRule(_Rule):
    """min <= length <= max (characters; bytes for BINARY); NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"column": "order_id", "check": "length", "min": 1, "max": 64},
    ]})

    check: Annotated[str, const("length")]
    min: Annotated[int | None, integer(0, optional=True)] = Field(None, examples=[1])
    """Shortest length (at least one of min and max)."""
    max: Annotated[int | None, integer(0, optional=True)] = Field(None, examples=[64])
    """Longest length."""


class ExprRule(_Rule):
    """A Spark SQL boolean expression over the staged row; NULL passes."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"check": "expr", "expr": "parse_order.result.amount > 0"},
    ]})

    check: Annotated[str, const("expr")]
    expr: Annotated[str, TEXT] = Field(examples=["parse_order.result.amount > 0"])
    """E.g. 'parse_order.result.amount > 0'."""


#: Check name of a ``checks`` rule (the values of :class:`quarantine.stages.checks.Check`) → its model.
RULE_DECLARATIONS: dict[str, type[_Rule]] = {
    "not_null": NotNullRule,
    "range": RangeRule,
    "in_set": InSetRule,
    "not_in_set": NotInSetRule,
    "regex": RegexRule,
    "length": LengthRule,
    "expr": ExprRule,
}
CHECKS = tuple(RULE_DECLARATIONS)

Rule = Annotated[
    Annotated[NotNullRule, Tag("check=not_null")]
    | Annotated[RangeRule, Tag("check=range")]
    | Annotated[InSetRule, Tag("check=in_set")]
    | Annotated[NotInSetRule, Tag("check=not_in_set")]
    | Annotated[RegexRule, Tag("check=regex")]
    | Annotated[LengthRule, Tag("check=length")]
    | Annotated[ExprRule, Tag("check=expr")],
    tagged("check", CHECKS),
]


class ChecksOptions(StageOptions):
    """Options of a ``checks`` stage."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"rules": [
        {"column": "order_id", "check": "not_null"},
        {"column": "amount", "check": "range", "min": 0, "max": 10_000},
        {"column": "currency", "check": "in_set", "values": ["EUR", "USD"]},
    ]}]})

    rules: Annotated[list[Rule], Field(min_length=1)] = Field(examples=[[{"column": "order_id", "check": "not_null"}]])
    """The rules, in order; the first failing one names the error class."""


class PythonOptions(StageOptions):
    """Options of a ``python`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("path",)

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"function": "mypkg.scoring.score", "returns": "DOUBLE", "mode": "vectorized"},
        {"function": "sensors.enrich", "returns": "reading_id BIGINT, celsius DOUBLE, fahrenheit DOUBLE"},
    ]})

    function: Annotated[str, TEXT] = Field(examples=["sensors.enrich"])
    """The function's dotted path (module.fn, pkg.module.fn or pkg.module:Class.method); the module is
    imported from path (default the config's folder) first, then from the installed packages."""
    returns: Annotated[str, TEXT] = Field(examples=["DECIMAL(10,2)", "reading_id BIGINT, celsius DOUBLE"])
    """The result's Spark type: DOUBLE, 'DECIMAL(10,2)', ARRAY<INT>, or a struct as a DDL field list
    ('reading_id BIGINT, celsius DOUBLE') or STRUCT<...>. The last stage's result is the target's row: a
    struct's fields become its columns, any other type one column named after the stage."""
    mode: Annotated[str, lowered("row", "vectorized")] = "row"
    """row: fn(value) per row (a struct is a dict, the result a value or dict); vectorized: fn(pandas.Series
    or, for a struct, pandas.DataFrame) per Arrow batch, returning a Series (or DataFrame) of the same length."""
    nullable: Annotated[bool, BOOL] = False
    """A None result is a success (NULL result) instead of a NullResult error."""
    retriable: Annotated[Any, EXCEPTIONS] = Field(None, examples=[["TimeoutError", "mypkg.errors.Throttled"]])
    """Exception classes whose errors are marked retriable (builtins or dotted paths)."""
    path: Annotated[str | None, MODULE_FOLDER] = Field(None, validate_default=True, examples=["lib"])
    """The folder the function's module is imported from first (a relative one is read from the config's
    folder); default the config file's folder. A module found there is shipped to Spark's Python workers with
    the function, so neither needs PYTHONPATH."""


class ExpectationOptions(StageOptions):
    """Options of an ``expectation`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("suite",)

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"suite": "expectations/orders.json", "on_breach": "quarantine_batch"},
    ]})

    suite: Annotated[str, SUITE] = Field(examples=["expectations/orders.json"])
    """A Great Expectations 1.x suite JSON file; a relative path is read from the config's folder."""
    on_breach: Annotated[Any, ON_BREACH] = Field(
        "warn", examples=[{"default": "warn", "expect_column_values_to_be_unique": "fail"}]
    )
    """What a failed batch-level expectation does: one action, or {default: action, <type or name>: action}."""
    validate_every: Annotated[int, integer(1)] = Field(1, examples=[10])
    """Validate the suite with GX on every Nth batch."""


class RegistryOptions(StageOptions):
    """A schema registry speaking the Confluent REST API: an avro or protobuf stage's writer schemas are the
    versions of its subject (or subjects), listed when the stage is built."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "url": "https://schema-registry.example.com:8081",
        "subject": "orders-value",
        "user": "${env:SCHEMA_REGISTRY_USER}",
        "password": "${env:SCHEMA_REGISTRY_PASSWORD}",
    }]})

    url: Annotated[str, REGISTRY_URL] = Field(examples=["https://schema-registry.example.com:8081"])
    """The registry's base URL, http(s)://host[:port]."""
    subject: Annotated[str | None, OPTIONAL_TEXT] = Field(None, examples=["orders-value"])
    """The subject whose versions are the writer schemas (Kafka Connect's default for a topic's values:
    ``<topic>-value``). Exactly one of subject and subjects; required with url."""
    subjects: Annotated[list[str] | None, SUBJECTS] = Field(None, examples=[["orders-value", "returns-value"]])
    """Several subjects (a topic whose records are written under more than one)."""
    user: Annotated[str | None, CREDENTIAL] = Field(None, examples=["${env:SCHEMA_REGISTRY_USER}"])
    """Basic-auth user (Confluent Cloud: the API key), usually from the environment as ``${env:NAME}``."""
    password: Annotated[str | None, CREDENTIAL] = Field(None, examples=["${env:SCHEMA_REGISTRY_PASSWORD}"])
    """Basic-auth password (Confluent Cloud: the API secret): write ``${env:NAME}``, never the value; on Databricks
    the job cluster's environment variable holds the secret reference ``{{secrets/<scope>/<key>}}``."""
    ca_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/registry-ca.pem"])
    """PEM file of the certificate authorities that sign the registry's certificate (https; default the
    system's); relative to the config's folder."""
    cert_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/client.pem"])
    """PEM client certificate, for a registry that asks for one (mutual TLS)."""
    key_file: Annotated[str | None, existing("PEM file", folder=False)] = Field(None, examples=["certs/client-key.pem"])
    """The client certificate's private key (PEM), unless cert_file holds it."""
    timeout_s: Annotated[int, integer(1)] = Field(10, examples=[30])
    """Seconds each request to the registry may take."""


_AVSC, _DESC = existing(".avsc file", folder=False), existing(".desc file", folder=False)
_DESCS = folder_or(RegistryOptions, existing("folder of <id>.desc files", folder=True))


class AvroOptions(StageOptions):
    """Options of an ``avro`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("schemas", "reader_schema", "writer_schema")

    model_config = ConfigDict(json_schema_extra={"examples": [{"wire_format": "confluent", "schemas": "schemas"}]})

    wire_format: Annotated[str, WIRE_FORMAT] = "confluent"
    """How values are framed: 'confluent' (the schema-registry wire format) or 'none' (plain Avro)."""
    schemas: Annotated[
        str | RegistryOptions | None, folder_or(RegistryOptions, existing("folder of <id>.avsc files", folder=True))
    ] = Field(None, examples=["schemas"])
    """Writer schemas by id (wire_format confluent): a folder of <id>.avsc files, relative to the config's folder;
    or a schema registry (a mapping: url, subject…), whose subject's versions are listed when the stage is built."""
    writer_schema: Annotated[str | None, _AVSC] = Field(None, examples=["schemas/order.avsc"])
    """The one writer schema of plain Avro values (wire_format none)."""
    reader_schema: Annotated[str | None, _AVSC] = Field(None, examples=["schemas/order_v2.avsc"])
    """The schema records are read as (Avro resolution rules); default the writer schema with the highest id."""
    nullable: Annotated[bool, BOOL] = False
    """A NULL input is a NULL result (success) instead of a NullInput error."""


class ProtobufOptions(StageOptions):
    """Options of a ``protobuf`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("schemas", "descriptor", "reader_descriptor")
    model_config = ConfigDict(json_schema_extra={"examples": [{"schemas": "schemas", "message": "shop.Order"}]})

    wire_format: Annotated[str, WIRE_FORMAT] = "confluent"
    """How values are framed: 'confluent' (magic byte, schema id, message indexes) or 'none' (plain Protobuf)."""
    schemas: Annotated[str | RegistryOptions | None, _DESCS] = Field(None, examples=["schemas"])
    """Writer schemas by id (wire_format confluent): a folder of <id>.desc FileDescriptorSets (protoc --include_imports
    --descriptor_set_out), relative to the config's folder; or a schema registry (a mapping: url, subject…), whose
    subject's .proto versions are compiled (grpcio-tools' protoc) when the stage is built."""
    descriptor: Annotated[str | None, _DESC] = Field(None, examples=["order.desc"])
    """The one FileDescriptorSet of plain Protobuf values (wire_format none)."""
    message: Annotated[str | None, OPTIONAL_TEXT] = Field(None, examples=["shop.Order"])
    """The full name of the message records are read as; default the reader descriptor's first message."""
    reader_descriptor: Annotated[str | None, _DESC] = Field(None, examples=["order_v2.desc"])
    """The FileDescriptorSet declaring that message; default the highest id's (with none: descriptor)."""
    nullable: Annotated[bool, BOOL] = False
    """A NULL input is a NULL result (success) instead of a NullInput error."""


# --------------------------------------------------------------------------- the stage table


class _Stage(StageOptions):
    name: Annotated[str, IDENTIFIER] = Field(examples=["parse_order"])
    """The stage's name: also the name of its result column, and what a later stage's input names."""
    input: Annotated[str | None, OPTIONAL_TEXT] = Field(None, examples=["value"])
    """What the stage reads: a source column (value, key...) or an earlier stage's name; default the previous stage."""


#: ``factory(spec, options) -> Stage``: ``spec`` is the StageSpec (its name, input and
#: :meth:`~quarantine.config.StageSpec.key` for error messages), ``options`` its validated
#: options model. Given as a callable, or as ``"module:function"`` (imported when a stage of
#: the type is built, so that loading a config imports no stage, GX or user code).
Factory = Callable[[Any, Any], Any] | str


@dataclass(frozen=True)
class StageType:
    """One stage type: its name in YAML, its options model and how a stage of it is built.

    The one place a stage type is declared: the config loader checks a ``stages:``
    entry's options against :attr:`options`, the JSON Schema shows them, and
    :func:`quarantine.stages.build_stage` calls :attr:`factory` with the validated
    options. Register a new type with :func:`register_stage_type`.
    """

    name: str
    """The ``type:`` value, e.g. ``cast``."""
    options: type[BaseModel]
    """The model of the stage's ``options:`` (pydantic, frozen, unknown keys refused)."""
    factory: Factory
    """Builds the stage: ``factory(spec, options)``."""
    summary: str
    """One line: what the stage does and its kind (deserialize, transform, validate…); shown in the schema."""
    options_required: bool = True
    """Whether ``options:`` must be written (False when every option has a default)."""
    declaration: type[BaseModel] = field(init=False, repr=False, compare=False)
    """The model of a whole ``stages:`` entry of this type (name, input, type, options), derived."""

    def __post_init__(self) -> None:
        options: Any = self.options if self.options_required else (self.options | None, None)
        model = create_model(
            f"{_camel(self.name)}Stage",
            __base__=_Stage,
            __doc__=self.summary,
            type=(Annotated[str, const(self.name)], ...),
            options=options if isinstance(options, tuple) else (options, ...),
        )
        object.__setattr__(self, "declaration", model)

    def build(self, spec: Any, options: BaseModel) -> Any:
        """The stage ``spec`` declares, built from its validated ``options``."""
        factory = self.factory
        if isinstance(factory, str):
            module, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module), attr)
        return factory(spec, options)


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


#: Stage type → its :class:`StageType`: THE table of stage types (built-ins below; see
#: :func:`register_stage_type`). The config loader, the JSON Schema, ``quarantine validate``
#: and the stage builder all read it.
STAGE_TYPES: dict[str, StageType] = {}


def register_stage_type(stage_type: StageType, *, replace: bool = False) -> StageType:
    """Add a stage type to :data:`STAGE_TYPES` (configs may then use it); returns it.

    Raises:
        ValueError: the name is taken (pass ``replace=True`` to replace it).
    """
    if stage_type.name in STAGE_TYPES and not replace:
        raise ValueError(f"stage type {stage_type.name!r} is already registered")
    STAGE_TYPES[stage_type.name] = stage_type
    return stage_type


def unregister_stage_type(name: str) -> None:
    """Remove a stage type added by :func:`register_stage_type` (a no-op for an unknown name)."""
    STAGE_TYPES.pop(name, None)


for _builtin in (
    StageType("decode_utf8", DecodeUtf8Options, "quarantine.stages.decode:from_spec",
              "Bytes to a string, rejecting invalid UTF-8 (deserialize). Input default: value.",
              options_required=False),
    StageType("avro", AvroOptions, "quarantine.stages.avro:from_spec",
              "Decode Avro, schema-registry framed or plain, read as a reader schema (deserialize). "
              "Input default: value."),
    StageType("protobuf", ProtobufOptions, "quarantine.stages.protobuf:from_spec", "Decode Protobuf, "
              "framed or plain; schemas from .desc files or a registry (deserialize). Input default: value."),
    StageType("json", JsonOptions, "quarantine.stages.json:from_spec",
              "Parse JSON against a declared schema (deserialize)."),
    StageType("cast", CastOptions, "quarantine.stages.cast:from_spec",
              "Typed conversions of struct fields with try_cast and formats (transform)."),
    StageType("checks", ChecksOptions, "quarantine.stages.checks:from_spec",
              "Native row checks; a row breaking any rule is quarantined (validate)."),
    StageType("python", PythonOptions, "quarantine.stages.python:from_spec",
              "A Python function by dotted path, Arrow-batched (transform)."),
    StageType("expectation", ExpectationOptions, "quarantine.expectations.stage:from_spec",
              "A Great Expectations suite; row-level expectations as native predicates (expectation)."),
):
    register_stage_type(_builtin)


def stage_declaration() -> Any:
    """The type of one ``stages:`` entry now: a union of the registered types' declarations, on ``type``."""
    members = tuple(Annotated[t.declaration, Tag(f"type={n}")] for n, t in STAGE_TYPES.items())
    return Annotated[Union[members], tagged("type", tuple(STAGE_TYPES))]  # noqa: UP007 - built at run time
