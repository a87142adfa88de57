"""Every command ``benchmarks.bench_commands`` times is one the CLI takes, as written.

The benchmark runs each as a process (``python -m quarantine ...``) on the demo's tables;
tests/e2e/test_benchmarks_smoke.py runs them so. An argument the CLI no longer takes would
exit 2 halfway through ``make bench``: this finds it with the CLI's own parser, no process
and no JVM.
"""

from __future__ import annotations

import pytest

from benchmarks import bench_commands
from benchmarks.bench_commands import COMMANDS, READ_ONLY, demo_commands
from quarantine.cli import _parser

#: Every command the benchmark starts, by label: the demo's two, then the timed ones.
ALL = {**demo_commands(2000), **COMMANDS}


@pytest.mark.parametrize("label", list(ALL))
def test_each_benchmarked_command_parses_with_the_clis_parser(label: str) -> None:
    args = ALL[label]
    parsed = _parser().parse_args(list(args))  # exits 2 on an argument it does not take
    assert parsed.command == args[0] == label.split()[0]
    if parsed.command != "init-demo":
        # the demo's config, as copied into the benchmark's folder (a copy of conf/)
        assert parsed.conf == "conf/orders_demo.yml"
        assert (bench_commands._REPO / parsed.conf).is_file()


def test_the_sql_commands_name_queries_of_the_library() -> None:
    from quarantine.sql import get_query

    names = [_parser().parse_args(list(a)).name for a in COMMANDS.values() if a[0] == "sql"]
    assert names == ["top_errors", "error_rate"]
    for name in names:
        get_query(name)  # raises ConfigError for a name the library does not have


def test_the_read_only_commands_are_benchmarked_commands() -> None:
    assert set(COMMANDS) >= READ_ONLY and "maintain" not in READ_ONLY


@pytest.mark.parametrize("label", list(bench_commands.STARTUP))
def test_each_startup_command_is_an_answer_of_the_clis_parser(label: str) -> None:
    """``--help`` and ``--version``: the parser answers them and exits 0 (no command runs)."""
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(list(bench_commands.STARTUP[label]))
    assert info.value.code == 0


def test_every_startup_goal_names_a_timed_command() -> None:
    assert set(bench_commands.STARTUP_GOALS_S) <= {*bench_commands.STARTUP, *COMMANDS}
