"""A config error only Spark can find, when it analyses a stage, still ends ``quarantine run`` with
exit code 2 naming the stage and its config key, before anything is written (issue 34).

``quarantine validate`` cannot see these without Spark: an ``expr`` rule that parses but
names a column the staged row does not have, or calls a function that does not exist,
or is not a condition. A run finds them when it applies the stages to the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from tests.helpers import kafka_df, orders_config


@pytest.mark.parametrize("expr", [
    "parse.result.amountt > 0",  # a field the stage's input does not have
    "no_such_function(parse.result.amount)",  # a function Spark does not know
    "parse.result.amount + 1",  # not a condition
])
def test_an_expression_spark_cannot_analyse_ends_the_run_with_exit_2_naming_the_stage_and_key(
    spark: Any, table_dir: Path, capsys: pytest.CaptureFixture[str], expr: str
) -> None:
    kafka_df(spark, [b'{"order_id":"1","amount":1}']).write.format("delta").save(str(table_dir / "source"))
    cfg = orders_config(table_dir)
    cfg["stages"].append({"name": "check", "type": "checks", "options": {"rules": [
        {"check": "not_null", "column": "order_id"}, {"check": "expr", "expr": expr}]}})
    conf = table_dir / "p.yml"
    conf.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    capsys.readouterr()

    assert main(["run", "--conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("quarantine: bad config:"), err
    assert "stages[2].options.rules[1].expr" in err and "stage 'check'" in err and len(err.splitlines()) == 1
    assert not (table_dir / "target").exists() and not (table_dir / "quarantine").exists()
