"""One answer, two engines: every read-only command prints the same on Spark and on DuckDB (issue 53).

The quarantine and metrics tables are written by local Spark + Delta
(:mod:`tests.support.two_engines`: NULLs, instants from 1900 to 9999, bytes and a header key
that are not UTF-8, quotes and backslashes, several pipelines and statuses), once full and
once empty. Each command runs in this process through the CLI's :func:`~quarantine.cli.main`,
first with ``$QUARANTINE_READ_ENGINE=spark`` (the Spark path) and then as a user runs it
(path tables: delta-rs and DuckDB), and its exit code, stdout and stderr must be the same.
A table with a feature the installed delta-rs refuses (``typeWidening``, which the target's
schema evolution turns on) is answered by Spark after one line saying why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.ops.duck import ENGINE_ENV
from quarantine.sql import catalogue
from tests.helpers import orders_config
from tests.support.crash import write_conf
from tests.support.two_engines import PIPELINE, write_tables

#: Every read-only command's arguments after ``--conf FILE`` (``sql`` NAME before it).
COMMANDS: list[list[str]] = [
    ["inspect"],
    ["inspect", "--status", "all", "--limit", "100", "--json"],
    ["inspect", "--pipeline", "", "--status", "all", "--limit", "9"],
    ["inspect", "--status", "all", "--since", "2026-11-02", "--until", "2026-11-09T12:00", "--json"],
    ["inspect", "--status", "all", "--error-class", "Bad'Quote\\", "--json"],
    ["inspect", "--stage", "parse", "--status", "replayed"],
    ["stats"],
    ["stats", "--json"],
    ["stats", "--pipeline", "", "--json"],
    ["views", "--print"],
    *[["sql", name] for name in catalogue()],
    *[["sql", name, "--json", "--param", "pipeline="] for name in catalogue()],
    *[["sql", "error_rate", "--json", "--param", f"bucket={b}"] for b in ("minute", "day", "week", "month")],
    ["sql", "top_errors", "--param", "status=", "--limit", "2"],
    ["sql", "top_errors", "--json", "--param", "pipeline=nobody"],
    ["sql", "resolution_history", "--param", "status=discarded", "--json"],
    ["sql", "stuck_records", "--param", "hours=1", "--param", "failures=0", "--print"],
]


def _run(capsys: Any, monkeypatch: pytest.MonkeyPatch, engine: str, args: list[str]) -> tuple[int, str, str]:
    monkeypatch.setenv(ENGINE_ENV, engine)
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _without_open_hours(command: list[str], out: str) -> str:
    """stuck_records' ``open_hours`` is measured against the clock when it runs: out of the comparison."""
    if command[:2] != ["sql", "stuck_records"] or "--json" not in command:
        return out
    return json.dumps([{k: v for k, v in row.items() if k != "open_hours"} for row in json.loads(out)])


def _args(command: list[str], conf: Path) -> list[str]:
    at = 2 if command[0] == "sql" else 1
    return [*command[:at], "--conf", str(conf), *command[at:]]


@pytest.mark.parametrize("empty", [False, True], ids=["rows", "empty"])
def test_every_read_only_command_answers_the_same_on_spark_and_duckdb(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    tables = write_tables(spark, table_dir, empty=empty)
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": tables["quarantine"]})
    conf = write_conf({**raw, "metrics": {"table": tables["metrics"]}}, table_dir / "p.yml")
    differ = []
    for command in COMMANDS:
        args = _args(command, conf)
        on_spark = _run(capsys, monkeypatch, "spark", args)
        on_duckdb = _run(capsys, monkeypatch, "auto", args)
        if on_spark[0] != 0 or (on_spark[0], _without_open_hours(command, on_spark[1]), on_spark[2]) != (
            on_duckdb[0], _without_open_hours(command, on_duckdb[1]), on_duckdb[2]
        ):
            differ.append((command, on_spark, on_duckdb))
    assert not differ, "\n\n".join(f"{c}\nspark:  {s}\nduckdb: {d}" for c, s, d in differ)
    if not empty:  # the outputs hold what the tables were made to hold
        _, out, _ = _run(capsys, monkeypatch, "auto", _args(["inspect", "--status", "all", "--limit", "100",
                                                                "--json"], conf))
        records = json.loads(out)
        keys = {h["key"] for r in records for h in r["headers"]}
        assert "hex:6bff6579" in keys and {r["timestamp"] for r in records} >= {"9999-12-31T23:59:59.999999+00:00",
                                                                                "1900-01-01T00:00:00.000001+00:00"}
        assert {r["key"]["encoding"] for r in records} == {"hex", "utf-8", None}


def test_a_table_delta_rs_refuses_is_read_by_spark_after_one_line_saying_why(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = write_tables(spark, table_dir)
    spark.sql(f"ALTER TABLE delta.`{tables['quarantine']}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": tables["quarantine"]})
    conf = write_conf(raw, table_dir / "p.yml")
    args = ["stats", "--conf", str(conf), "--json"]
    on_spark = _run(capsys, monkeypatch, "spark", args)
    code, out, err = _run(capsys, monkeypatch, "auto", args)
    assert (code, out) == on_spark[:2]
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"quarantine: reading with Spark: delta-rs cannot read the quarantine table at "
                               f"{tables['quarantine']}: ") and "TypeWidening" in lines[0]
