"""Commands that start at once (issue 53): what each imports, read from a fresh process's ``sys.modules``.

``quarantine --help`` and ``--version`` import no engine; ``quarantine validate`` imports no
Great Expectations, and still refuses a bad suite, naming the expectation and what is wrong.
No timing here: what a command imports is what it costs, and that is exact.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quarantine.cli import COMMANDS, _parser, command, main
from quarantine.columns import QuarantineStatus
from quarantine.commands.invocation import Command

REPO = Path(__file__).resolve().parents[2]

#: The engines a command imports only when it needs them.
ENGINES = ("pyspark", "pandas", "great_expectations", "mlflow", "plotly")

_LOADED = """
import json, sys
from quarantine.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code or 0
engines = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[1])))
print("ENGINES " + json.dumps(engines), file=sys.stderr)
sys.exit(code)
"""


def _run(*argv: str, cwd: Path = REPO) -> tuple[int, str, list[str]]:
    """``quarantine *argv`` in a fresh process: its exit code, its output, the engines it imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _LOADED, json.dumps(ENGINES), *argv], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300, check=False)
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("ENGINES "))
    return proc.returncode, proc.stdout + proc.stderr, json.loads(line.removeprefix("ENGINES "))


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("validate", "--help"), ("sql", "--help")])
def test_help_and_version_import_no_engine(argv: tuple[str, ...]) -> None:
    code, out, engines = _run(*argv)
    assert code == 0, out
    assert engines == [], f"quarantine {' '.join(argv)} imported {engines}"


def test_validate_checks_the_demo_suite_without_importing_great_expectations(tmp_path: Path) -> None:
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    code, out, engines = _run("validate", "--conf", str(tmp_path / "conf" / "orders_demo.yml"), cwd=tmp_path)
    assert code == 0, out
    assert "expect_order(ExpectationStage)" in out
    # the stage table's modules (the python stage's vectorized runner among them) load without pandas
    assert engines == ["pyspark"], engines


@pytest.mark.parametrize(
    ("expectation", "says"),
    [
        ({"type": "expect_column_values_to_be_nul", "kwargs": {"column": "order_id"}},
         ["GX has no expectation type 'expect_column_values_to_be_nul'", "did you mean",
          "expect_column_values_to_be_null"]),
        ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "sku"}}, ["missing argument 'value_set'"]),
        ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "sku", "colour": "red"}},
         ["takes no argument 'colour'"]),
        ({"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0, "mostly": 2}},
         ["argument 'mostly' is 2, not a number in [0, 1] or an object"]),
        ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "currency", "value_set": "EUR"}},
         ["argument 'value_set' is EUR, not a list or an object"]),
        ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": 7}},
         ["argument 'column' is 7, not a string"]),
    ],
)
def test_validate_refuses_a_bad_suite_naming_the_expectation_and_what_is_wrong(
    tmp_path: Path, expectation: dict[str, object], says: list[str]
) -> None:
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    suite = tmp_path / "conf" / "expectations" / "orders.json"
    raw = json.loads(suite.read_text(encoding="utf-8"))
    raw["expectations"].append(expectation)
    suite.write_text(json.dumps(raw), encoding="utf-8")
    code, out, engines = _run("validate", "--conf", str(tmp_path / "conf" / "orders_demo.yml"), cwd=tmp_path)
    assert code == 2, out
    assert f"expectations[{len(raw['expectations']) - 1}]" in out and "quarantine: bad config:" in out
    for fragment in says:
        assert fragment in out
    assert "great_expectations" not in engines


def test_inspects_status_default_is_the_open_status() -> None:
    """The parser spells ``open`` itself (``quarantine.schema`` imports pyspark, not wanted at ``--help``)."""
    assert _parser().parse_args(["inspect", "--conf", "c.yml"]).status == QuarantineStatus.OPEN.value


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_declared_whole_by_its_module_under_commands(name: str) -> None:
    declared = command(name)
    assert COMMANDS[name] == f"quarantine.commands.{name.replace('-', '_')}"
    assert isinstance(declared, Command) and declared.handle.__module__ == COMMANDS[name]
    assert declared.arguments.__module__ == COMMANDS[name] and declared.examples


def test_a_new_command_is_a_module_and_one_line_in_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "extra_commands"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "hello.py").write_text(
        "from quarantine.commands.invocation import Command\n"
        "def _arguments(parser):\n    parser.add_argument('--to', required=True, help='whom')\n"
        "def _handle(call):\n    print(f'hello {call.args.to}')\n    return 0\n"
        "COMMAND = Command(help='say hello', examples=('quarantine hello --to you',), arguments=_arguments,"
        " handle=_handle)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(COMMANDS, "hello", "extra_commands.hello")  # the one line
    assert main(["hello", "--to", "you"]) == 0
    assert capsys.readouterr().out == "hello you\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "say hello" in listed and "  quarantine hello --to you" in listed  # with its first example
