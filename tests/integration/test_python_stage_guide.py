"""docs/python-stages.md: its worked example runs as written, and its answers are what Spark does.

Issue 54, point 2. The guide's ``pipeline.yml`` and ``sensors.py`` are written to a
folder and run by the ``quarantine`` command from another working directory without
``PYTHONPATH`` (``validate``, ``run``, then ``replay``), as a user runs them: the module
is found beside the config, on the driver and on Spark's Python workers. The target's
columns are the last stage's struct; the quarantine rows are the guide's table. The
vectorized variant runs in-process, and the table of what the function is given and may
return is checked on this session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.batch.chain import apply_stages
from quarantine.cli import main
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.json import JsonParse
from quarantine.stages.python import python_stage
from quarantine.values.spark import parse_spark_type
from tests import fixtures_py_stage as fx
from tests.helpers import kafka_df
from tests.support.readme import block

READINGS = [
    b'{"reading_id": 1, "sensor": "s-1", "celsius": 21.5}',
    b'{"reading_id": 2, "sensor": "s-2", "celsius": 30}',
    b'{"reading_id": 3, "sensor": "s-1", "cel',
    b'{"reading_id": 4, "sensor": "s-3", "celsius": -300}',
]
SOURCE_COLUMNS = ["_source_topic", "_source_partition", "_source_offset", "_source_timestamp", "_source_fingerprint"]
COLUMNS = ["reading_id", "sensor", "celsius", "fahrenheit", *SOURCE_COLUMNS]


def _project(spark: Any, root: Path) -> Path:
    """``root/sensors``: the guide's config and module, and a Delta source of the four readings."""
    folder = root / "sensors"
    folder.mkdir()
    (folder / "pipeline.yml").write_text(block("python-guide-pipeline").body, encoding="utf-8")
    (folder / "sensors.py").write_text(block("python-guide-module").body, encoding="utf-8")
    kafka_df(spark, READINGS).write.format("delta").save(str(folder / "data" / "readings"))
    return folder


def _quarantine_rows(spark: Any, table: Path) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(str(table)).orderBy("offset").collect()
    return [(r.offset, r.stage, r.kind, r.error_class, r.message, r.status, r.error_count) for r in rows]


def _assert_the_guides_outcome(spark: Any, target: Path, quarantine: Path, error_count: int = 1) -> None:
    out = spark.read.format("delta").load(str(target))
    assert out.columns == COLUMNS
    got = sorted((r.reading_id, r.sensor, r.celsius, r.fahrenheit) for r in out.collect())
    assert got == [(1, "s-1", 21.5, pytest.approx(70.7)), (2, "s-2", 30.0, 86.0)]
    (malformed, cold) = _quarantine_rows(spark, quarantine)
    assert malformed[:4] == (2, "parse", "deserialize", "MalformedJson")
    assert cold == (3, "enrich", "transform", "ImplausibleReading", "-300.0 °C is below absolute zero", "open",
                    error_count)


def test_the_guides_example_runs_from_another_folder_without_pythonpath(spark: Any, tmp_path: Path) -> None:
    folder = _project(spark, tmp_path)
    commands = block("python-guide-run").commands()
    assert [c[:2] for c in commands] == [["quarantine", "validate"], ["quarantine", "run"]]
    cli = Path(sys.executable).parent / "quarantine"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(argv: list[str]) -> str:
        proc = subprocess.run([str(cli), *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    validated, _ = (run(c[1:]) for c in commands)
    assert ("target columns: reading_id BIGINT, sensor STRING, celsius DOUBLE, fahrenheit DOUBLE "
            "(the last stage's result: enrich) + " + ", ".join(SOURCE_COLUMNS)) in validated
    target, quarantine = folder / "data" / "readings_enriched", folder / "data" / "quarantine"
    _assert_the_guides_outcome(spark, target, quarantine)

    # replay: the open rows through the stages again, the module again found beside the config
    run(["replay", "--conf", "sensors/pipeline.yml"])
    _assert_the_guides_outcome(spark, target, quarantine, error_count=2)


@pytest.fixture(scope="module")
def guide(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The guide's project, built once for the variants run in-process (each writes tables of its own)."""
    return _project(spark, tmp_path_factory.mktemp("guide"))


def _variant(folder: Path, key: str, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Path]:
    """The guide's pipeline with its last stage replaced by the block ``key``'s, writing to tables of its
    own (``data/<name>``), as ``sensors/<name>.yml``; run from the folder above, without PYTHONPATH."""
    raw = yaml.safe_load(block("python-guide-pipeline").body)
    (stage,) = yaml.safe_load(textwrap.dedent(block(key).body))
    assert stage["name"] == raw["stages"][-1]["name"]
    raw["stages"][-1] = stage
    raw["target"]["table"] = f"data/{name}"
    raw["errors"]["deadletterqueue.table.name"] = f"data/{name}_quarantine"
    conf = folder / f"{name}.yml"
    conf.write_text(yaml.safe_dump(raw), encoding="utf-8")
    monkeypatch.chdir(folder.parent)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return raw, conf


def test_the_vectorized_stage_gives_the_same_target_and_quarantine(
    spark: Any, guide: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = guide
    _variant(folder, "python-guide-vectorized", "vectorized", monkeypatch)

    assert main(["run", "--conf", "sensors/vectorized.yml"]) == 0

    _assert_the_guides_outcome(spark, folder / "data" / "vectorized", folder / "data" / "vectorized_quarantine")


def test_output_replace_returns_every_field_and_validate_names_none_left_out(
    spark: Any, guide: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's output: replace stage gives the same target; the one that leaves sensor out is named."""
    folder = guide
    raw, conf = _variant(folder, "python-guide-replace", "replaced", monkeypatch)
    replace = raw["stages"][-1]
    assert replace["options"]["output"] == "replace"

    assert main(["validate", "--conf", "sensors/replaced.yml"]) == 0
    assert "warning" not in capsys.readouterr().out
    assert main(["run", "--conf", "sensors/replaced.yml"]) == 0
    _assert_the_guides_outcome(spark, folder / "data" / "replaced", folder / "data" / "replaced_quarantine")

    # the guide's warning: a replace stage whose returns: leaves a parsed field out
    replace["options"]["returns"] = "reading_id BIGINT, celsius DOUBLE, fahrenheit DOUBLE"
    conf.write_text(yaml.safe_dump(raw), encoding="utf-8")
    capsys.readouterr()
    assert main(["validate", "--conf", "sensors/replaced.yml"]) == 0
    warned = capsys.readouterr().out
    assert ("warning: field 'sensor' of stage 'parse' does not reach the target: stage 'enrich' leaves it out\n"
            in warned)
    assert warned.count("warning") == 1


def test_what_the_function_is_given_and_may_return_in_each_mode(spark: Any) -> None:
    """The guide's table: a scalar is a value or a Series, a struct a dict or a DataFrame."""
    parse = JsonParse("parse", parse_spark_type("a INT, b DOUBLE", "schema"))
    struct = kafka_df(spark, [b'{"a": 1, "b": 2.5}', b'{"a": null, "b": 3}'])

    def results(df: Any, *stages: Any) -> list[Any]:
        out = apply_stages(df, [DecodeUtf8("decode"), *stages]).orderBy("offset")
        return [r[stages[-1].name].result for r in out.collect()]

    assert results(struct, parse, python_stage("t", fx.type_of, "STRING", output="replace")) == ["dict[a,b]"] * 2
    assert results(struct, parse, python_stage("t", fx.type_of_batch, "STRING", mode="vectorized",
                                               output="replace")) == ["DataFrame[a,b]"] * 2
    scalar = kafka_df(spark, [b"12", b"x"])
    assert results(scalar, python_stage("t", fx.type_of, "STRING")) == ["str", "str"]
    assert results(scalar, python_stage("t", fx.type_of_batch, "STRING", mode="vectorized")) == ["Series", "Series"]
    # a struct result may be a Row or a tuple in field order as well as a dict
    for fn in (fx.as_row, fx.as_tuple):
        rows = results(struct, parse, python_stage("t", fn, "a INT, b STRING", output="replace"))
        assert [(r.a, r.b) for r in rows] == [(1, "2.5"), (None, "3.0")]
    # output: extend (the default): the input's fields, the returned ones in place or after them
    (extended, _) = results(struct, parse, python_stage("t", fx.as_row, "b STRING, c INT", missing_fields="as_null"))
    assert extended.asDict() == {"a": 1, "b": "2.5", "c": None}


def test_the_stages_page_shows_the_guides_last_stage() -> None:
    """docs/stages.md's "target row" stage is the one the worked example runs above."""
    (shown,) = yaml.safe_load(textwrap.dedent(block("target-row-python").body))
    *_, last = yaml.safe_load(block("python-guide-pipeline").body)["stages"]
    assert shown == last
