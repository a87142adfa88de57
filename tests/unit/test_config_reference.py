"""The reference pages (docs/reference/config.md, stages.md): generated, never stale, and every example loads.

The pages are rendered from the config models and the stage table
(:mod:`quarantine.config.reference`); the committed files must be what the code renders
now, every key must come with a description and an example, every key's example must be
a value its field accepts, and every fenced YAML example must load through the config
loader as part of a config. A stage type registered at run time appears in the stage page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from pydantic import BaseModel, Field, TypeAdapter

from quarantine.config import PipelineConfig, parse_config
from quarantine.config.reference import COMMAND, EXAMPLE_MARKER, pages, stages_page
from quarantine.stage import StageOptions, StageType
from quarantine.stages import STAGE_TYPES, register_stage_type, unregister_stage_type
from quarantine.stages.checks import RULES
from quarantine.values.types import BOOL, integer

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference"

#: A config every example is loaded into: each top-level key of an example replaces this one's.
BASE: dict[str, Any] = {
    "pipeline": "orders",
    "source": {"format": "delta", "path": "/data/source"},
    "target": {"table": "/data/target", "checkpoint": "/data/checkpoints/orders"},
    "errors": {"deadletterqueue.table.name": "/data/quarantine"},
    "stages": [{"name": "decode", "type": "decode_utf8"}],
}


def _examples(text: str) -> Iterator[str]:
    """The fenced YAML blocks of a page that follow :data:`EXAMPLE_MARKER`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == EXAMPLE_MARKER:
            assert lines[i + 1] == "```yaml", f"the marker at line {i + 1} is not followed by a yaml fence"
            end = lines.index("```", i + 2)
            yield "\n".join(lines[i + 2 : end])


EXAMPLES = [
    pytest.param(example, id=f"{name}[{n}]")
    for name, text in pages().items()
    for n, example in enumerate(_examples(text))
]


def test_the_committed_pages_are_the_generated_ones() -> None:
    for name, text in pages().items():
        path = REFERENCE / name
        assert path.is_file() and path.read_text(encoding="utf-8") == text, (
            f"docs/reference/{name} is stale: run `{COMMAND}`"
        )


def test_every_yaml_block_is_marked_as_a_loaded_example() -> None:
    for name, text in pages().items():
        fences = text.count("```yaml")
        assert fences == len(list(_examples(text))) > 0, f"{name}: a yaml block without {EXAMPLE_MARKER}"


def test_every_key_has_a_description_a_type_a_default_and_an_example() -> None:
    for name, text in pages().items():
        assert "(No description.)" not in text, name
        assert text.count("\n- Type: ") == text.count("\n- Default: ") == text.count("\n- Example: "), name


SECTIONS = ("source", "target", "errors", "metrics", "mlflow", "spark")


def test_every_key_of_every_section_has_its_heading() -> None:
    page = pages()["config.md"]
    for name in PipelineConfig.model_fields:
        assert f"### `{name}`" in page
    for section in SECTIONS:
        model = PipelineConfig.model_fields[section].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, f in model.model_fields.items():
            assert f"### `{section}.{f.alias or name}`" in page


def test_every_stage_type_and_every_checks_rule_option_is_in_the_stage_page() -> None:
    page = pages()["stages.md"]
    for name, stage_type in STAGE_TYPES.items():
        assert f"\n## {name}\n" in page
        for option, f in stage_type.options.model_fields.items():
            assert f"#### `{name}` option `{f.alias or option}`" in page
    for check, rule in RULES.items():
        assert f"### `rules`: `check: {check}`" in page
        for option in rule.model_fields.keys() - {"check"}:
            assert f"#### `{check}` option `{option}`" in page


def _models() -> Iterator[type[BaseModel]]:
    for field in PipelineConfig.model_fields.values():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield field.annotation
    yield PipelineConfig
    for stage_type in STAGE_TYPES.values():
        yield stage_type.declaration
        yield stage_type.options
    yield from RULES.values()


@pytest.mark.parametrize("model", list(_models()), ids=lambda m: m.__name__)
def test_every_key_s_example_is_a_value_its_field_accepts(model: type[BaseModel]) -> None:
    for field in model.model_fields.values():
        for example in field.examples or ():
            TypeAdapter(Annotated[(field.annotation, *field.metadata)]).validate_python(example)  # type: ignore[misc]


def _files_named(fragment: dict[str, Any], folder: Path) -> None:
    """Create the files and folders a fragment's stages name (an expectation suite, Avro schemas)."""
    for stage in fragment.get("stages", ()):
        options = stage.get("options") or {}
        for option in getattr(STAGE_TYPES[stage["type"]].options, "paths", ()):
            if option in options:
                path = folder / options[option]
                if path.suffix:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("{}", encoding="utf-8")
                else:
                    path.mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_yaml_example_loads_as_part_of_a_config(
    example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fragment = yaml.safe_load(example)
    for variable in re.findall(r"\$\{env:(\w+)\}", example):
        monkeypatch.setenv(variable, "example-value")
    _files_named(fragment, tmp_path)
    config = parse_config({**BASE, **fragment}, base_dir=tmp_path)
    for key, value in fragment.items():
        if "${env:" in example:
            assert "example-value" in str(config.raw[key])
        elif key == "stages":
            assert [s.type for s in config.stages] == [s["type"] for s in value]
        else:
            assert config.raw[key] == value


class ShoutOptions(StageOptions):
    """Options of a ``shout`` stage (a type only this test registers)."""

    times: Annotated[int, integer(1)] = Field(1, examples=[3])
    """How many exclamation marks follow the text."""
    whisper: Annotated[bool, BOOL] = False
    """Lower-case instead."""


def test_a_registered_stage_type_appears_in_the_stage_page_and_its_example_loads() -> None:
    register_stage_type(StageType("shout", ShoutOptions, "tests.unit.test_config_reference:no_factory",
                                  "Upper-cases text (transform).", options_required=False))
    try:
        page = stages_page()
        examples = [yaml.safe_load(e) for e in _examples(page)]
    finally:
        unregister_stage_type("shout")
    assert "\n## shout\n\nUpper-cases text (transform).\n" in page
    assert "[`shout`](#shout)" in page
    assert "#### `shout` option `times`\n\nHow many exclamation marks follow the text." in page
    assert "- Example: `times: 3`" in page
    assert "- Example: `whisper: true`" in page
    shout = [e for e in examples if e["stages"][0]["type"] == "shout"]
    assert shout == [{"stages": [{"name": "shout", "type": "shout"}]}]
    assert "shout" not in stages_page()
