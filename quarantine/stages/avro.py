"""``avro``: decode Avro values, framed in the schema-registry wire format or plain.

The wire format (Confluent's, and Apicurio's in its Confluent mode): a zero magic
byte, the writer schema's id as a 4-byte big-endian integer, then the Avro binary
encoding. Writer schemas come from a folder of ``<id>.avsc`` files, or from a schema
registry speaking the Confluent REST API (every version of a subject, or of several),
read once when the stage is built (on the driver; never per record). Each record is
decoded with Spark's ``from_avro`` under its id's writer schema and read as the reader
schema (Avro's resolution rules: added fields take their defaults, removed fields are
skipped, ``int`` → ``long`` → ``float`` → ``double`` promote).

A registry's subject gains versions while a stream runs. The stage stays pure Columns:
a record whose id was not listed when the stage was built is an ``UnknownSchemaId``
error, and the streaming runner, after a micro-batch in which the stage gave one, asks
the stage for a :meth:`~AvroDecode.refreshed` copy (the subjects listed again, once per
micro-batch at most, only the new versions read) that the next micro-batch runs. A
registry that cannot be asked never fails the batch: the records wait in quarantine,
and a replay, whose stages are built anew, decodes them once their schema is listed.

How a failure is told apart, without a Python call per record: Spark's PERMISSIVE
mode gives a struct of NULLs for bytes it cannot decode, which a record of optional
fields can also be. So the stage decodes the value with one byte ``0x01`` appended,
as an envelope record ``{r: <writer schema>, ok: boolean}``: ``ok`` is true only
when the message decoded and ended where it should. A wire-format value is decoded
whole, header included, as ``{h: fixed(5), r, ok}`` (its bytes are not sliced), under
the writer schema its first 5 bytes name (compared as bytes: no id parsed per record);
each record is decoded once. Only for the rows that failed, the error's details are
computed (the id as a number, hex snippets), and the value decoded again without the
reader schema, to say whether the bytes were bad or the reader schema cannot read
that writer's records.

Error classes and their messages::

    NullInput                 column 'value' is NULL; expected Avro bytes   (unless nullable: true)
    BadMagicByte              column 'value' is not in the schema-registry wire format: expected the
                              magic byte 0x00 and a 4-byte schema id, found 0x7B226964 (57 bytes)
    UnknownSchemaId           schema id 42: no writer schema for it in subject orders-value at
                              https://registry:8081 (ids: 1, 2)
    UndecodableAvro           schema id 1: 12 bytes do not decode as the writer schema orders.Order
                              (starting 0xFFFFFF…)
    IncompatibleReaderSchema  schema id 1: its records cannot be read as the reader schema orders.Order
                              (Avro schema resolution failed: a field changed type or lacks a default)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import ConfigDict, Field, model_validator

from quarantine.columns import VALUE, ErrorKind
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import ConfigError
from quarantine.stage import Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.stages.schema_registry import (
    RegistryOptions,
    RegistrySource,
    SubjectVersion,
    avro_writers,
    listed_versions,
    log_listed,
    registry_retry,
    warn_not_listed,
    warn_skipped,
)
from quarantine.stages.schema_sources import (
    HEADER_BYTES,
    FolderSchemas,
    SchemaLookupError,
    UnknownSchemaIdError,
)
from quarantine.values.options import (
    WIRE_FORMAT,
    WireFormat,
    existing,
    folder_or,
)
from quarantine.values.types import BOOL, fail

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import (
        DataType,
    )

#: the error class a refreshed stage (the subjects listed again) may no longer give
UNKNOWN_SCHEMA_ID = "UnknownSchemaId"

__all__ = ["AvroDecode", "declared_type", "envelope", "from_spec", "schema_name"]

#: The envelope record's full name: it must not clash with a named type of a user's schema.
_ENVELOPE = "Envelope"
_ENVELOPE_NAMESPACE = "io.quarantine.avro.internal"
#: The envelope's fixed type of the wire format's header (magic byte and schema id), in a namespace
#: of its own: a user's type without a namespace takes the envelope's, never this one.
_HEADER = "io.quarantine.avro.internal.header.WireHeader"


_AVSC = existing(".avsc file", folder=False)


class AvroOptions(StageOptions):
    """Options of an ``avro`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("schemas", "reader_schema", "writer_schema")

    model_config = ConfigDict(json_schema_extra={"examples": [{"wire_format": "confluent", "schemas": "schemas"}]})

    wire_format: Annotated[WireFormat, WIRE_FORMAT] = WireFormat.CONFLUENT
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

    @model_validator(mode="after")
    def _schemas_for_the_wire_format(self) -> Self:
        if self.wire_format is WireFormat.CONFLUENT and self.schemas is None:
            raise fail("a folder of <id>.avsc writer schemas, or a schema registry (required with wire_format: "
                       "confluent)", at="schemas", value=None)
        if self.wire_format is WireFormat.NONE and self.writer_schema is None:
            raise fail("an .avsc file (required with wire_format: none)", at="writer_schema", value=None)
        return self


def envelope(schema: str, *, header: bool = False) -> str:
    """``schema`` (Avro JSON) wrapped as the record ``{r: schema, ok: boolean}`` (pure).

    ``header``: the record starts with ``h``, a ``fixed`` of the wire format's header
    bytes, so that a whole framed value decodes (the header skipped without slicing the bytes).
    """
    fields: list[dict[str, Any]] = [{"name": "r", "type": json.loads(schema)}, {"name": "ok", "type": "boolean"}]
    if header:
        fields.insert(0, {"name": "h", "type": {"type": "fixed", "name": _HEADER, "size": HEADER_BYTES}})
    return json.dumps({"type": "record", "name": _ENVELOPE, "namespace": _ENVELOPE_NAMESPACE, "fields": fields})


def schema_name(schema: str) -> str:
    """A schema's full name (``namespace.Name``) for messages, or its type for unnamed ones (pure)."""
    parsed = json.loads(schema)
    if isinstance(parsed, dict):
        name = str(parsed.get("name") or parsed.get("type"))
        namespace = parsed.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name
    return json.dumps(parsed)[:80]


def _read_schema(path: str, key: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(key, path, f"a readable Avro schema (.avsc JSON) file ({exc})") from None
    return text


@dataclass(frozen=True, repr=False)
class AvroDecode(Stage):
    """Decode Avro bytes into a struct of the reader schema.

    Attributes:
        name: stage name.
        writers: writer schemas (Avro JSON) by schema id; with ``wire_format`` False,
            exactly one, under any id.
        reader: the reader schema (Avro JSON).
        wire_format: values carry the schema-registry header (else: the message only).
        input: the binary column (default ``value``).
        nullable: whether a NULL input is fine (result NULL) or an error.
        source: where the writer schemas came from (for messages).
        registry: the registry and subjects the writer schemas were listed from, or None
            (a folder, or plain Avro): then :meth:`refreshed` lists them again.
        listed: every ``(subject, version)`` listed so far, Avro or not (a refresh reads
            only the others).
    """

    name: str
    writers: tuple[tuple[int, str], ...]
    reader: str
    wire_format: bool = True
    input: str | None = VALUE
    nullable: bool = False
    source: str = ""
    kind: ErrorKind = field(default=ErrorKind.DESERIALIZE)
    registry: RegistrySource | None = None
    listed: frozenset[tuple[str, int]] = frozenset()

    deterministic = True  # pure Column expressions of the record

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The reader schema's record, where it matters to lineage: its field names (see :func:`declared_type`)."""
        return declared_type(json.loads(self.reader))

    def refreshes(self) -> frozenset[str]:
        """``UnknownSchemaId`` when the writer schemas come from a registry (a refresh may list the id)."""
        return frozenset({UNKNOWN_SCHEMA_ID}) if self.registry is not None else frozenset()

    def refreshed(self, retry: RetryPolicy | None = None) -> AvroDecode | None:
        """This stage with the versions registered since it was built or last refreshed, or None.

        The subjects' version lists are read again (one request each) and only the versions
        not listed yet are read, each request under ``retry`` (the pipeline's ``errors.retry.*``;
        only an unreachable registry, 429 or 5xx, is retried). The reader schema stays as it is:
        a stream writes one shape for its whole run.

        Never raises for the registry: a failure is logged and gives None (the stage stays as
        it is; its records with unknown ids wait in quarantine).
        """
        if self.registry is None:
            return None
        try:
            found = self.registry.list(self.listed, registry_retry(retry) if retry is not None else None)
        except SchemaLookupError as exc:
            warn_not_listed(self.name, self.registry, exc)
            return None
        new, skipped = avro_writers(found)
        warn_skipped(self.name, skipped)
        listed = self.listed | {(v.subject, v.version) for v in found}
        known = dict(self.writers)
        added = {sid: text for sid, text in new.items() if sid not in known}
        if not added:
            return replace(self, listed=listed) if listed != self.listed else None
        log_listed(self.name, self.registry, added)
        return replace(self, writers=tuple(sorted({**known, **added}.items())), listed=listed)

    @staticmethod
    def _is_id(prefix: Column, sid: int) -> Column:
        """Whether a value's first 5 bytes are the wire-format header of schema id ``sid``: the
        magic byte and the id compared as bytes (no number parsed per record)."""
        from pyspark.sql import functions as F

        if not 0 <= sid < 2**32:  # no 4-byte unsigned id is this one
            return F.lit(False)
        return prefix == F.lit(b"\x00" + sid.to_bytes(4, "big"))

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        size = F.octet_length(value)
        if self.wire_format:
            header_ok = (size >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(b"\x00"))
            schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
            message = F.substring(value, HEADER_BYTES + 1, 2_147_483_647)  # to the end
            prefix = F.substring(value, 1, HEADER_BYTES)
        else:
            header_ok = F.lit(True)
            schema_id = F.lit(self.writers[0][0]).cast("long")
            message = prefix = value
        # the whole value, header included: the envelope's first field skips the header (no copy of the message)
        framed = F.concat(value, F.lit(b"\x01"))
        reader = envelope(self.reader, header=self.wire_format)
        decoded: Column | None = None  # CASE over the ids: each id's writer schema, read as the reader
        as_written: Column | None = None  # ...and whether it decodes with no reader schema (failed rows only)
        for sid, writer in self.writers:
            this = self._is_id(prefix, sid) if self.wire_format else F.lit(True)
            # the reader schema only where it differs: Avro's resolving decoder costs even when it has nothing to do
            same = json.loads(writer) == json.loads(self.reader)
            options = {"mode": "PERMISSIVE"} if same else {"mode": "PERMISSIVE", "avroSchema": reader}
            written = envelope(writer, header=self.wire_format)
            branch = from_avro(framed, written, options)
            # where the reader is the writer, ``branch`` already decoded without one: its failure is the bytes'
            alone = F.lit(False) if same else from_avro(framed, written, {"mode": "PERMISSIVE"})["ok"]
            decoded = F.when(this, branch) if decoded is None else decoded.when(this, branch)
            as_written = F.when(this, alone) if as_written is None else as_written.when(this, alone)
        assert decoded is not None and as_written is not None  # from_spec: at least one writer schema
        known = schema_id.isin([sid for sid, _ in self.writers])
        # a 5-byte prefix equal to an id's header has the magic byte and a known id: NULL for any other value
        decoded = ctx.once("decoded", decoded)
        ok = F.coalesce(decoded["ok"], F.lit(False))
        is_null = value.isNull()
        failed = F.when(is_null, F.lit(not self.nullable)).otherwise(~ok)
        ids = ", ".join(str(sid) for sid, _ in self.writers[:20])
        what = f"column '{self.input}'" if self.input else "input"
        reader_name = schema_name(self.reader)
        error_class = (
            F.when(is_null, F.lit("NullInput"))
            .when(~header_ok, F.lit("BadMagicByte"))
            .when(~known, F.lit("UnknownSchemaId"))
            .when(F.coalesce(as_written, F.lit(False)), F.lit("IncompatibleReaderSchema"))
            .otherwise(F.lit("UndecodableAvro"))
        )
        id_text = F.concat(F.lit("schema id "), schema_id.cast("string")) if self.wire_format else F.lit("plain Avro")
        writer_names = F.lit(None).cast("string")
        for sid, writer in self.writers:
            writer_names = F.when(schema_id == F.lit(sid), F.lit(schema_name(writer))).otherwise(writer_names)
        text = (
            F.when(is_null, F.lit(f"{what} is NULL; expected Avro bytes"))
            .when(
                ~header_ok,
                F.format_string(
                    f"{what} is not in the schema-registry wire format: expected the magic byte 0x00 and a "
                    "4-byte schema id, found 0x%s (%d bytes)",
                    F.hex(F.substring(value, 1, HEADER_BYTES)), size,
                ),
            )
            .when(~known, F.concat(id_text, F.lit(f": no writer schema for it in {self.source} (ids: {ids})")))
            .when(
                F.coalesce(as_written, F.lit(False)),
                F.concat(
                    id_text,
                    F.lit(f": its records cannot be read as the reader schema {reader_name} (Avro schema "
                          "resolution failed: a field changed type, or a field the reader adds has no default)"),
                ),
            )
            .otherwise(
                F.concat(
                    id_text, F.lit(": "), F.octet_length(message).cast("string"),
                    F.lit(" bytes do not decode as the writer schema "), writer_names,
                    F.lit(" (starting 0x"), F.hex(F.substring(message, 1, 16)), F.lit(")"),
                )
            )
        )
        return outcome(decoded["r"], failed, self.error(error_class, text))


def from_spec(spec: Declaration, options: AvroOptions) -> AvroDecode:
    """Build the stage from its YAML declaration; the schemas are read here, once.

    A folder's ``<id>.avsc`` files are read; a registry's subjects are listed and each of
    their versions read (one attempt per request: ``errors.retry.*`` is the runner's, for the
    listings of a running stream). The reader schema is ``reader_schema``, else the highest
    id's writer schema (a folder), or the schema of the first subject's latest version (a
    registry: what ``use.latest.version`` reads as), fixed for the stage's life.

    Raises:
        ConfigError: a schema file is missing or not JSON, the folder holds no ``<id>.avsc``,
            a subject is not registered, the registry refuses the credentials, or the subjects hold
            no Avro schema (naming ``stages[i].options.x``).
        SchemaLookupError: the registry could not be asked (unreachable, 5xx, an answer the API
            does not document), naming the option and the registry.
    """
    wire = options.wire_format
    writers: list[tuple[int, str]] = []
    registry: RegistrySource | None = None
    listed: frozenset[tuple[str, int]] = frozenset()
    latest: str | None = None  # a registry's default reader schema
    if wire is WireFormat.CONFLUENT:
        schemas = options.schemas
        assert schemas is not None  # AvroOptions requires them with this wire format
        if isinstance(schemas, RegistryOptions):
            registry, versions = listed_versions(spec, schemas)
            by_id, skipped = avro_writers(versions)
            warn_skipped(spec.name, skipped)
            if not by_id:
                why = "; ".join(f"{v.subject} v{v.version}: {reason}" for v, reason in skipped[:5])
                raise ConfigError(spec.key("options.schemas"), registry.describe(),
                                  "subjects holding at least one Avro schema" + (f" ({why})" if why else ""))
            writers = sorted(by_id.items())
            listed = frozenset((v.subject, v.version) for v in versions)
            where = registry.describe()
            latest = _latest(registry.subjects, versions, by_id)
        else:
            writers, where = _folder(spec, schemas)
    else:
        path = options.writer_schema
        assert path is not None  # AvroOptions requires it with this wire format
        writers.append((0, _read_schema(path, spec.key("options.writer_schema"))))
        where = path
    reader_path = options.reader_schema
    if reader_path:
        reader = _read_schema(reader_path, spec.key("options.reader_schema"))
    else:
        reader = latest if latest is not None else writers[-1][1]
    return AvroDecode(
        name=spec.name,
        writers=tuple(writers),
        reader=reader,
        wire_format=wire is WireFormat.CONFLUENT,
        input=spec.input or VALUE,
        nullable=options.nullable,
        source=where,
        registry=registry,
        listed=listed,
    )


def _folder(spec: Declaration, folder: str) -> tuple[list[tuple[int, str]], str]:
    """The writer schemas of a folder of ``<id>.avsc`` files, and the folder (for messages)."""
    source = FolderSchemas(Path(folder))
    if not source.folder.is_dir():
        raise ConfigError(spec.key("options.schemas"), folder, "an existing folder of <id>.avsc files")
    writers: list[tuple[int, str]] = []
    for sid in source.ids():
        try:
            writers.append((sid, source.schema(sid)))
        except UnknownSchemaIdError as exc:
            raise ConfigError(spec.key("options.schemas"), folder, f"readable schemas ({exc})") from None
    if not writers:
        raise ConfigError(spec.key("options.schemas"), folder, "a folder holding at least one <id>.avsc file")
    return writers, str(source.folder)


def _latest(subjects: tuple[str, ...], versions: list[SubjectVersion], writers: dict[int, str]) -> str | None:
    """The schema of the highest version of the first subject that has an Avro one (the default reader)."""
    for subject in subjects:
        mine = [v for v in versions if v.subject == subject and v.schema_id in writers]
        if mine:
            return writers[max(mine, key=lambda v: v.version).schema_id]
    return None


@cache
def _avro_primitives() -> dict[str, DataType]:
    """Avro primitive types and the Spark types ``from_avro`` gives them."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        NullType,
        StringType,
    )

    return {
        "string": StringType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
        "double": DoubleType(), "boolean": BooleanType(), "bytes": BinaryType(), "null": NullType(),
    }


def declared_type(schema: Any) -> DataType | None:
    """An Avro schema's Spark type where lineage needs it: a record's field names (a field of a
    type not mapped here is NULL-typed: its name is known, its type is not checked)."""
    from pyspark.sql.types import NullType, StructField, StructType

    if isinstance(schema, str):
        return _avro_primitives().get(schema)
    if isinstance(schema, list):  # a union: ["null", T] is T
        branches = [b for b in schema if b != "null"]
        return declared_type(branches[0]) if len(branches) == 1 else None
    if isinstance(schema, Mapping) and schema.get("type") == "record":
        return StructType([
            StructField(str(f["name"]), declared_type(f.get("type")) or NullType()) for f in schema.get("fields", [])
        ])
    if isinstance(schema, Mapping) and "logicalType" not in schema:  # a logical type is Spark's own (decimal…)
        return declared_type(schema.get("type"))
    return None


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "avro", AvroOptions, from_spec,
    "Decode Avro, schema-registry framed or plain, read as a reader schema (deserialize). Input default: value.",
)
