"""``decode_utf8``: binary key/value bytes to a string, rejecting invalid UTF-8.

Spark's ``CAST(binary AS STRING)`` does not validate, so invalid bytes would
flow on silently; this stage checks with ``is_valid_utf8`` and quarantines.

Error classes and their messages::

    InvalidUtf8   column 'value' is not valid UTF-8 at byte 0 (0xC3) of 3 bytes, starting 0xC328FF
    NullInput     column 'value' is NULL; expected UTF-8 bytes   (unless nullable: true)

With ``nullable: true`` a NULL input gives a NULL result and no error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from quarantine.columns import VALUE, ErrorKind
from quarantine.stage import Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.values.types import BOOL

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType

__all__ = ["DecodeUtf8", "from_spec"]


class DecodeUtf8Options(StageOptions):
    """Options of a ``decode_utf8`` stage."""

    nullable: Annotated[bool, BOOL] = False
    """A NULL input is a NULL result (success) instead of a NullInput error; for an optional key."""


@dataclass(frozen=True, repr=False)
class DecodeUtf8(Stage):
    """Decode bytes as UTF-8.

    Attributes:
        name: stage name.
        input: the binary column (default ``value``).
        nullable: whether a NULL input is fine (result NULL) or an error.
    """

    name: str
    input: str | None = VALUE
    nullable: bool = False
    kind: ErrorKind = ErrorKind.DESERIALIZE

    deterministic = True  # pure Column expressions of the record

    def produces(self, input_type: DataType | None) -> DataType | None:
        """A STRING."""
        from pyspark.sql.types import StringType

        return StringType()

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        from pyspark.sql import functions as F

        is_null = value.isNull()
        valid = ctx.once("valid", F.is_valid_utf8(value))
        failed = F.coalesce(~valid, F.lit(not self.nullable))
        bad = _first_invalid_byte(value)
        message = (
            F.when(is_null, F.lit(f"{self._what()} is NULL; expected UTF-8 bytes"))
            .otherwise(
                F.format_string(
                    f"{self._what()} is not valid UTF-8 at byte %d (0x%s) of %d bytes, starting 0x%s",
                    bad, F.hex(F.substring(value, bad + 1, 1)), F.octet_length(value), F.hex(F.substring(value, 1, 16)),
                )
            )
        )
        error_class = F.when(is_null, F.lit("NullInput")).otherwise(F.lit("InvalidUtf8"))
        return outcome(value.cast("string"), failed, self.error(error_class, message))

    def _what(self) -> str:
        return f"column '{self.input}'" if self.input else "input"


def from_spec(spec: Declaration, options: DecodeUtf8Options | None) -> DecodeUtf8:
    """The stage ``spec`` declares, from its validated options (none: the defaults)."""
    options = options or DecodeUtf8Options()
    return DecodeUtf8(name=spec.name, input=spec.input or VALUE, nullable=options.nullable)


def _first_invalid_byte(value: Column) -> Column:
    """The 0-based offset of the first byte of ``value`` that starts no valid UTF-8 sequence.

    Computed only in the message of a failed row. Spark's ``make_valid_utf8`` puts U+FFFD
    where each invalid sequence was, so the valid prefix is the text before the first
    U+FFFD, and its length in bytes is the offset. A real U+FFFD in the bytes (EF BF BD,
    valid UTF-8) would end that prefix too early: it is masked first by three bytes of
    the same length (the cast to STRING keeps the bytes as they are, and ``replace``
    works on them byte for byte).
    """
    from pyspark.sql import functions as F

    masked = F.replace(value.cast("string"), F.lit("\ufffd"), F.lit("\x00\x00\x00"))
    fixed = F.make_valid_utf8(masked)
    return F.octet_length(F.substring(fixed, F.lit(1), F.instr(fixed, "\ufffd") - 1))


#: This module's stage type, listed in :data:`quarantine.stages.STAGE_TYPES`.
STAGE_TYPE = StageType(
    "decode_utf8", DecodeUtf8Options, from_spec,
    "Bytes to a string, rejecting invalid UTF-8 (deserialize). Input default: value.", options_required=False,
)
