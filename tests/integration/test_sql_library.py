"""The SQL library, the views and the triage commands, each read over tables a real pipeline filled.

One module fixture runs the ``orders_test`` pipeline (decode + JSON, metrics table on)
over two partitions of a Kafka-shaped source, discards the invalid UTF-8 record, runs
the batch again (the open records fail a second time), then replays with a fix that
lets the records without ``order_id`` through (the malformed ones fail a third time).
Every query and view, and ``quarantine inspect / stats / sql / views``, is then checked
row by row against what that history must give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.errors import ConfigError
from quarantine.ops.views import create_views
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard, replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sql import bind, catalogue, get_query, run_query
from tests.helpers import kafka_rows, orders_config
from tests.support.readme import block

GOOD = b'{"order_id": "o", "amount": 1.5}'
#: partition 0: malformed at 2 and 3, invalid UTF-8 at 4, no order_id at 7
P0 = [GOOD, GOOD, b"not json", b"{oops", b"\xff\xfe\x00", GOOD, GOOD, b'{"amount": 1}', GOOD, GOOD]
#: partition 1: malformed at 1 (a long value), no order_id at 4
LONG = b"nope " * 40
P1 = [GOOD, LONG, GOOD, GOOD, b'{"amount": 2}']
#: the invalid UTF-8 record's headers: one value is not UTF-8 either, one value holds terminal
#: control sequences, and one key is not UTF-8 (:data:`BAD_KEY`, put in place of ``bad-key``)
HEADERS = [("trace", b"\x80abc"), ("src", b"web"), ("tty", b"\x1b[31mred\x07"), ("bad-key", b"k")]
BAD_KEY = b"\xff\xfe-h\xc3("
PIPELINE = "orders_test"


def _config_dict(d: Path, *, required: list[str]) -> dict[str, Any]:
    cfg = orders_config(d)
    cfg["metrics"] = {"table": str(d / "metrics")}
    cfg["stages"][1]["options"]["required"] = required
    return cfg


def _config(d: Path, *, required: list[str]) -> Any:
    return parse_config(_config_dict(d, required=required))


@pytest.fixture(scope="module")
def filled(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("sql_library")
    headers = [HEADERS if i == 4 else None for i in range(len(P0))]
    rows = kafka_rows(P0, partition=0, headers=headers) + kafka_rows(P1, partition=1)
    source = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).withColumn("headers", F.transform(
        "headers", lambda h: F.struct(
            F.when(h["key"] == "bad-key", F.lit(BAD_KEY).cast("string")).otherwise(h["key"]).alias("key"),
            h["value"].alias("value"))))
    source.write.format("delta").save(str(d / "source"))
    strict = _config(d, required=["order_id"])
    Pipeline.from_config(strict, spark).run()
    closing = Pipeline.from_config(strict, spark, listeners=[])
    assert discard(closing, "error_class = 'InvalidUtf8'", "producer bug") == 1
    Pipeline.from_config(strict, spark).run(full=True)  # the open records run (and fail) again
    result = replay(Pipeline.from_config(_config(d, required=[]), spark))
    assert (result.replayed, result.still_failing) == (2, 3)
    conf = d / "orders.yml"
    conf.write_text(yaml.safe_dump(_config_dict(d, required=["order_id"])), encoding="utf-8")
    return {"dir": d, "conf": str(conf),
            "tables": {"quarantine": str(d / "quarantine"), "metrics": str(d / "metrics")}}


def _rows(spark: Any, filled: dict[str, Any], name: str, **params: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in run_query(spark, name, params, filled["tables"]).collect()]


def test_every_library_query_is_checked_here() -> None:
    tested = {"open_records", "top_errors", "error_rate", "offset_ranges", "stuck_records", "resolution_history"}
    assert set(catalogue()) == tested


def test_open_records_groups_the_open_rows_by_pipeline_stage_and_error_class(spark: Any, filled: Any) -> None:
    rows = _rows(spark, filled, "open_records")
    assert [(r["pipeline"], r["stage"], r["error_class"], r["records"]) for r in rows] == [
        (PIPELINE, "parse", "MalformedJson", 3)
    ]
    assert rows[0]["first_seen_at"] <= rows[0]["last_seen_at"]
    assert _rows(spark, filled, "open_records", stage="decode") == []
    assert _rows(spark, filled, "open_records", pipeline="another") == []
    assert len(_rows(spark, filled, "open_records", pipeline=PIPELINE, error_class="MalformedJson")) == 1


def test_top_errors_groups_by_stage_and_error_class_with_an_example_message(spark: Any, filled: Any) -> None:
    # the three open records fail with three different messages (each names what it found): one class
    (open_,) = _rows(spark, filled, "top_errors")
    assert (open_["pipeline"], open_["stage"], open_["error_class"], open_["records"]) == (
        PIPELINE, "parse", "MalformedJson", 3)
    assert open_["messages"] == 3 and open_["example_message"]
    assert open_["first_seen_at"] <= open_["last_seen_at"]
    every = _rows(spark, filled, "top_errors", status="")
    assert [(r["stage"], r["error_class"], r["records"]) for r in every] == [
        ("parse", "MalformedJson", 3), ("parse", "MissingRequiredField", 2), ("decode", "InvalidUtf8", 1)]
    discarded = _rows(spark, filled, "top_errors", status="discarded")
    assert [(r["stage"], r["error_class"], r["records"]) for r in discarded] == [("decode", "InvalidUtf8", 1)]


def test_offset_ranges_are_runs_of_consecutive_offsets_per_partition(spark: Any, filled: Any) -> None:
    def ranges(**params: str) -> list[tuple[int, int, int, int]]:
        return [(r["partition"], r["first_offset"], r["last_offset"], r["records"])
                for r in _rows(spark, filled, "offset_ranges", **params)]

    assert ranges() == [(0, 2, 3, 2), (1, 1, 1, 1)]
    assert ranges(status="") == [(0, 2, 4, 3), (0, 7, 7, 1), (1, 1, 1, 1), (1, 4, 4, 1)]
    assert ranges(status="replayed") == [(0, 7, 7, 1), (1, 4, 4, 1)]


def test_stuck_records_are_open_long_or_failed_often(spark: Any, filled: Any) -> None:
    # The open records failed three times (run, re-run, replay); none is a day old.
    often = _rows(spark, filled, "stuck_records", failures="2")
    assert sorted((r["partition"], r["offset"], r["error_count"]) for r in often) == [(0, 2, 3), (0, 3, 3), (1, 1, 3)]
    assert _rows(spark, filled, "stuck_records", failures="3") == []
    old = _rows(spark, filled, "stuck_records", hours="0", failures="100")
    assert sorted((r["partition"], r["offset"]) for r in old) == [(0, 2), (0, 3), (1, 1)]
    assert all(0 <= r["open_hours"] < 1 for r in old)


def test_resolution_history_lists_replays_and_discards_with_their_resolution(spark: Any, filled: Any) -> None:
    rows = _rows(spark, filled, "resolution_history")
    got = {(r["status"], r["resolution"].split(" run ")[0], r["records"]) for r in rows}
    assert got == {("discarded", "discarded: producer bug", 1), ("replayed", "replayed by", 2)}
    assert all(r["resolved_date"] == r["first_resolved_at"].date() for r in rows)
    assert [r["status"] for r in _rows(spark, filled, "resolution_history", status="discarded")] == ["discarded"]


def test_error_rate_counts_failures_per_partition_and_the_topics_rate_from_metrics(spark: Any, filled: Any) -> None:
    rows = _rows(spark, filled, "error_rate", bucket="month")
    # failures: the error_history entries, each a change of a record's error (failing the same way
    # again adds none). p0: 2, 3, 4 (discarded) and 7 (replayed) one each; p1: 1 and 4 one each.
    assert [(r["pipeline"], r["topic"], r["partition"], r["failures"]) for r in rows] == [
        (PIPELINE, "orders", 0, 4), (PIPELINE, "orders", 1, 2)
    ]
    metrics = spark.read.format("delta").load(filled["tables"]["metrics"]).where("topic = 'orders'")
    sums = {r["metric"]: r["v"] for r in metrics.groupBy("metric").agg({"value": "sum"})
            .withColumnRenamed("sum(value)", "v").collect()}
    for r in rows:
        assert r["topic_records_in"] == sums["records-in"] > 15  # the first run read all 15
        assert r["topic_quarantined"] == sums["records-quarantined"]
        assert r["topic_error_rate"] == pytest.approx(sums["records-quarantined"] / sums["records-in"])
    with pytest.raises(ConfigError, match=r"one of minute \| hour \| day \| week \| month"):
        _rows(spark, filled, "error_rate", bucket="fortnight")
    # pasted elsewhere with a bad period, the query itself refuses it
    text = bind(get_query("error_rate"), {"bucket": "day"}, filled["tables"])
    text = text.replace("lower('day')", "lower('fortnight')").replace("not ', 'day')", "not ', 'fortnight')")
    with pytest.raises(Exception, match="bucket must be minute, hour, day, week or month, not fortnight"):
        spark.sql(text).collect()


def test_queries_read_relative_paths_and_catalog_names(spark: Any, filled: Any, monkeypatch: Any) -> None:
    d: Path = filled["dir"]
    monkeypatch.chdir(d.parent)
    relative = {"quarantine": f"{d.name}/quarantine", "metrics": f"{d.name}/metrics"}
    assert [r["records"] for r in run_query(spark, "open_records", {}, relative).collect()] == [3]
    spark.sql("CREATE DATABASE IF NOT EXISTS triage_db")
    spark.sql(f"CREATE TABLE IF NOT EXISTS triage_db.q USING delta LOCATION '{d / 'quarantine'}'")
    for name in ("triage_db.q", "spark_catalog.triage_db.q"):
        rows = run_query(spark, "offset_ranges", {}, {"quarantine": name}).collect()
        assert [(r["partition"], r["first_offset"], r["last_offset"]) for r in rows] == [(0, 2, 3), (1, 1, 1)]


def test_a_query_that_reads_an_unconfigured_table_names_the_key(filled: Any) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.table"):
        bind(get_query("error_rate"), {}, {"quarantine": filled["tables"]["quarantine"], "metrics": None})


def test_views_over_a_path_show_open_summary_offsets_and_resolved(spark: Any, filled: Any) -> None:
    views = create_views(spark, filled["tables"]["quarantine"])
    assert sorted(v.name for v in views) == ["quarantine_offsets", "quarantine_open", "quarantine_resolved",
                                             "quarantine_summary"]
    open_ = {(r["partition"], r["offset"]): r for r in spark.table("quarantine_open").collect()}
    assert sorted(open_) == [(0, 2), (0, 3), (1, 1)]
    assert open_[(0, 2)]["value_text"] == "not json" and open_[(0, 2)]["value_hex"] == b"not json".hex().upper()
    summary = {(r["status"], r["stage"], r["error_class"]): r["records"]
               for r in spark.table("quarantine_summary").collect()}
    assert summary == {("open", "parse", "MalformedJson"): 3, ("discarded", "decode", "InvalidUtf8"): 1,
                       ("replayed", "parse", "MissingRequiredField"): 2}
    offsets = {r["partition"]: (r["records"], r["min_offset"], r["max_offset"])
               for r in spark.table("quarantine_offsets").collect()}
    assert offsets == {0: (2, 2, 3), 1: (1, 1, 1)}
    resolved = {(r["partition"], r["offset"]): r["status"] for r in spark.table("quarantine_resolved").collect()}
    assert resolved == {(0, 4): "discarded", (0, 7): "replayed", (1, 4): "replayed"}
    # the invalid UTF-8 value is not text in any view; its bytes are kept
    (bad,) = spark.sql(f"SELECT value FROM delta.`{filled['tables']['quarantine']}` WHERE offset = 4 AND partition = 0"
                       ).collect()
    assert bytes(bad["value"]) == b"\xff\xfe\x00"


def test_views_over_a_catalog_name_go_next_to_the_table(spark: Any, filled: Any) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS triage_db")
    spark.sql(f"CREATE TABLE IF NOT EXISTS triage_db.q USING delta LOCATION '{filled['dir'] / 'quarantine'}'")
    views = create_views(spark, "spark_catalog.triage_db.q")
    assert sorted(v.name for v in views)[0] == "spark_catalog.triage_db.q_offsets"
    assert spark.table("triage_db.q_open").count() == 3
    assert spark.table("triage_db.q_resolved").count() == 3


# --------------------------------------------------------------------------- the triage commands


def _cli(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return str(capsys.readouterr().out)


def test_inspect_shows_the_open_records_as_a_table_with_long_values_cut(spark: Any, filled: Any, capsys: Any) -> None:
    out = _cli(capsys, "inspect", "--conf", filled["conf"])
    assert out.startswith(f"open records of pipeline {PIPELINE} in ")
    lines = [line for line in out.splitlines() if line.startswith("│")]
    assert len(lines) == 3 and all("MalformedJson" in line for line in lines)
    assert "not json" in out and "{oops" in out
    long_line = next(line for line in lines if "nope nope" in line)
    assert "…" in long_line and LONG.decode() not in out  # cut in the table


def test_inspect_shows_undecodable_payloads_as_hex(spark: Any, filled: Any, capsys: Any) -> None:
    out = _cli(capsys, "inspect", "--conf", filled["conf"], "--status", "discarded")
    (line,) = [line for line in out.splitlines() if line.startswith("│")]
    assert "hex:fffe00" in line and "trace=hex:80616263" in line and "src=web" in line
    # the tty header's ESC never reaches the terminal (the table cuts it from view here; escaped it reads
    # \x1b: tests/unit/test_display.py::test_a_table_escapes_control_characters_instead_of_sending_them_to_the_terminal)
    assert "\x1b" not in out and "\x07" not in out
    assert "InvalidUtf8" in line and "discarded" in line


def test_inspect_json_has_every_record_uncut_with_its_payload_encoding(spark: Any, filled: Any, capsys: Any) -> None:
    records = json.loads(_cli(capsys, "inspect", "--conf", filled["conf"], "--status", "all", "--json"))
    by_key = {(r["partition"], r["offset"]): r for r in records}
    assert sorted(by_key) == [(0, 2), (0, 3), (0, 4), (0, 7), (1, 1), (1, 4)]
    bad = by_key[(0, 4)]
    assert bad["value"] == {"text": "fffe00", "encoding": "hex"}
    assert bad["headers"] == [{"key": "trace", "value": {"text": "80616263", "encoding": "hex"}},
                              {"key": "src", "value": {"text": "web", "encoding": "utf-8"}},
                              {"key": "tty", "value": {"text": "\x1b[31mred\x07", "encoding": "utf-8"}},
                              {"key": "hex:fffe2d68c328", "value": {"text": "k", "encoding": "utf-8"}}]
    assert (bad["status"], bad["resolution"]) == ("discarded", "discarded: producer bug")
    assert by_key[(1, 1)]["value"] == {"text": LONG.decode(), "encoding": "utf-8"}  # never cut in JSON
    assert by_key[(0, 2)]["key"] == {"text": "k2", "encoding": "utf-8"}
    assert by_key[(0, 2)]["error_count"] == 3 and by_key[(0, 7)]["status"] == "replayed"


def test_inspect_filters_by_stage_error_class_time_and_limit(spark: Any, filled: Any, capsys: Any) -> None:
    def offsets(*argv: str) -> list[tuple[int, int]]:
        out = _cli(capsys, "inspect", "--conf", filled["conf"], "--json", *argv)
        return sorted((r["partition"], r["offset"]) for r in json.loads(out))

    replayed = ["--status", "replayed"]
    assert offsets(*replayed, "--stage", "parse", "--error-class", "MissingRequiredField") == [(0, 7), (1, 4)]
    assert offsets(*replayed, "--stage", "decode") == []
    assert offsets("--since", "1h") == [(0, 2), (0, 3), (1, 1)]
    assert offsets("--until", "2000-01-01") == []
    assert len(offsets("--status", "all", "--limit", "2")) == 2
    assert offsets("--pipeline", "another") == []
    assert len(offsets("--pipeline", "", "--status", "all")) == 6


def test_stats_counts_by_status_error_and_partition(spark: Any, filled: Any, capsys: Any) -> None:
    stats = json.loads(_cli(capsys, "stats", "--conf", filled["conf"], "--json"))
    assert {r["status"]: r["records"] for r in stats["records by status"]} == {
        "open": 3, "discarded": 1, "replayed": 2}
    assert [(r["stage"], r["error_class"], r["records"]) for r in stats["open records by stage and error class"]] == [
        ("parse", "MalformedJson", 3)]
    assert [(r["topic"], r["partition"], r["records"], r["min_offset"], r["max_offset"])
            for r in stats["open records per topic partition"]] == [("orders", 0, 2, 2, 3), ("orders", 1, 1, 1, 1)]
    out = _cli(capsys, "stats", "--conf", filled["conf"])
    assert out.count(f"(pipeline {PIPELINE})") == 3
    assert any("open" in line and "3" in line for line in out.splitlines() if line.startswith("│"))


def test_sql_runs_a_library_query_with_the_configs_tables(spark: Any, filled: Any, capsys: Any) -> None:
    rows = json.loads(_cli(capsys, "sql", "offset_ranges", "--conf", filled["conf"], "--param", "status=", "--json"))
    assert [(r["partition"], r["first_offset"], r["last_offset"]) for r in rows] == [
        (0, 2, 4), (0, 7, 7), (1, 1, 1), (1, 4, 4)]
    out = _cli(capsys, "sql", "open_records", "--conf", filled["conf"])
    assert out.startswith("open_records: Open records by pipeline")
    (line,) = [line for line in out.splitlines() if line.startswith("│")]
    assert PIPELINE in line and "MalformedJson" in line and " 3 " in line
    limited = json.loads(_cli(capsys, "sql", "top_errors", "--conf", filled["conf"], "--param", "status=",
                              "--limit", "1", "--json"))
    assert len(limited) == 1


def test_sql_says_when_it_cut_the_output_at_the_limit(spark: Any, filled: Any, capsys: Any) -> None:
    argv = ("sql", "top_errors", "--conf", filled["conf"], "--param", "status=")
    out = _cli(capsys, *argv, "--limit", "2")
    assert len([line for line in out.splitlines() if line.startswith("│")]) == 2
    assert "the first 2 rows: more rows match (--limit)" in out
    capsys.readouterr()
    assert main([*argv, "--limit", "2", "--json"]) == 0
    cut = capsys.readouterr()
    assert len(json.loads(cut.out)) == 2 and "the first 2 rows: more rows match (--limit)" in cut.err
    whole = _cli(capsys, *argv, "--limit", "3")
    assert "--limit" not in whole


def test_views_command_creates_the_views(spark: Any, filled: Any, capsys: Any) -> None:
    out = _cli(capsys, "views", "--conf", filled["conf"])
    assert out.count("created view quarantine_") == 4
    assert spark.table("quarantine_summary").where("status = 'open'").count() == 1


# --------------------------------------------------------------------------- the README


def test_the_readmes_looking_at_quarantine_commands_run(spark: Any, filled: Any, capsys: Any) -> None:
    commands = block("looking").commands()
    assert len(commands) == len(block("looking").lines()) == 9
    for argv in commands:
        argv = [filled["conf"] if a == "demo/orders_demo.yml" else a for a in argv]
        out = _cli(capsys, *argv[1:])
        assert out.strip(), argv
        if "--json" in argv:
            assert len(json.loads(out)) == 6  # every record of the pipeline, seen in the last 24 hours


def test_the_readmes_sql_over_quarantine_and_views_run(spark: Any, filled: Any, capsys: Any) -> None:
    table = filled["tables"]["quarantine"]
    spark.sql("CREATE DATABASE IF NOT EXISTS triage_db")
    spark.sql(f"CREATE TABLE IF NOT EXISTS triage_db.q USING delta LOCATION '{table}'")

    def runnable(key: str) -> list[str]:
        return [sql.replace("/abs/path/demo/quarantine", table).replace("main.ops.quarantine", "triage_db.q")
                .replace("'orders_demo'", f"'{PIPELINE}'") for sql in block(key).statements()]

    results = [spark.sql(s).collect() for s in runnable("sql-over-quarantine")]
    today, look, failed_more, changes, changes_by_path = results
    assert [tuple(r) for r in today] == [("parse", "MalformedJson", "orders", 3)]
    assert look == []  # no SchemaMismatch in this pipeline
    assert {(r["offset"], r["error_class"]) for r in failed_more} >= {(2, "MalformedJson"), (7, "MissingRequiredField")}
    # the Change Data Feed since version 1: the discard, the re-run and the replay updated rows
    assert {r[0] for r in changes} >= {"update_preimage", "update_postimage"}
    assert sorted(map(tuple, changes_by_path)) == sorted(map(tuple, changes))  # the path form, the same feed

    python = block("views-python").body
    capsys.readouterr()
    exec(python.replace("demo/quarantine", table), {"spark": spark})  # the README's own code
    shown = capsys.readouterr().out
    assert shown.count("MalformedJson") == 3  # the three records that failed three times
    summary, open_ = (spark.sql(s).collect() for s in runnable("views-sql"))
    assert [(r["stage"], r["error_class"], r["records"]) for r in summary] == [("parse", "MalformedJson", 3)]
    assert len(open_) == 3 and {r["value_text"] for r in open_} >= {"not json", "{oops"}
