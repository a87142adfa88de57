"""One answer, two engines: every read-only command prints the same on Spark and on DuckDB.

Each read is written once, as Spark SQL over the views ``quarantine`` and ``metrics``
(``quarantine/sql/``, :mod:`quarantine.ops.reads`); this test proves the two engines' adapters
(the views each registers, DuckDB's dialect translation, the rows each collects).

``report``'s data and page, and ``replay --dry-run``'s selection (its outcomes run the stages
on Spark on both paths), are compared too; a ``--where`` DuckDB cannot take, or would read
otherwise than Spark, is selected by Spark after one line saying why.

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

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.commands.options import parse_time
from quarantine.config import PipelineConfig, load_config
from quarantine.ops.duck import ENGINE_ENV, DuckEngine
from quarantine.ops.reads import Engine, Reads, replay_selection, report_data
from quarantine.ops.spark_reads import SparkEngine
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


def _on(engine: Engine, config: PipelineConfig, read: Any) -> Any:
    """``read`` over ``config``'s tables on ``engine`` (its views dropped after)."""
    try:
        return read(Reads.of(engine, config))
    finally:
        engine.close()


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


# --------------------------------------------------------------------------- report


#: ``quarantine report``'s page minus what differs from one run to the next: the time it was generated.
_GENERATED = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def _report(capsys: Any, monkeypatch: pytest.MonkeyPatch, engine: str, args: list[str], page: Path) -> tuple[Any, ...]:
    code, out, err = _run(capsys, monkeypatch, engine, args)
    text = _GENERATED.sub("generated (when)", page.read_text(encoding="utf-8")) if page.exists() else None
    page.unlink(missing_ok=True)
    return code, out, err, text


@pytest.mark.parametrize("empty", [False, True], ids=["rows", "empty"])
def test_the_report_is_the_same_on_spark_and_duckdb(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    tables = write_tables(spark, table_dir, empty=empty)
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": tables["quarantine"]})
    with_metrics = {**raw, "metrics": {"table": tables["metrics"]}}
    configs = {
        "metrics": with_metrics,
        "no metrics table": raw,
        "metrics table not written yet": {**raw, "metrics": {"table": str(table_dir / "no_metrics")}},
        "quarantine table not written yet": {
            **orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": str(table_dir / "none")}),
            "metrics": {"table": tables["metrics"]},
        },
    }
    at = dt.datetime(2026, 11, 29, 6, tzinfo=dt.UTC)
    page = table_dir / "out" / "r.html"
    differ = []
    for label, cfg in configs.items():
        conf = write_conf(cfg, table_dir / "p.yml")
        config = load_config(conf)
        for since in (None, "2026-10-05", "2026-09-20T07:00:00+02:00") if label == "metrics" else (None,):
            when = parse_time(since, "--since") if since else None
            # the data the page is drawn from: the same reads on each engine
            on_spark = _on(SparkEngine(spark), config, lambda r, w=when: report_data(r, PIPELINE, since=w, now=at))
            on_duckdb = _on(DuckEngine(), config, lambda r, w=when: report_data(r, PIPELINE, since=w, now=at))
            if on_spark != on_duckdb:
                differ.append((label, since, on_spark, on_duckdb))
            if since == "2026-10-05":
                continue  # the command is slow on Spark: each config once, the full one with a --since too
            # the command: summary, page (minus its time stamp), exit code
            args = ["report", "--conf", str(conf), "--out", str(page), *(["--since", since] if since else [])]
            spark_run = _report(capsys, monkeypatch, "spark", args, page)
            duckdb_run = _report(capsys, monkeypatch, "auto", args, page)
            if spark_run[0] != 0 or spark_run != duckdb_run:
                differ.append((label, since, spark_run[:3], duckdb_run[:3]))
    assert not differ, "\n\n".join(f"{c} since {s}\nspark:  {a}\nduckdb: {b}" for c, s, a, b in differ)
    if not empty:  # the data holds what the tables were made to hold
        data = _on(DuckEngine(), load_config(write_conf(with_metrics, table_dir / "p.yml")),
                   lambda r: report_data(r, PIPELINE, now=at))
        assert {r[3] for r in data.breaches} == {None, "check_order"} and data.resolution_runs
        first = dt.datetime(1969, 12, 31, 23, 59, 59, 999999)  # its run's first row; 1.75 and 6.75 truncated
        assert [b for b in data.breaches if b[0] == "run-b1"] == [("run-b1", first, 1, None),
                                                                   ("run-b1", first, 6, "check_order")]
        assert data.unit == "day" and data.over_time and data.replays and data.records_in


# --------------------------------------------------------------------------- replay --dry-run


#: ``replay --dry-run``'s arguments after ``--conf FILE``: each selects on DuckDB over path tables.
DRY_RUNS: list[list[str]] = [
    ["--dry-run"],
    ["--dry-run", "--where", "stage = 'parse'"],
    ["--dry-run", "--where", "error_class = 'Bad\\'Quote\\\\' AND `offset` > 100 AND partition = 1 OR topic IS NULL"],
    ["--dry-run", "--where", "message LIKE '%ünïcode' AND last_seen_at < '2026-11-03T00:00:00' "
                             "AND first_seen_date >= '2026-09-25'"],
    ["--dry-run", "--where", "stage = 'nothing'"],
]
#: Predicates DuckDB cannot take or would read otherwise: Spark selects, after one line saying why.
SPARK_SELECTS: dict[str, str] = {
    "stage = \"parse\"": "a double-quoted string",
    "stage RLIKE '^pa'": "Parser Error",
    "error_class = 'Bad''Quote\\\\'": "two string literals side by side",
    "no_such_column = 1": "no_such_column",
}


@pytest.mark.parametrize("empty", [False, True], ids=["rows", "empty"])
def test_replay_dry_runs_selection_is_the_same_on_spark_and_duckdb(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    tables = write_tables(spark, table_dir, empty=empty, replayed=False)
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": tables["quarantine"]})
    conf = write_conf(raw, table_dir / "p.yml")
    config = load_config(conf)
    differ = []
    for extra in DRY_RUNS:
        args = ["replay", "--conf", str(conf), *extra]
        where = extra[2] if len(extra) > 2 else None
        on_spark = _on(SparkEngine(spark), config, lambda r, w=where: replay_selection(r, PIPELINE, w))
        on_duckdb = _on(DuckEngine(), config, lambda r, w=where: replay_selection(r, PIPELINE, w))
        if on_spark != on_duckdb:
            differ.append((extra, on_spark, on_duckdb))
        on_spark = _run(capsys, monkeypatch, "spark", args)
        on_duckdb = _run(capsys, monkeypatch, "auto", args)
        if on_spark[0] != 0 or on_spark != on_duckdb:
            differ.append((extra, on_spark, on_duckdb))
        if where is not None:  # discard --dry-run: the same selection, said as what a discard would close
            args = ["discard", "--conf", str(conf), *extra]
            on_spark, on_duckdb = _run(capsys, monkeypatch, "spark", args), _run(capsys, monkeypatch, "auto", args)
            if on_spark[0] != 0 or on_spark != on_duckdb or not on_spark[1].startswith("discard --dry-run"):
                differ.append((args, on_spark, on_duckdb))
    assert not differ, "\n\n".join(f"{c}\nspark:  {s}\nduckdb: {d}" for c, s, d in differ)
    if not empty:  # what the selections hold
        out = _run(capsys, monkeypatch, "auto", ["replay", "--conf", str(conf), *DRY_RUNS[0]])[1].splitlines()
        assert out[0] == "replay --dry-run (nothing written): 24 open record(s) selected:", out
        assert out[-1].startswith("through the current stages") or "through the current stages" in "\n".join(out)
        assert _run(capsys, monkeypatch, "auto", ["replay", "--conf", str(conf), *DRY_RUNS[-1]])[1] == (
            "replay --dry-run (nothing written): 0 open record(s) selected\n")


def test_a_where_duckdb_cannot_take_is_selected_by_spark_after_one_line_saying_why(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = write_tables(spark, table_dir, replayed=False)
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": tables["quarantine"]})
    conf = write_conf(raw, table_dir / "p.yml")
    for where, why in SPARK_SELECTS.items():
        args = ["replay", "--conf", str(conf), "--dry-run", "--where", where]
        on_spark = _run(capsys, monkeypatch, "spark", args)
        code, out, err = _run(capsys, monkeypatch, "auto", args)
        assert (code, out) == on_spark[:2], where
        first, *rest = err.splitlines()
        assert first.startswith(f"quarantine: selecting with Spark: DuckDB cannot take --where {where}: "), err
        assert why in first, err
        assert "\n".join(rest) == on_spark[2].rstrip("\n"), err  # then exactly what Spark says
        if code == 0:
            assert out.startswith("replay --dry-run (nothing written): "), out
