"""Column lineage of a pipeline's stages: what each stage reads is what an earlier one declares it produces.

Each stage declares its output before Spark starts (:meth:`Stage.produces
<quarantine.stage.Stage.produces>`: ``decode_utf8`` gives a STRING, ``json`` its schema,
``cast`` its input struct with the converted fields…), the fields of its input it reads
(:meth:`~quarantine.stage.Stage.fields_read`) and whether it reads text
(:attr:`~quarantine.stage.Stage.reads_text`); this module asks the stages, never their type
names. The source columns are those of Spark's Kafka source
(:data:`quarantine.schema.KAFKA_SOURCE_SCHEMA`).
:func:`check_lineage` holds each stage to that, so a config that cannot run fails when its
stages are built (``quarantine validate`` and every run), naming the stage and the key:

* a ``checks`` rule's ``column`` or a ``cast`` column that the input does not have
  (with the columns it has, and the nearest one);
* a field read from an input that is not a struct (a STRING has no fields);
* a ``json`` stage reading BINARY (the raw ``value`` or ``key``) instead of a
  ``decode_utf8`` stage's STRING.

Where an input's type is not declared (a source column other than Kafka's, a stage
type it does not know) nothing is guessed: that input is not checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quarantine.errors import ConfigError
from quarantine.schema import KAFKA_SOURCE_COLUMNS, VALUE, source_column_type
from quarantine.stage import Declaration, Stage
from quarantine.values.paths import field_path
from quarantine.values.spark import type_name

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

__all__ = ["Produced", "check_lineage", "declared_result"]


@dataclass(frozen=True)
class Produced:
    """What a column holds, as far as the config declares it.

    Attributes:
        by: who produced it, for messages (``stage 'parse' (json)``, ``the source column value``).
        type: its Spark type; None when it is not declared.
    """

    by: str
    type: DataType | None


def check_lineage(specs: Sequence[Declaration], stages: Sequence[Stage]) -> None:
    """Check every stage's input against what the stages before it declare.

    Args:
        specs: the stages as declared (their types and config keys).
        stages: the same stages, built (their parsed schemas and effective inputs).

    Raises:
        ConfigError: naming the key of the first column a stage reads that its input
            does not have, or of a json stage reading BINARY.
    """
    _walk(specs, stages, check=True)


def declared_result(specs: Sequence[Declaration], stages: Sequence[Stage]) -> DataType | None:
    """The last stage's result type as the config declares it (the target's row: see
    :func:`quarantine.schema.target_columns`); None when it is only known once Spark runs."""
    if not stages:
        return None
    return _walk(specs, stages, check=False)[stages[-1].name].type


def _walk(specs: Sequence[Declaration], stages: Sequence[Stage], *, check: bool) -> dict[str, Produced]:
    """What each stage produces, in order; each stage's input checked first when ``check``."""
    produced: dict[str, Produced] = {}
    previous: str | None = None
    for spec, stage in zip(specs, stages, strict=True):
        source = stage.input if stage.input is not None else previous
        read = _input(source or VALUE, produced)
        if check:
            _check_stage(spec, stage, source or VALUE, read)
        produced[stage.name] = Produced(f"stage '{stage.name}' ({spec.type})", stage.produces(read.type))
        previous = stage.name
    return produced


def _input(name: str, produced: Mapping[str, Produced]) -> Produced:
    if name in produced:
        return produced[name]
    if name in KAFKA_SOURCE_COLUMNS:
        return Produced(f"the source column {name}", source_column_type(name))
    return Produced(f"the column {name}", None)  # not a Kafka column: what it holds is not declared


def _check_stage(spec: Declaration, stage: Stage, source: str, read: Produced) -> None:
    from pyspark.sql.types import BinaryType

    where = f"stage '{stage.name}' ({spec.key()})"
    if stage.reads_text and isinstance(read.type, BinaryType):
        raise ConfigError(
            spec.key("input"), source,
            f"a STRING for {where} to parse: it reads {read.by}, the raw BINARY bytes; add a decode_utf8 stage "
            f"before it ({{name: decode, type: decode_utf8, input: {source}}}) and let it read that stage",
        )
    for option, name in stage.fields_read():
        _has_field(read, name, spec.key(option), where)


def _has_field(read: Produced, name: str, key: str, where: str) -> None:
    """``read`` has the field ``name`` (a top-level name, or a path into nested structs:
    ``device.screen_w``), unless its type is not declared."""
    from pyspark.sql.types import StructType

    if read.type is None:
        return
    if not isinstance(read.type, StructType):
        raise ConfigError(
            key, name, f"an input with fields: {where} reads {read.by}, a {read.type.simpleString()}, which has no fields"
        )
    path = field_path(name, read.type)
    struct: StructType = read.type
    for depth, part in enumerate(path):
        names = struct.fieldNames()
        if part not in names:
            near = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
            hint = f"; did you mean '{'.'.join((*path[:depth], near[0]))}'?" if near else ""
            of = f"a field of {'.'.join(path[:depth])} in" if depth else "a field of"
            raise ConfigError(
                key, name, f"{of} the input of {where}, which reads {read.by}: one of {', '.join(names)}{hint}"
            )
        inner = struct[part].dataType
        if depth + 1 < len(path) and not isinstance(inner, StructType):
            shown = ".".join(path[: depth + 1])
            raise ConfigError(
                key, name, f"a path through structs: {shown} in the input of {where} is {type_name(inner)}, "
                "which has no fields",
            )
        if isinstance(inner, StructType):
            struct = inner
