"""The ``quarantine`` entry point as a Databricks wheel task calls it.

A ``python_wheel_task`` looks the entry point up in the wheel's metadata and calls the
function with ``sys.argv`` set to the task's parameters; a value it returns is ignored.
So a failed command must raise ``SystemExit`` with its non-zero code, or the task
finishes green; a successful one returns normally.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest


def _entry_point() -> object:
    [ep] = [ep for ep in entry_points(group="console_scripts") if ep.name == "quarantine"]
    return ep.load()


def test_a_failing_command_raises_system_exit_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["quarantine", "validate", "--conf", str(tmp_path / "missing.yml")])
    with pytest.raises(SystemExit) as info:
        _entry_point()()  # type: ignore[operator]
    assert info.value.code == 2


def test_a_successful_command_returns_without_raising(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "schema.json"
    monkeypatch.setattr(sys, "argv", ["quarantine", "schema", "--out", str(out)])
    _entry_point()()  # type: ignore[operator]
    assert out.read_text().startswith("{")


def test_discard_needs_a_reason_but_its_dry_run_does_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from quarantine.cli import main

    where = ["--conf", str(tmp_path / "missing.yml"), "--where", "stage = 'decode'"]
    for reason in ([], ["--reason", "  "]):
        with pytest.raises(SystemExit) as info:
            main(["discard", *where, *reason])
        assert info.value.code == 2
        assert "discard needs --reason" in capsys.readouterr().err
    # a dry run gets past the arguments: it fails on the config it was given, not on --reason
    assert main(["discard", *where, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "missing.yml" in err and "--reason" not in err
    # a blank --where would select every open row: refused before the config is read, dry run or not
    for dry_run in ([], ["--dry-run"]):
        with pytest.raises(SystemExit) as info:
            main(["discard", "--conf", str(tmp_path / "missing.yml"), "--where", "  ", "--reason", "x", *dry_run])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "discard needs a --where predicate" in err and "missing.yml" not in err
