"""``protobuf``: decode Protobuf values, framed in the schema-registry wire format or plain.

No JVM library is used (``spark-protobuf`` is not on Maven Central as this project's
build sees it): records are parsed by the ``protobuf`` Python package's upb backend
inside one Arrow UDF per stage (:mod:`quarantine.stages.protobuf.batch`), a whole Arrow
batch per call, and every record that does not decode gets its own error instead of
failing the batch.

The wire format (Confluent's): a zero magic byte, the writer schema's id as a 4-byte
big-endian integer, the message-index array (which message of the schema's file; the
first one, ``[0]``, is the one byte ``0x00``), then the Protobuf message. Writer schemas
come from a folder of ``<id>.desc`` files (``FileDescriptorSet``, as ``protoc
--include_imports --descriptor_set_out`` writes them; :mod:`quarantine.stages.protobuf.descriptors`),
or from a schema registry's subjects, whose ``.proto`` versions are compiled to such sets
(:mod:`quarantine.stages.protobuf.registry`), read once when the stage is built. As the
``avro`` stage does, a registry stage gives a record of an id not listed yet
``UnknownSchemaId``, and the streaming runner asks for a :meth:`~ProtobufDecode.refreshed`
copy (the subjects listed again, the new versions compiled) for the next micro-batch.
Each record is parsed as its writer message and read as the reader message (``message:``)
field by field by name (:mod:`quarantine.stages.protobuf.types`: the result type,
defaults, widening).

Unknown fields (field numbers in the record that its writer message does not declare:
a producer on a newer schema) are dropped from the result and counted: the stage
:class:`~quarantine.stage.ReportsDrift`, naming them ``#<number>``, so they show in the
``schema-drift-records`` metric and the run's summary. Only the top-level message's are
counted; a nested message's are dropped silently.

Error classes: :class:`~quarantine.stages.protobuf.batch.ProtobufErrorClass` (the avro
stage's ``NullInput``, ``BadMagicByte``, ``UnknownSchemaId`` and
``IncompatibleReaderSchema``, and ``UnknownMessageIndex``, ``UndecodableProtobuf``);
the messages are listed in :mod:`quarantine.stages.protobuf.batch`. Protobuf has no
end marker and keeps what it does not know: bytes that happen to parse as fields the
schema does not declare are a record of defaults with unknown fields, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from pydantic import ConfigDict, Field, model_validator

from quarantine.columns import VALUE, ErrorKind
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import ConfigError, MissingDependencyError
from quarantine.stage import HIDDEN_PREFIX, Declaration, Stage, StageContext, StageOptions, StageType
from quarantine.stages.protobuf.batch import UNKNOWN_FIELDS, DecodeBatch, ProtobufErrorClass, call_struct
from quarantine.stages.protobuf.descriptors import FolderDescriptors, read_descriptor_set
from quarantine.stages.protobuf.registry import ProtoCompileError, compile_version, protobuf_versions
from quarantine.stages.schema_registry import (
    RegistryOptions,
    RegistrySource,
    SubjectVersion,
    listed_versions,
    log_listed,
    registry_retry,
    replace_message,
    warn_not_listed,
    warn_skipped,
)
from quarantine.stages.schema_sources import RegistryUnreachableError, SchemaLookupError, UnknownSchemaIdError
from quarantine.values.options import WIRE_FORMAT, WireFormat, existing, folder_or
from quarantine.values.types import BOOL, OPTIONAL_TEXT, fail

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

__all__ = ["ProtobufDecode", "ProtobufErrorClass", "from_spec", "reader_message"]

_CALL = "call"


_DESC = existing(".desc file", folder=False)
_DESCS = folder_or(RegistryOptions, existing("folder of <id>.desc files", folder=True))


class ProtobufOptions(StageOptions):
    """Options of a ``protobuf`` stage."""

    #: Options that are file paths: resolved against the config's folder when it is loaded.
    paths: ClassVar[tuple[str, ...]] = ("schemas", "descriptor", "reader_descriptor")
    model_config = ConfigDict(json_schema_extra={"examples": [{"schemas": "schemas", "message": "shop.Order"}]})

    wire_format: Annotated[WireFormat, WIRE_FORMAT] = WireFormat.CONFLUENT
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

    @model_validator(mode="after")
    def _schemas_for_the_wire_format(self) -> Self:
        if self.wire_format is WireFormat.CONFLUENT and self.schemas is None:
            raise fail("a folder of <id>.desc descriptor sets, or a schema registry (required with wire_format: "
                       "confluent)", at="schemas", value=None)
        if self.wire_format is WireFormat.NONE and self.descriptor is None:
            raise fail("a .desc file (required with wire_format: none)", at="descriptor", value=None)
        return self


@dataclass(frozen=True, repr=False)
class ProtobufDecode(Stage):
    """Decode Protobuf bytes into a struct of the reader message.

    Attributes:
        name: stage name.
        sets: writer schemas (``FileDescriptorSet`` bytes) by schema id; with
            ``wire_format`` False, exactly one, id 0.
        reader_set: the descriptor set declaring the reader message.
        reader: the reader message's full name.
        result_type: its Spark type (:func:`quarantine.stages.protobuf.types.message_type`).
        wire_format: values carry the schema-registry header and message indexes.
        input: the binary column (default ``value``).
        nullable: whether a NULL input is fine (result NULL) or an error.
        source: where the writer schemas came from (for messages).
        registry: the registry and subjects the writer schemas were listed from, or None (a
            folder, or plain Protobuf): then :meth:`refreshed` lists them again.
        listed: every ``(subject, version)`` listed so far, compiled or not (a refresh reads
            only the others).
    """

    name: str
    sets: tuple[tuple[int, bytes], ...]
    reader_set: bytes
    reader: str
    result_type: StructType
    wire_format: bool = True
    input: str | None = VALUE
    nullable: bool = False
    source: str = ""
    kind: ErrorKind = field(default=ErrorKind.DESERIALIZE)
    registry: RegistrySource | None = None
    listed: frozenset[tuple[str, int]] = frozenset()

    # Each record gives the same outcome every time, but a Python parse costs more than keeping
    # the batch: not ``deterministic``, so the runner keeps the decoded batch instead of decoding twice.
    deterministic = False

    def produces(self, input_type: DataType | None) -> DataType | None:
        """The reader message's struct."""
        return self.result_type

    def refreshes(self) -> frozenset[str]:
        """``UnknownSchemaId`` when the writer schemas come from a registry (a refresh may list the id)."""
        return frozenset({ProtobufErrorClass.UNKNOWN_SCHEMA_ID.value}) if self.registry is not None else frozenset()

    def refreshed(self, retry: RetryPolicy | None = None) -> ProtobufDecode | None:
        """This stage with the versions registered since it was built or last refreshed, or None.

        The subjects' version lists are read again (one request each), only the versions not
        listed yet are read and compiled, each request under ``retry`` (the pipeline's
        ``errors.retry.*``: only an unreachable registry, 429 or 5xx, is retried). The reader
        message stays as it is: a stream writes one shape for its whole run.

        Never raises for the registry: a failure to list is logged and gives None (the stage
        stays as it is; its records with unknown ids wait in quarantine), and a version that
        does not compile, or whose imports the registry does not have, is logged and left out
        (listed, so not read again).
        """
        if self.registry is None:
            return None
        operator = registry_retry(retry) if retry is not None else None
        try:
            found = self.registry.list(self.listed, operator)
            client = self.registry.client(operator)
            known = dict(self.sets)
            protos, skipped = protobuf_versions(found)
            added: dict[int, bytes] = {}
            for v in protos:
                if v.schema_id in known or v.schema_id in added:
                    continue
                try:
                    added[v.schema_id] = compile_version(v, client)
                except ProtoCompileError as exc:
                    skipped.append((v, f"it does not compile (protoc: {exc})"))
                except SchemaLookupError as exc:
                    if isinstance(exc, RegistryUnreachableError):
                        raise  # the whole listing again, later
                    skipped.append((v, f"a file it imports could not be read ({exc})"))
            warn_skipped(self.name, skipped)
        except SchemaLookupError as exc:
            warn_not_listed(self.name, self.registry, exc)
            return None
        listed = self.listed | {(v.subject, v.version) for v in found}
        if not added:
            return replace(self, listed=listed) if listed != self.listed else None
        log_listed(self.name, self.registry, added)
        return replace(self, sets=tuple(sorted({**known, **added}.items())), listed=listed)

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql.pandas.functions import arrow_udf

        batch = DecodeBatch(
            stage=self.name, kind=self.kind.value, what=f"column '{self.input}'" if self.input else "input",
            wire_format=self.wire_format, sets=self.sets, reader_set=self.reader_set, reader=self.reader,
            result_type=self.result_type, nullable=self.nullable, source=self.source,
        )
        # The type hints of DecodeBatch.run (pa.Array, pa.Array -> pa.Array) make it a SCALAR Arrow UDF.
        factory: Any = arrow_udf
        udf = factory(batch.run, call_struct(self.result_type))
        call = ctx.once(_CALL, udf(value, ctx.skip))  # one call per row; the drift count reads it too
        out: Column = call.dropFields(UNKNOWN_FIELDS)
        return out

    def undeclared(self, column: Column) -> Column:
        """The record's unknown field numbers (``#7``), NULL when none (see :class:`quarantine.stage.ReportsDrift`)."""
        from pyspark.sql import functions as F

        return F.col(f"{HIDDEN_PREFIX}{self.name}_{_CALL}").getField(UNKNOWN_FIELDS)


def reader_message(data: bytes, name: str | None, key: str, where: str) -> tuple[str, StructType]:
    """The reader message's full name in the set ``data`` and its Spark type.

    Args:
        data: a descriptor set.
        name: the configured full name, or None for the first message of the set's last file.
        key: the config key of ``message`` (for errors).
        where: the file the set came from (for errors).

    Raises:
        ConfigError: naming ``key``: no such message, or one that holds itself.
    """
    from quarantine.stages.protobuf.descriptors import pool_of, schema_file, top_level_messages
    from quarantine.stages.protobuf.types import Incompatible, message_type

    file = schema_file(data)
    pool, _ = pool_of(data)
    try:
        desc = pool.FindMessageTypeByName(name or top_level_messages(data)[0])
    except KeyError:
        names = ", ".join(top_level_messages(data)[:20])
        raise ConfigError(key, name, f"a message of {where} (its schema file {file.name} declares {names}; "
                          "a nested one is Outer.Inner)") from None
    try:
        return desc.full_name, message_type(desc)
    except Incompatible as exc:
        raise ConfigError(key, desc.full_name, f"a message with a Spark type ({exc})") from None


def from_spec(spec: Declaration, options: ProtobufOptions) -> ProtobufDecode:
    """Build the stage from its YAML declaration; the descriptor sets are read here, once.

    Raises:
        ConfigError: a descriptor set is missing or unreadable, the folder holds no ``<id>.desc``,
            the message is not declared or is recursive, an option contradicts the wire format,
            or a registry's subject is unknown, its credentials refused, a version does not
            compile (naming subject, version and protoc's message) or none is Protobuf.
        SchemaLookupError: the registry could not be asked, naming the option and the registry.
        MissingDependencyError: the ``protobuf`` package (or, for a registry, ``grpcio-tools``)
            is not installed.
    """
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"stage {spec.name} decodes Protobuf with the protobuf package, which is not installed", "protobuf"
        ) from None
    sets: list[tuple[int, bytes]] = []
    registry: RegistrySource | None = None
    listed: frozenset[tuple[str, int]] = frozenset()
    latest: int | None = None  # a registry's default reader: the first subject's latest version's id
    if options.wire_format is WireFormat.CONFLUENT:
        schemas = options.schemas
        assert schemas is not None  # ProtobufOptions requires them with this wire format
        if isinstance(schemas, RegistryOptions):
            registry, versions, by_id = _from_registry(spec, schemas)
            sets = sorted(by_id.items())
            listed = frozenset((v.subject, v.version) for v in versions)
            latest = _latest(registry.subjects, versions, by_id)
            where = registry.describe()
        else:
            sets = _folder(spec, schemas)
            where = str(Path(schemas))
    else:
        path = options.descriptor
        assert path is not None  # ProtobufOptions requires it with this wire format
        sets.append((0, read_descriptor_set(path, spec.key("options.descriptor"))))
        where = path
    if options.reader_descriptor is not None:
        reader_set = read_descriptor_set(options.reader_descriptor, spec.key("options.reader_descriptor"))
        reader_where = options.reader_descriptor
    elif latest is not None:
        reader_set = dict(sets)[latest]
        reader_where = f"schema id {latest} of {where}"
    else:
        reader_set = sets[-1][1]
        reader_where = f"{where}/{sets[-1][0]}.desc" if options.wire_format is WireFormat.CONFLUENT else where
    reader, result_type = reader_message(reader_set, options.message, spec.key("options.message"), reader_where)
    return ProtobufDecode(
        name=spec.name,
        sets=tuple(sets),
        reader_set=reader_set,
        reader=reader,
        result_type=result_type,
        wire_format=options.wire_format is WireFormat.CONFLUENT,
        input=spec.input or VALUE,
        nullable=options.nullable,
        source=where,
        registry=registry,
        listed=listed,
    )


def _folder(spec: Declaration, folder: str) -> list[tuple[int, bytes]]:
    """The descriptor sets of a folder of ``<id>.desc`` files, by id."""
    source = FolderDescriptors(Path(folder))
    if not source.folder.is_dir():
        raise ConfigError(spec.key("options.schemas"), folder, "an existing folder of <id>.desc files")
    sets: list[tuple[int, bytes]] = []
    for sid in source.ids():
        try:
            sets.append((sid, source.descriptor_set(sid, spec.key("options.schemas"))))
        except UnknownSchemaIdError as exc:  # listed, then gone
            raise ConfigError(spec.key("options.schemas"), folder, f"readable descriptor sets ({exc})") from None
    if not sets:
        raise ConfigError(spec.key("options.schemas"), folder, "a folder holding at least one <id>.desc file")
    return sets


def _from_registry(
    spec: Declaration, options: RegistryOptions
) -> tuple[RegistrySource, list[SubjectVersion], dict[int, bytes]]:
    """The registry, every version of its subjects, and their Protobuf versions compiled, by schema id.

    Raises:
        MissingDependencyError: ``grpcio-tools`` (its ``protoc``) is not installed.
        ConfigError: as :func:`quarantine.stages.schema_registry.listed_versions`; a version does not compile
            (naming its subject, version and protoc's message); no version is Protobuf.
        SchemaLookupError: the registry could not be asked, naming the option.
    """
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"stage {spec.name} compiles the registry's .proto schemas with grpcio-tools' protoc, which is not "
            "installed", "protobuf",
        ) from None
    registry, versions = listed_versions(spec, options)
    protos, skipped = protobuf_versions(versions)
    warn_skipped(spec.name, skipped)
    client = registry.client()
    by_id: dict[int, bytes] = {}
    for v in protos:
        if v.schema_id in by_id:
            continue
        try:
            by_id[v.schema_id] = compile_version(v, client)
        except ProtoCompileError as exc:
            raise ConfigError(spec.key("options.schemas"), f"{v.subject} v{v.version}",
                              f"a .proto schema protoc compiles (schema id {v.schema_id}; protoc: {exc})") from None
        except SchemaLookupError as exc:
            raise replace_message(exc, f"{spec.key('options.schemas')}: could not read the references of "
                                  f"{v.subject} v{v.version} from {registry.describe()}: {exc}") from None
    if not by_id:
        why = "; ".join(f"{v.subject} v{v.version}: {reason}" for v, reason in skipped[:5])
        raise ConfigError(spec.key("options.schemas"), registry.describe(),
                          "subjects holding at least one Protobuf schema" + (f" ({why})" if why else ""))
    return registry, versions, by_id


def _latest(subjects: tuple[str, ...], versions: list[SubjectVersion], sets: dict[int, bytes]) -> int | None:
    """The schema id of the highest compiled version of the first subject that has one."""
    for subject in subjects:
        mine = [v for v in versions if v.subject == subject and v.schema_id in sets]
        if mine:
            return max(mine, key=lambda v: v.version).schema_id
    return None


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "protobuf", ProtobufOptions, from_spec,
    "Decode Protobuf, framed or plain; schemas from .desc files or a registry (deserialize). Input default: value.",
)
