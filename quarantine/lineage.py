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

:func:`lost_fields` follows each top-level field a stage produces to the target and names
the stage that leaves it out (a ``python`` stage with ``output: replace`` whose ``returns:``
does not declare it): ``quarantine validate`` prints it and every run's summary says it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quarantine.columns import KAFKA_SOURCE_COLUMNS, VALUE
from quarantine.errors import ConfigError
from quarantine.schema import source_column_type
from quarantine.stage import Declaration, Stage
from quarantine.values.paths import field_path
from quarantine.values.spark import type_name

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

__all__ = ["LostFields", "Produced", "check_lineage", "declared_result", "lost_fields"]


@dataclass(frozen=True)
class Produced:
    """What a column holds, as far as the config declares it.

    Attributes:
        by: who produced it, for messages (``stage 'parse' (json)``, ``the source column value``).
        type: its Spark type; None when it is not declared.
    """

    by: str
    type: DataType | None


@dataclass(frozen=True)
class LostFields:
    """Fields a stage produces that do not reach the target, and where they are left out.

    Attributes:
        fields: the top-level fields, in the order their stage produces them.
        origin: the stage that first produces them (its input does not hold them).
        by: the later stage on the way to the target whose result leaves them out; None when
            ``origin`` is not on that way (the target is ``last``'s result, which does not read it).
        last: the last stage (its result is the target's row).
    """

    fields: tuple[str, ...]
    origin: str
    by: str | None
    last: str

    def describe(self) -> str:
        """``field 'referrer' of stage 'parse' does not reach the target: stage 'enrich' leaves it out``."""
        one = len(self.fields) == 1
        names = ", ".join(f"'{f}'" for f in self.fields)
        verb = "does" if one else "do"
        head = f"{'field' if one else 'fields'} {names} of stage '{self.origin}' {verb} not reach the target"
        if self.by is not None:
            return f"{head}: stage '{self.by}' leaves {'it' if one else 'them'} out"
        return f"{head}: the target is the result of stage '{self.last}', which does not read stage '{self.origin}'"


def lost_fields(stages: Sequence[Stage]) -> tuple[LostFields, ...]:
    """Every top-level field a stage declares it produces that the target's row, as declared, does not hold.

    A field is followed by name from the stage that first produces it (a ``json`` stage's schema, a
    ``python`` stage's returned fields) along the stages that read it to the last stage; the first one
    whose declared result does not hold it is where it is left out. Where a result's type is not
    declared (known only once Spark runs) nothing is said past it. Pure: what ``quarantine validate``
    prints and every run's summary says (no Spark).
    """
    from pyspark.sql.types import StructType

    if not stages:
        return ()
    types, inputs, reads = _declared_types(stages)
    last = stages[-1].name
    way: list[str] = []  # the stages whose results the target's row is made from, first to last
    at: str | None = last
    while at in types:
        way.append(at)
        at = inputs[at]
    way.reverse()
    out: list[LostFields] = []
    for stage in stages:
        produced = types[stage.name]
        if not isinstance(produced, StructType):
            continue
        read = reads[stage.name]
        held = read.fieldNames() if isinstance(read, StructType) else []
        new = [f for f in produced.fieldNames() if f not in held]
        if stage.name in way:
            for later in way[way.index(stage.name) + 1:]:
                result = types[later]
                if result is None or not new:
                    break
                kept = result.fieldNames() if isinstance(result, StructType) else []
                left = tuple(f for f in new if f not in kept)
                if left:
                    out.append(LostFields(left, stage.name, later, last))
                new = [f for f in new if f in kept]
        elif types[last] is not None:
            target = types[last]
            kept = target.fieldNames() if isinstance(target, StructType) else []
            left = tuple(f for f in new if f not in kept)
            if left:
                out.append(LostFields(left, stage.name, None, last))
    return tuple(out)


def _declared_types(
    stages: Sequence[Stage],
) -> tuple[dict[str, DataType | None], dict[str, str], dict[str, DataType | None]]:
    """Per stage: its result type as declared (:meth:`Stage.produces`), the name of what it reads, and
    that input's declared type."""
    produced: dict[str, Produced] = {}
    inputs: dict[str, str] = {}
    reads: dict[str, DataType | None] = {}
    previous: str | None = None
    for stage in stages:
        source = (stage.input if stage.input is not None else previous) or VALUE
        inputs[stage.name] = source
        reads[stage.name] = _input(source, produced).type
        produced[stage.name] = Produced(stage.name, stage.produces(reads[stage.name]))
        previous = stage.name
    return {n: p.type for n, p in produced.items()}, inputs, reads


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
        shown = read.type.simpleString()
        raise ConfigError(key, name, f"an input with fields: {where} reads {read.by}, a {shown}, which has no fields")
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
