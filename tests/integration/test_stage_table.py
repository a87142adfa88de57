"""One stage table: a stage type registered in one place is loaded, shown, validated, built and run.

The type below exists only in this test. Registering it (its options model, its factory)
is all it takes for the config loader to accept it, the JSON Schema to show it,
``Pipeline.check_config`` (what ``quarantine validate`` runs) to build it, and a batch run to
quarantine what it rejects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from pyspark.sql import Column
from pyspark.sql import functions as F

from quarantine._config_types import TEXT
from quarantine.config import StageSpec, json_schema, parse_config
from quarantine.errors import ConfigError
from quarantine.pipeline import Pipeline
from quarantine.schema import ErrorKind
from quarantine.stage import Stage, StageContext, outcome
from quarantine.stage_types import STAGE_TYPES, StageOptions, StageType, register_stage_type, unregister_stage_type
from tests.helpers import kafka_df


class ShoutOptions(StageOptions):
    """Options of the test-only ``shout`` stage."""

    suffix: Annotated[str, TEXT] = "!"
    """Appended to the upper-cased text."""


@dataclass(frozen=True, repr=False)
class Shout(Stage):
    """Upper-cases a string and appends a suffix; an empty string is an ``EmptyText`` error."""

    name: str
    input: str | None = None
    suffix: str = "!"
    kind: ErrorKind = ErrorKind.TRANSFORM

    deterministic = True

    def evaluate(self, value: Column, ctx: StageContext) -> Column:
        failed = F.coalesce(value == F.lit(""), F.lit(True))
        return outcome(F.concat(F.upper(value), F.lit(self.suffix)), failed,
                       self.error("EmptyText", F.lit("the text is empty or NULL")))


def _build(spec: StageSpec, options: ShoutOptions) -> Shout:
    return Shout(name=spec.name, input=spec.input, suffix=options.suffix)


@pytest.fixture
def shout() -> Iterator[StageType]:
    registered = register_stage_type(StageType("shout", ShoutOptions, _build, "Upper-cases text (transform)."))
    try:
        yield registered
    finally:
        unregister_stage_type("shout")


def _config(d: Path, options: dict[str, Any]) -> dict[str, Any]:
    return {
        "pipeline": "shouting",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "loud", "type": "shout", "options": options},
        ],
    }


def test_an_unregistered_type_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(tmp_path, {}))
    assert info.value.key == "stages[1].type"
    assert "decode_utf8" in info.value.allowed and "shout" not in info.value.allowed


def test_a_registered_type_is_loaded_shown_validated_and_built(shout: StageType, tmp_path: Path) -> None:
    assert STAGE_TYPES["shout"] is shout
    config = parse_config(_config(tmp_path, {"suffix": "?"}))
    assert config.stages[1].type == "shout"

    schema = json_schema()
    assert {"$ref": "#/definitions/ShoutStage"} in schema["properties"]["stages"]["items"]["oneOf"]
    assert schema["definitions"]["ShoutStage"]["description"] == "Upper-cases text (transform)."
    assert "suffix" in schema["definitions"]["ShoutOptions"]["properties"]

    stages = Pipeline.check_config(config)  # what `quarantine validate` runs
    assert isinstance(stages[1], Shout) and stages[1].suffix == "?"

    with pytest.raises(ConfigError) as info:  # its options model checks its options, naming the key
        parse_config(_config(tmp_path, {"sufix": "?"}))
    assert info.value.key == "stages[1].options.sufix"
    assert "did you mean 'stages[1].options.suffix'" in info.value.allowed


def test_a_registered_type_runs_and_quarantines_what_it_rejects(
    shout: StageType, spark: Any, tmp_path: Path
) -> None:
    kafka_df(spark, [b"hello", b"", b"ok"]).write.format("delta").save(str(tmp_path / "source"))
    summary = Pipeline.from_config(parse_config(_config(tmp_path, {})), spark, listeners=[]).run()

    assert (summary.records_in, summary.records_ok, summary.records_quarantined) == (3, 2, 1)
    target = spark.read.format("delta").load(str(tmp_path / "target"))
    assert sorted(r[0] for r in target.select("loud").collect()) == ["HELLO!", "OK!"]
    row = spark.read.format("delta").load(str(tmp_path / "quarantine")).collect()[0]
    assert (row["stage"], row["error_class"], row["value"]) == ("loud", "EmptyText", bytearray(b""))


def test_a_taken_name_is_refused(shout: StageType) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_stage_type(StageType("shout", ShoutOptions, _build, "again"))


class WhisperOptions(StageOptions):
    """Options of the replacing ``shout`` type."""

    prefix: Annotated[str, TEXT] = "psst "
    """Put before the text."""


def test_a_replaced_type_is_validated_with_its_new_options(shout: StageType, tmp_path: Path) -> None:
    parse_config(_config(tmp_path, {"suffix": "?"}))  # the loader has seen the first model
    register_stage_type(StageType("shout", WhisperOptions, _build, "Whispers (transform)."), replace=True)

    config = parse_config(_config(tmp_path, {"prefix": "hey "}))
    assert config.stages[1].options == {"prefix": "hey "}
    with pytest.raises(ConfigError) as info:
        parse_config(_config(tmp_path, {"suffix": "?"}))
    assert info.value.key == "stages[1].options.suffix"
    assert "WhisperOptions" in json_schema()["definitions"]
