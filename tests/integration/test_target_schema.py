"""The target's schema changing under a long-lived pipeline (issue 52, A and B), on real Delta tables.

A new field reaches the target (``target.schema_evolution: add_columns``, the default) or
the run refuses before any write (``fail``); a retyped field is refused in words naming the
table, the column and both types before any write; a removed field is written NULL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.errors import SchemaMismatchError
from quarantine.pipeline import Pipeline
from quarantine.tables import table_version
from tests.helpers import kafka_df

FIRST = "id BIGINT, name STRING, qty INT"


def _config(d: Path, schema: str, *, streaming: bool = False, **target: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "pipeline": "orders_schema",
        "source": {"format": "delta", "path": str(d / "source"), "streaming": streaming},
        "target": {"table": str(d / "target"), **target},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": schema}},
        ],
    }
    if streaming:
        cfg["target"]["checkpoint"] = str(d / "checkpoint")
        cfg["trigger"] = "available_now"
    return cfg


def _run(spark: Any, d: Path, schema: str, **kw: Any) -> Any:
    return Pipeline.from_config(parse_config(_config(d, schema, **kw)), spark, listeners=[]).run()


def _append(spark: Any, d: Path, values: list[bytes], start: int) -> None:
    kafka_df(spark, values, start_offset=start).write.format("delta").mode("append").save(str(d / "source"))


def _target(spark: Any, d: Path) -> Any:
    return spark.read.format("delta").load(str(d / "target"))


def _versions(spark: Any, d: Path) -> tuple[int, int]:
    return table_version(spark, str(d / "target")), table_version(spark, str(d / "quarantine"))


OLD = [b'{"id":1,"name":"a","qty":1}', b'{"id":2,"name":"b","qty":2}', b"{"]
NEW = [b'{"id":3,"name":"c","qty":3,"color":"red"}', b'{"id":4,"name":"d","qty":4,"color":null}', b"\xff"]


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_a_new_field_reaches_the_target_and_older_rows_read_null(
    spark: Any, tmp_path: Path, streaming: bool
) -> None:
    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, FIRST, streaming=streaming)
    _append(spark, tmp_path, NEW, 3)
    summary = _run(spark, tmp_path, FIRST + ", color STRING", streaming=streaming)
    assert summary.records_ok == 2
    target = _target(spark, tmp_path)
    assert dict(target.dtypes)["color"] == "string"
    got = {r["id"]: (r["qty"], r["color"]) for r in target.collect()}
    assert got == {1: (1, None), 2: (2, None), 3: (3, "red"), 4: (4, None)}


def test_a_new_nested_field_is_added_inside_its_struct(spark: Any, tmp_path: Path) -> None:
    _append(spark, tmp_path, [b'{"id":1,"addr":{"city":"Oslo"}}'], 0)
    _run(spark, tmp_path, "id BIGINT, addr STRUCT<city: STRING>")
    _append(spark, tmp_path, [b'{"id":2,"addr":{"city":"Bergen","zip":"5003"}}', b'{"id":3,"addr":null}'], 1)
    _run(spark, tmp_path, "id BIGINT, addr STRUCT<city: STRING, zip: STRING>")
    target = _target(spark, tmp_path)
    assert dict(target.dtypes)["addr"] == "struct<city:string,zip:string>"
    got = {r["id"]: None if r["addr"] is None else tuple(r["addr"]) for r in target.collect()}
    assert got == {1: ("Oslo", None), 2: ("Bergen", "5003"), 3: None}


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_fail_refuses_a_new_field_before_any_write_naming_it(spark: Any, tmp_path: Path, streaming: bool) -> None:
    _append(spark, tmp_path, OLD, 0)
    # a first run with ``fail`` creates the table with the pipeline's columns
    _run(spark, tmp_path, FIRST, streaming=streaming, schema_evolution="fail")
    before = _versions(spark, tmp_path)
    _append(spark, tmp_path, NEW, 3)
    with pytest.raises(SchemaMismatchError) as caught:
        _run(spark, tmp_path, FIRST + ", color STRING", streaming=streaming, schema_evolution="fail")
    text = str(caught.value)
    assert "color" in text and str(tmp_path / "target") in text and "schema_evolution" in text
    assert "\n" not in text
    assert _versions(spark, tmp_path) == before
    assert "color" not in _target(spark, tmp_path).columns


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_a_retyped_field_is_refused_in_words_before_any_write(spark: Any, tmp_path: Path, streaming: bool) -> None:
    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, FIRST, streaming=streaming)
    before = _versions(spark, tmp_path)
    _append(spark, tmp_path, [b'{"id":5,"name":"e","qty":"seven"}', b"\xff"], 3)
    with pytest.raises(SchemaMismatchError) as caught:
        _run(spark, tmp_path, "id BIGINT, name STRING, qty STRING", streaming=streaming)
    text = str(caught.value)
    assert "column qty is INT in the table" in text and "makes it STRING" in text and str(tmp_path / "target") in text
    assert "cast" in text and "seven" not in text and "\n" not in text
    assert _versions(spark, tmp_path) == before


def test_a_nested_retyped_field_is_named_by_its_path(spark: Any, tmp_path: Path) -> None:
    _append(spark, tmp_path, [b'{"id":1,"addr":{"zip":5003}}'], 0)
    _run(spark, tmp_path, "id BIGINT, addr STRUCT<zip: INT>")
    _append(spark, tmp_path, [b'{"id":2,"addr":{"zip":"N-5003"}}'], 1)
    with pytest.raises(SchemaMismatchError, match=r"addr\.zip"):
        _run(spark, tmp_path, "id BIGINT, addr STRUCT<zip: STRING>")


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_a_removed_field_is_kept_by_the_table_and_written_null(spark: Any, tmp_path: Path, streaming: bool) -> None:
    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, FIRST, streaming=streaming)
    _append(spark, tmp_path, [b'{"id":5,"name":"e"}'], 3)
    summary = _run(spark, tmp_path, "id BIGINT, name STRING", streaming=streaming)
    assert summary.records_ok == 1
    got = {r["id"]: (r["name"], r["qty"]) for r in _target(spark, tmp_path).collect()}
    assert got == {1: ("a", 1), 2: ("b", 2), 5: ("e", None)}


def test_a_narrower_type_is_written_into_the_wider_column(spark: Any, tmp_path: Path) -> None:
    """The pipeline's INT into the table's BIGINT loses nothing: written (cast up), not refused."""
    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, "id BIGINT, name STRING, qty BIGINT")
    _append(spark, tmp_path, [b'{"id":5,"name":"e","qty":5}'], 3)
    _run(spark, tmp_path, FIRST)
    target = _target(spark, tmp_path)
    assert dict(target.dtypes)["qty"] == "bigint"
    assert sorted(r["qty"] for r in target.collect()) == [1, 2, 5]


def test_a_wider_number_is_widened_by_delta_or_refused_under_fail(spark: Any, tmp_path: Path) -> None:
    """INT to BIGINT: refused before any write under ``fail``; under ``add_columns`` (the default)
    the column is widened with Delta's type widening and the older values read the same."""
    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, FIRST)
    before = _versions(spark, tmp_path)
    _append(spark, tmp_path, [b'{"id":5,"name":"e","qty":5000000000}'], 3)
    with pytest.raises(SchemaMismatchError, match=r"delta\.enableTypeWidening"):
        _run(spark, tmp_path, "id BIGINT, name STRING, qty BIGINT", schema_evolution="fail")
    assert _versions(spark, tmp_path) == before
    _run(spark, tmp_path, "id BIGINT, name STRING, qty BIGINT")
    target = _target(spark, tmp_path)
    assert dict(target.dtypes)["qty"] == "bigint"
    assert sorted(r["qty"] for r in target.collect()) == [1, 2, 5000000000]


def test_the_command_ends_a_refusal_with_one_line_in_words_and_no_java_stack(spark: Any, tmp_path: Path) -> None:
    """``quarantine run`` as users start it (a process, no ``--verbose``): the retyped field's refusal
    is the last line, naming the table, the column and both types; no Java stack above it."""
    import os
    import subprocess
    import sys

    import yaml

    _append(spark, tmp_path, OLD, 0)
    _run(spark, tmp_path, FIRST)
    before = _versions(spark, tmp_path)
    _append(spark, tmp_path, [b'{"id":5,"name":"e","qty":"seven"}'], 3)
    conf = tmp_path / "pipeline.yml"
    conf.write_text(yaml.safe_dump(_config(tmp_path, "id BIGINT, name STRING, qty STRING")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "QUARANTINE_SPARK_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-m", "quarantine.cli", "run", "--conf", str(conf)], capture_output=True,
                          text=True, env=env, timeout=600, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    output = proc.stdout + proc.stderr
    assert not [s for s in ("at org.apache", "Py4JJavaError", "Traceback", "Caused by:") if s in output], output[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("quarantine: run failed: SchemaMismatchError: "), proc.stderr[-2000:]
    assert "column qty is INT in the table" in last and "makes it STRING" in last, last
    assert str(tmp_path / "target") in last and "seven" not in last, last
    assert _versions(spark, tmp_path) == before
