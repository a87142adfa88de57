"""``quarantine validate`` checks a config without starting Spark (issue 13, item 6).

These are unit-tier tests: the tier has no JVM, so a validate that started Spark would
show here as a running gateway, and the checks below assert there is none.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from pyspark import SparkContext

from quarantine.cli import main
from tests.helpers import orders_config

REPO = Path(__file__).resolve().parents[2]


def _no_jvm() -> None:
    assert SparkContext._gateway is None and SparkContext._active_spark_context is None


def _write(tmp_path: Path, config: dict[str, object]) -> Path:
    path = tmp_path / "pipeline.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_demo_config_validates_without_spark_and_names_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)  # orders_demo.yml + its expectation suite, paths relative to it
    assert main(["validate", "--conf", str(conf / "orders_demo.yml")]) == 0
    out = capsys.readouterr().out
    assert "config ok: pipeline orders_demo, 5 stages: decode(DecodeUtf8) -> parse_order(JsonParse)" in out
    assert "expect_order(ExpectationStage)" in out
    data = (tmp_path / "data" / "demo").resolve()
    for what, name in (("target", "orders"), ("quarantine", "quarantine"), ("metrics", "metrics")):
        assert f"  {what:<11}{data / name}\n" in out
    assert "checked without starting Spark" in out
    _no_jvm()


def test_complex_types_are_checked_without_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = orders_config(tmp_path)
    cfg["stages"][1]["options"]["schema"] = "order_id STRING, items ARRAY<STRUCT<sku: STRING, qty: INT>>"
    items = "ARRAY<STRUCT<sku: STRING, qty: BIGINT>>"
    cfg["stages"].append({"name": "convert", "type": "cast", "options": {"columns": {"items": items}}})
    assert main(["validate", "--conf", str(_write(tmp_path, cfg))]) == 0
    assert "3 stages" in capsys.readouterr().out
    _no_jvm()


@pytest.mark.parametrize(("stage", "key", "why"), [
    (1, "stages[1].options.schema", "expected '>' at position"),
    (2, "stages[2].options.columns.items", "unknown type 'STRUCTT'"),
])
def test_a_bad_type_is_a_config_error_naming_its_key_without_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stage: int, key: str, why: str
) -> None:
    cfg = orders_config(tmp_path)
    cfg["stages"].append({"name": "convert", "type": "cast", "options": {"columns": {"items": "ARRAY<INT>"}}})
    if stage == 1:
        cfg["stages"][1]["options"]["schema"] = "order_id STRING, items ARRAY<INT"
    else:
        cfg["stages"][2]["options"]["columns"]["items"] = "ARRAY<STRUCTT<a: INT>>"
    assert main(["validate", "--conf", str(_write(tmp_path, cfg))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quarantine: bad config:") and key in err and why in err
    _no_jvm()
