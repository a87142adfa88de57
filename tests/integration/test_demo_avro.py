"""``quarantine init-demo --format avro`` then ``run``: every Avro poison kind lands in quarantine, by class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.config import load_config
from quarantine.demo.avro import AVRO_DEMO_CONFIG
from tests.support.readme import block

RECORDS = 600


def test_the_avro_demo_runs_and_quarantines_each_poison_kind(
    spark: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's two commands, in a temporary folder, with a smaller sample and more poison."""
    monkeypatch.chdir(tmp_path)
    init, run = block("avro-demo").commands()
    assert main([*init[1:], "--records", str(RECORDS), "--poison-rate", "0.3"]) == 0
    conf = tmp_path / init[init.index("--out") + 1] / AVRO_DEMO_CONFIG
    assert f"run it: quarantine run --conf {conf}" in capsys.readouterr().out
    assert run[1:] == ["run", "--conf", str(conf.relative_to(tmp_path))]
    assert main(run[1:]) == 0
    printed = capsys.readouterr().out
    config = load_config(conf)
    target = spark.read.format("delta").load(config.target.table)
    quarantine = spark.read.format("delta").load(config.errors.dlq_table_name)
    assert target.count() + quarantine.count() == RECORDS
    classes = {r["error_class"]: r["count"] for r in quarantine.groupBy("error_class").count().collect()}
    assert set(classes) == {"BadMagicByte", "UnknownSchemaId", "UndecodableAvro", "IncompatibleReaderSchema",
                            "NullInput", "range"}, classes
    shown = re.search(r"^  quarantined +([\d,]+)$", printed, re.M)
    assert shown is not None and int(shown[1].replace(",", "")) == quarantine.count(), printed
    # v1 records (even ids) read as v2: channel takes its default; v2 records keep theirs
    channels = {r["channel"] for r in target.select("channel").distinct().collect()}
    assert channels == {"web", "app"}
    assert dict(target.dtypes)["created_at"] == "timestamp"


def test_avro_demo_refuses_a_catalog_table(tmp_path: Path, capsys: Any) -> None:
    assert main(["init-demo", "--format", "avro", "--table", "main.demo.orders_raw"]) == 2  # a usage error
    assert "config key '--format': got 'avro'; expected json with --table" in capsys.readouterr().err
