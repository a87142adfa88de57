"""``decode_utf8``: binary key/value bytes to a string, rejecting invalid UTF-8.

Spark's ``CAST(binary AS STRING)`` does not validate, so invalid bytes would
flow on silently; this stage checks with ``is_valid_utf8`` and quarantines.

Error classes and their messages::

    InvalidUtf8   column 'value' is not valid UTF-8 (3 bytes, starting 0xC328FF)
    NullInput     column 'value' is NULL; expected UTF-8 bytes   (unless nullable: true)

With ``nullable: true`` a NULL input gives a NULL result and no error.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine.config import StageSpec
from quarantine.schema import VALUE, ErrorKind
from quarantine.stage import Stage, StageContext, outcome
from quarantine.stage_types import DecodeUtf8Options

__all__ = ["DecodeUtf8", "from_spec"]


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

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        is_null = value.isNull()
        valid = ctx.once("valid", F.is_valid_utf8(value))
        failed = F.coalesce(~valid, F.lit(not self.nullable))
        message = (
            F.when(is_null, F.lit(f"{self._what()} is NULL; expected UTF-8 bytes"))
            .otherwise(
                F.format_string(
                    f"{self._what()} is not valid UTF-8 (%d bytes, starting 0x%s)",
                    F.octet_length(value), F.hex(F.substring(value, 1, 16)),
                )
            )
        )
        error_class = F.when(is_null, F.lit("NullInput")).otherwise(F.lit("InvalidUtf8"))
        return outcome(value.cast("string"), failed, self.error(error_class, message))

    def _what(self) -> str:
        return f"column '{self.input}'" if self.input else "input"


def from_spec(spec: StageSpec, options: DecodeUtf8Options | None) -> DecodeUtf8:
    """The stage ``spec`` declares, from its validated options (none: the defaults)."""
    options = options or DecodeUtf8Options()
    return DecodeUtf8(name=spec.name, input=spec.input or VALUE, nullable=options.nullable)
