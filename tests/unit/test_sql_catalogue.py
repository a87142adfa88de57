"""The SQL library's files, parameters and binding, the views' names, and the CLI's usage errors (no JVM)."""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.errors import ConfigError
from quarantine.ops.views import view_statements
from quarantine.sql import (
    ParamType,
    Query,
    _parse,
    bind,
    bind_values,
    catalogue,
    get_query,
    parse_params,
    read_sources,
    view_sources,
)
from quarantine.tables import sql_literal, table_ref
from tests.helpers import orders_config

REPO = Path(__file__).resolve().parents[2]


def test_every_sql_file_is_a_documented_query_whose_header_matches_its_body() -> None:
    queries = catalogue()
    assert set(queries) == {p.stem for p in (REPO / "quarantine" / "sql").glob("*.sql")}
    assert {"open_records", "top_errors", "error_rate", "offset_ranges", "stuck_records", "resolution_history"} \
        <= set(queries)
    for q in queries.values():
        assert q.summary.endswith(".") and len(q.summary) > 30, q.name
        assert "quarantine" in q.tables, q.name
        assert all(p.doc and p.default is not None for p in q.params), q.name  # every parameter optional
        assert q.param("pipeline") is not None, q.name  # the CLI fills in the config's pipeline
    assert get_query("error_rate").tables == ("quarantine", "metrics")
    assert [(p.name, p.type, p.default) for p in get_query("stuck_records").params] == [
        ("pipeline", ParamType.STRING, "''"), ("hours", ParamType.INT, "24"), ("failures", ParamType.INT, "3"),
    ]
    assert set(view_sources()) == {"open", "summary", "offsets", "resolved"}


def test_every_read_is_a_documented_query_and_every_sql_file_ships_in_the_wheel() -> None:
    reads = read_sources()
    assert set(reads) == {p.stem for p in (REPO / "quarantine" / "sql" / "reads").glob("*.sql")}
    for q in reads.values():
        assert q.summary and set(q.tables) <= {"quarantine", "metrics"}, q.name
        assert all(p.doc and p.default is None for p in q.params), q.name  # the command gives every value
    shipped = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["quarantine"]
    files = {p.relative_to(REPO / "quarantine").as_posix() for p in (REPO / "quarantine" / "sql").rglob("*.sql")}
    assert {f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in shipped)} \
        == set()


def test_a_file_whose_header_and_body_disagree_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"@param \['x'\] vs :markers \['y'\]"):
        _parse("bad", "-- A query.\n-- @table quarantine\n-- @param x int = 1 — x\nSELECT :y FROM {{quarantine}}")
    with pytest.raises(ValueError, match="bad @param line"):
        _parse("bad", "-- A query.\n-- @param x integer — x\nSELECT :x")
    with pytest.raises(ValueError, match="only a string parameter has choices"):
        _parse("bad", "-- A query.\n-- @param x int(1|2) = 1 — x\nSELECT :x")
    with pytest.raises(ValueError, match="unknown @table"):
        _parse("bad", "-- A query.\n-- @table target\nSELECT 1 FROM {{target}}")
    with pytest.raises(ValueError, match="header comment"):
        _parse("bad", "SELECT 1")


def test_parse_params_reads_name_value_pairs_and_rejects_the_rest() -> None:
    assert parse_params(["stage=parse", "where=a=b", "pipeline="]) == {"stage": "parse", "where": "a=b", "pipeline": ""}
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_params(["stage"])
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_params(["=x"])
    with pytest.raises(ConfigError, match="each parameter once"):
        parse_params(["stage=a", "stage=b"])


def test_values_are_literals_of_their_type_and_cannot_end_the_literal() -> None:
    q = get_query("stuck_records")
    text = bind(q, {"pipeline": "x' OR '1'='1", "hours": "48"}, {"quarantine": "/data/q"})
    assert "pipeline = 'x\\' OR \\'1\\'=\\'1'" in text
    assert "make_interval(0, 0, 0, 0, 48, 0, 0)" in text and "error_count > 3" in text  # the default
    assert "FROM delta.`/data/q`" in text and ":" not in text.replace("::", "")
    assert sql_literal("back\\slash'") == "'back\\\\slash\\''"
    assert sql_literal(2.5) == "2.5" and sql_literal(-3) == "-3"


def test_bad_parameters_are_config_errors_naming_them() -> None:
    q = get_query("stuck_records")
    with pytest.raises(ConfigError, match=r"--param hour'.*a parameter of stuck_records: pipeline \(string\), hours"):
        bind(q, {"hour": "1"}, {"quarantine": "/q"})
    with pytest.raises(ConfigError, match=r"--param hours'.*an integer"):
        bind(q, {"hours": "a day"}, {"quarantine": "/q"})
    with pytest.raises(ConfigError, match=r"--param status'.*one of '' \(every\) \| open \| replayed \| discarded"):
        bind(get_query("top_errors"), {"status": "closed"}, {"quarantine": "/q"})
    with pytest.raises(ConfigError, match=r"--param bucket'.*one of minute \| hour \| day \| week \| month"):
        bind(get_query("error_rate"), {"bucket": "fortnight"}, {"quarantine": "/q", "metrics": "/m"})
    with pytest.raises(ConfigError, match=r"sql NAME'.*open_records"):
        get_query("open_recordz")
    required = Query("q", "A query.", "A query.", ("quarantine",),
                     (_parse("q", "-- A query.\n-- @param n int — how many\nSELECT :n").params[0],), "SELECT :n")
    with pytest.raises(ConfigError, match=r"--param n'.*q needs it \(how many\)"):
        bind(required, {}, {"quarantine": "/q"})


def test_markers_in_string_literals_and_comments_are_left_alone() -> None:
    q = _parse("t", "-- A query.\n-- @param a string = '' — a\nSELECT ':a', :a -- :a\n")
    assert bind(q, {"a": "v"}, {}) == "SELECT ':a', 'v' -- :a"


def test_table_references_are_absolute_paths_or_quoted_names(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert table_ref("data/demo/quarantine") == f"delta.`{tmp_path}/data/demo/quarantine`"
    assert table_ref("./q") == f"delta.`{tmp_path}/q`"
    assert table_ref("/abs/q") == "delta.`/abs/q`"
    assert table_ref("~/q") == f"delta.`{os.path.expanduser('~')}/q`"
    assert table_ref("s3://bucket/q") == "delta.`s3://bucket/q`"
    assert table_ref("dbfs:/q") == "delta.`dbfs:/q`"
    assert table_ref("/odd/na`me") == "delta.`/odd/na``me`"
    assert table_ref("main.ops.quarantine") == "`main`.`ops`.`quarantine`"
    assert table_ref("ops.quarantine") == "`ops`.`quarantine`"


def test_views_are_named_after_the_table_next_to_it_or_in_the_schema_given() -> None:
    names = sorted(v.name for v in view_statements("/data/demo/quarantine"))
    assert names == ["quarantine_offsets", "quarantine_open", "quarantine_resolved", "quarantine_summary"]
    (open_,) = [v for v in view_statements("main.ops.dlq") if v.name.endswith("_open")]
    assert open_.name == "main.ops.dlq_open"
    assert open_.sql.startswith("CREATE OR REPLACE VIEW `main`.`ops`.`dlq_open`\nAS\nSELECT")
    assert "FROM `main`.`ops`.`dlq`" in open_.sql
    in_schema = sorted(v.name for v in view_statements("/data/demo/quarantine", schema="main.ops"))[0]
    assert in_schema == "main.ops.quarantine_offsets"
    with pytest.raises(ConfigError, match="--schema"):
        view_statements("/q", schema="a.b.c")


# --------------------------------------------------------------------------- the CLI, without Spark


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "orders.yml"
    path.write_text(yaml.safe_dump(orders_config(tmp_path)), encoding="utf-8")
    return path


def test_sql_without_a_name_lists_the_library(capsys: Any) -> None:
    assert main(["sql"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in catalogue()) and "hours=24" in out
    assert main(["sql", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {q["name"] for q in listed} == set(catalogue())
    (stuck,) = [q for q in listed if q["name"] == "stuck_records"]
    assert [p["name"] for p in stuck["params"]] == ["pipeline", "hours", "failures"]


def test_sql_print_shows_the_bound_query_with_the_configs_tables_and_pipeline(conf: Path, capsys: Any) -> None:
    assert main(["sql", "open_records", "--conf", str(conf), "--param", "stage=parse", "--print"]) == 0
    out = capsys.readouterr().out
    assert f"FROM delta.`{conf.parent / 'quarantine'}`" in out
    assert "pipeline = 'orders_test'" in out and "stage = 'parse'" in out
    assert main(["sql", "open_records", "--conf", str(conf), "--param", "pipeline=", "--print"]) == 0
    assert "('' = '' OR pipeline = '')" in capsys.readouterr().out


def test_views_print_shows_the_create_view_statements(conf: Path, capsys: Any) -> None:
    assert main(["views", "--conf", str(conf), "--print"]) == 0
    out = capsys.readouterr().out
    assert out.count("CREATE OR REPLACE VIEW") == 4 and "`quarantine_open`" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sql", "nope", "--conf", "missing.yml"], "one of the SQL library's queries: error_rate"),
        (["sql", "stuck_records", "--conf", "{conf}", "--param", "hours=soon", "--print"], "an integer"),
        (["sql", "stuck_records", "--conf", "{conf}", "--param", "minutes=5", "--print"], "a parameter of"),
        (["sql", "stuck_records", "--conf", "{conf}", "--param", "hours", "--print"], "NAME=VALUE"),
        (["sql", "error_rate", "--conf", "{conf}", "--print"], "metrics.table"),
        (["sql", "open_records"], "--conf"),
        (["inspect", "--conf", "{conf}", "--status", "closed"], "open | replayed | discarded | all"),
        (["inspect", "--conf", "{conf}", "--since", "yesterday"], "an age (30m, 24h, 7d)"),
        (["inspect", "--conf", "{conf}", "--limit", "0"], "a positive number"),
        (["inspect", "--conf", "{conf}", "--since", "1h", "--until", "2h"], "a time before --until"),
    ],
)
def test_bad_usage_exits_2_naming_what_was_wrong(argv: list[str], message: str, conf: Path, capsys: Any) -> None:
    assert main([a.replace("{conf}", str(conf)) for a in argv]) == 2
    assert message in capsys.readouterr().err


def test_the_installed_command_exits_2_for_an_unknown_query() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "quarantine", "sql", "nope"], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    assert proc.returncode == 2 and "stuck_records" in proc.stderr


def test_a_reads_values_are_literals_both_engines_read_alike() -> None:
    from quarantine.sql import sql_value

    assert sql_value(None) == "NULL"
    assert sql_value(dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)) == "timestamp_micros(1000000)"
    assert sql_value(dt.datetime(1970, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == "timestamp_micros(0)"
    assert sql_value(dt.datetime(9999, 12, 31, 23, 59, 59, 999999)) == "timestamp_micros(253402300799999999)"
    assert sql_value("it's \\ here") == "'it\\'s \\\\ here'"
    with pytest.raises(ValueError, match="parameters"):
        bind_values(read_sources()["inspect"], {"pipeline": "p"}, {"quarantine": "quarantine"})
