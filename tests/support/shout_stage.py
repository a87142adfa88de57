"""A test-only stage type written as a built-in one is: one module holding its options model
(with a cross-field rule as a validator), its factory, its code and what it reads and produces,
declared as ``STAGE_TYPE``. Registering that one line (:func:`quarantine.stages.register_stage_type`)
is all the config loader, the JSON Schema, the reference, ``quarantine validate``, lineage and a
run need (``tests/integration/test_stage_table.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Self

from pydantic import model_validator
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType

from quarantine.columns import ErrorKind
from quarantine.stage import Declaration, Stage, StageContext, StageOptions, StageType, outcome
from quarantine.values.types import TEXT, fail, integer

__all__ = ["STAGE_TYPE", "Shout", "ShoutOptions", "from_spec"]


class ShoutOptions(StageOptions):
    """Options of the test-only ``shout`` stage."""

    suffix: Annotated[str, TEXT] = "!"
    """Appended to the upper-cased text."""
    times: Annotated[int, integer(1)] = 1
    """How many times the suffix is appended."""

    @model_validator(mode="after")
    def _not_too_loud(self) -> Self:
        if len(self.suffix) * self.times > 10:
            raise fail(f"at most {10 // len(self.suffix)} times a {len(self.suffix)}-character suffix", at="times",
                       value=self.times)
        return self


@dataclass(frozen=True, repr=False)
class Shout(Stage):
    """Upper-cases a string and appends a suffix; an empty string is an ``EmptyText`` error."""

    name: str
    input: str | None = None
    suffix: str = "!"
    kind: ErrorKind = ErrorKind.TRANSFORM

    deterministic = True
    reads_text = True

    def produces(self, input_type: DataType | None) -> DataType | None:
        """A STRING."""
        return StringType()

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        failed = F.coalesce(value == F.lit(""), F.lit(True))
        return outcome(F.concat(F.upper(value), F.lit(self.suffix)), failed,
                       self.error("EmptyText", F.lit("the text is empty or NULL")))


def from_spec(spec: Declaration, options: ShoutOptions) -> Shout:
    """The stage ``spec`` declares, from its validated options."""
    return Shout(name=spec.name, input=spec.input, suffix=options.suffix * options.times)


#: This module's stage type: the one line a stage table lists.
STAGE_TYPE = StageType("shout", ShoutOptions, from_spec, "Upper-cases text (transform).")
