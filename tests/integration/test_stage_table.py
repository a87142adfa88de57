"""One stage table: a stage type declared in one module and listed in one line is loaded, shown,
validated, built, checked for lineage and run.

The type (``tests/support/shout_stage.py``) exists only for these tests and is written as a
built-in is: its module holds its options model (a cross-field rule as a validator), its
factory, its code and what it reads and produces. Registering its ``STAGE_TYPE`` is all it
takes for the config loader to accept it, the JSON Schema and the reference to show it,
``Pipeline.check_config`` (what ``quarantine validate`` runs) to build it, lineage to check what
reads it, and a batch run to quarantine what it rejects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pyspark.sql.types import StringType

from quarantine.config import json_schema, parse_config
from quarantine.config.reference import stages_page
from quarantine.errors import ConfigError
from quarantine.lineage import declared_result
from quarantine.pipeline import Pipeline
from quarantine.stage import StageOptions, StageType
from quarantine.stages import STAGE_TYPES, register_stage_type, unregister_stage_type
from quarantine.values.types import TEXT
from tests.helpers import kafka_df
from tests.support import shout_stage
from tests.support.shout_stage import Shout, ShoutOptions


@pytest.fixture
def shout() -> Iterator[StageType]:
    registered = register_stage_type(shout_stage.STAGE_TYPE)  # the one line a built-in adds to the table
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

    with pytest.raises(ConfigError) as info:  # and its cross-field rule, when the config is loaded
        parse_config(_config(tmp_path, {"suffix": "!!!", "times": 4}))
    assert (info.value.key, info.value.value) == ("stages[1].options.times", 4)
    assert "at most 3 times a 3-character suffix" in info.value.allowed

    assert "\n## shout\n" in stages_page() and "#### `shout` option `times`" in stages_page()


def test_a_registered_type_reports_its_lineage(shout: StageType, tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path, {}))
    assert declared_result(config.stages, Pipeline.check_config(config)) == StringType()

    raw = _config(tmp_path, {})
    raw["stages"][1]["input"] = "value"  # the raw bytes: it reads text
    with pytest.raises(ConfigError) as info:
        Pipeline.check_config(parse_config(raw))
    assert info.value.key == "stages[1].input"
    assert "the raw BINARY bytes; add a decode_utf8 stage" in info.value.allowed

    raw = _config(tmp_path, {})
    raw["stages"].append({"name": "check", "type": "checks", "options": {"rules": [
        {"column": "word", "check": "not_null"},
    ]}})
    with pytest.raises(ConfigError) as info:  # what it produces (a STRING) has no fields to check
        Pipeline.check_config(parse_config(raw))
    assert info.value.key == "stages[2].options.rules[0].column"
    assert "stage 'loud' (shout), a string, which has no fields" in info.value.allowed


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
        register_stage_type(StageType("shout", ShoutOptions, shout_stage.from_spec, "again"))


class WhisperOptions(StageOptions):
    """Options of the replacing ``shout`` type."""

    prefix: Annotated[str, TEXT] = "psst "
    """Put before the text."""


def test_a_replaced_type_is_validated_with_its_new_options(shout: StageType, tmp_path: Path) -> None:
    parse_config(_config(tmp_path, {"suffix": "?"}))  # the loader has seen the first model
    whisper = StageType("shout", WhisperOptions, shout_stage.from_spec, "Whispers (transform).")
    register_stage_type(whisper, replace=True)

    config = parse_config(_config(tmp_path, {"prefix": "hey "}))
    assert config.stages[1].options == {"prefix": "hey "}
    with pytest.raises(ConfigError) as info:
        parse_config(_config(tmp_path, {"suffix": "?"}))
    assert info.value.key == "stages[1].options.suffix"
    assert "WhisperOptions" in json_schema()["definitions"]
