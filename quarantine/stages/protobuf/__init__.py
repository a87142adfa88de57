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
--include_imports --descriptor_set_out`` writes them), read once when the stage is built
(:mod:`quarantine.stages.protobuf.descriptors`). Each record is parsed as its writer
message and read as the reader message (``message:``) field by field by name
(:mod:`quarantine.stages.protobuf.types`: the result type, defaults, widening).

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from quarantine.config import StageSpec
from quarantine.errors import ConfigError, MissingDependencyError
from quarantine.schema import VALUE, ErrorKind
from quarantine.stage import HIDDEN_PREFIX, Stage, StageContext
from quarantine.stage_types import ProtobufOptions
from quarantine.stages.protobuf.batch import UNKNOWN_FIELDS, DecodeBatch, ProtobufErrorClass, call_struct
from quarantine.stages.protobuf.descriptors import FolderDescriptors, read_descriptor_set
from quarantine.stages.schema_sources import UnknownSchemaIdError

__all__ = ["ProtobufDecode", "ProtobufErrorClass", "from_spec", "reader_message"]

_CALL = "call"


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

    # Each record gives the same outcome every time, but a Python parse costs more than keeping
    # the batch: not ``deterministic``, so the runner keeps the decoded batch instead of decoding twice.
    deterministic = False

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


def from_spec(spec: StageSpec, options: ProtobufOptions) -> ProtobufDecode:
    """Build the stage from its YAML declaration; the descriptor sets are read here, once.

    Raises:
        ConfigError: a descriptor set is missing or unreadable, the folder holds no ``<id>.desc``,
            the message is not declared or is recursive, or an option contradicts the wire format.
        MissingDependencyError: the ``protobuf`` package is not installed.
    """
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"stage {spec.name} decodes Protobuf with the protobuf package, which is not installed", "protobuf"
        ) from None
    sets: list[tuple[int, bytes]] = []
    if options.wire_format == "confluent":
        folder = options.schemas
        if folder is None:
            raise ConfigError(spec.key("options.schemas"), None, "a folder of <id>.desc descriptor sets "
                              "(required with wire_format: confluent)")
        source = FolderDescriptors(Path(folder))
        if not source.folder.is_dir():
            raise ConfigError(spec.key("options.schemas"), folder, "an existing folder of <id>.desc files")
        for sid in source.ids():
            try:
                sets.append((sid, source.descriptor_set(sid, spec.key("options.schemas"))))
            except UnknownSchemaIdError as exc:  # listed, then gone
                raise ConfigError(spec.key("options.schemas"), folder, f"readable descriptor sets ({exc})") from None
        if not sets:
            raise ConfigError(spec.key("options.schemas"), folder, "a folder holding at least one <id>.desc file")
        where = str(source.folder)
    else:
        path = options.descriptor
        if path is None:
            raise ConfigError(spec.key("options.descriptor"), None, "a .desc file (required with wire_format: none)")
        sets.append((0, read_descriptor_set(path, spec.key("options.descriptor"))))
        where = path
    if options.reader_descriptor is not None:
        reader_set = read_descriptor_set(options.reader_descriptor, spec.key("options.reader_descriptor"))
        reader_where = options.reader_descriptor
    else:
        reader_set = sets[-1][1]
        reader_where = f"{where}/{sets[-1][0]}.desc" if options.wire_format == "confluent" else where
    reader, result_type = reader_message(reader_set, options.message, spec.key("options.message"), reader_where)
    return ProtobufDecode(
        name=spec.name,
        sets=tuple(sets),
        reader_set=reader_set,
        reader=reader,
        result_type=result_type,
        wire_format=options.wire_format == "confluent",
        input=spec.input or VALUE,
        nullable=options.nullable,
        source=where,
    )
