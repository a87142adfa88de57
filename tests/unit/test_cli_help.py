"""The command line as a new user meets it: --version, --help, and quiet logs (issue 13, item 6)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from quarantine import __version__
from quarantine.cli import COMMANDS, main

RST = re.compile(r"``|:(?:func|class|meth|mod|data):`")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out + out.err


def test_version_names_the_distribution_and_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"quarantine (spark-quarantine) {version('spark-quarantine')}"
    assert __version__ == version("spark-quarantine")


def test_top_level_help_lists_every_command_with_an_example_in_plain_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _run(capsys, "--help")
    assert code == 0 and not RST.search(out)
    for command in COMMANDS:
        assert command in out
    assert "Examples:" in out and "quarantine run --conf" in out
    assert "Exit codes:" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help_is_plain_text_with_an_example_of_that_command(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, command, "--help")
    assert code == 0 and not RST.search(out)
    assert "Example" in out
    assert f"quarantine {command}" in out.split("Example", 1)[1]


@pytest.fixture
def _logging_reset() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("great_expectations").level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    logging.getLogger("great_expectations").setLevel(saved[2])


@pytest.mark.usefixtures("_logging_reset")
@pytest.mark.parametrize(("flags", "third_party"), [((), logging.WARNING), (("--verbose",), logging.INFO)])
def test_third_party_info_is_off_unless_verbose(
    flags: tuple[str, ...], third_party: int, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    assert main([*flags, "schema", "--out", f"{tmp_path}/s.json"]) == 0
    gx = logging.getLogger("great_expectations.data_context")
    assert gx.getEffectiveLevel() == third_party  # GX's INFO chatter (200+ lines in the demo)
    assert logging.getLogger("quarantine").getEffectiveLevel() == logging.INFO  # our own progress stays
