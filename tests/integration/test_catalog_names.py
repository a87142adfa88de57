"""Catalog names (``default.orders_t``, ``spark_catalog.default.q_t``) on the local default session.

Spark's local catalog is in memory: a name a run created is forgotten when its process
ends, while the table's folder stays under ``spark-warehouse/``. Users run one command
after another (``run``, then ``stats``, then ``run``), each a process of its own, so the
test does too: every command is a ``quarantine`` process whose working directory is the
test's folder (its ``spark-warehouse/`` lands there), as a user's shell starts it. A name the
catalog cannot hold is refused by the config, before a session starts: those commands run
in-process (``quarantine.cli.main``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.demo.orders import write_demo_source

RECORDS, NEW = 300, 100
#: The documented name forms: a schema-qualified name and a catalog-qualified one.
TARGET, QUARANTINE = "default.orders_t", "spark_catalog.default.q_t"


def _config(d: Path, source: Path) -> Path:
    conf = d / "orders.yml"
    conf.write_text(yaml.safe_dump({
        "pipeline": "orders_names",
        "source": {"format": "delta", "path": str(source)},
        "target": {"table": TARGET},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": QUARANTINE},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json",
             "options": {"schema": "order_id STRING, amount DOUBLE, currency STRING",
                         "required": ["order_id", "amount", "currency"]}},
        ],
    }), encoding="utf-8")
    return conf


def _quarantine(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``quarantine ARGS`` as a user runs it in ``cwd``: a process (and a JVM) of its own."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "quarantine", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600, check=False)


def _coordinates(spark: Any, path: Path, columns: tuple[str, str, str]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.read.format("delta").load(str(path)).select(*columns).collect()]


def test_catalog_names_on_the_local_default_persist_between_commands_and_hold_each_record_once(
    spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    write_demo_source(spark, str(source), RECORDS, poison_rate=0.1)
    conf = _config(tmp_path, source)

    first = _quarantine(tmp_path, "run", "--conf", str(conf))
    assert first.returncode == 0, first.stdout + first.stderr
    stats = _quarantine(tmp_path, "stats", "--conf", str(conf))
    assert stats.returncode == 0 and "no quarantine table" not in stats.stdout + stats.stderr, stats
    # new records arrive; a second run in a new process finds both tables by their names
    # and adds the new records, none of the first run's twice
    new = spark.read.format("delta").load(str(source)).limit(NEW).withColumn("offset", F.col("offset") + 10_000)
    new.write.format("delta").mode("append").save(str(source))
    again = _quarantine(tmp_path, "run", "--conf", str(conf))
    assert again.returncode == 0, again.stdout + again.stderr
    # and a name is a name in SQL too, in a process that did not create it
    query = _quarantine(tmp_path, "sql", "top_errors", "--conf", str(conf))
    assert query.returncode == 0 and "parse_order" in query.stdout, query

    warehouse = tmp_path / "spark-warehouse"
    target = _coordinates(spark, warehouse / "orders_t", ("_source_topic", "_source_partition", "_source_offset"))
    failed = _coordinates(spark, warehouse / "q_t", ("topic", "partition", "offset"))
    every = _coordinates(spark, source, ("topic", "partition", "offset"))
    assert len(every) == RECORDS + NEW and failed
    assert len(set(target)) == len(target) and len(set(failed)) == len(failed)
    assert set(target).isdisjoint(failed) and set(target) | set(failed) == set(every)


def test_a_name_spark_s_session_catalog_cannot_hold_is_refused_before_anything_is_written(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spark's own catalog (the local default, a Hive metastore) holds letters, digits and _
    # only; it says so when the table is created, after Delta has written the table's files
    from pyspark.errors import AnalysisException

    try:
        spark.sql(f"CREATE TABLE default.`orders-t` (id INT) USING delta LOCATION '{tmp_path / 'probe'}'")
    except AnalysisException as exc:
        assert exc.getCondition() == "INVALID_SCHEMA_OR_RELATION_NAME"
    else:
        raise AssertionError("the session catalog took default.`orders-t`")

    source = tmp_path / "source"
    write_demo_source(spark, str(source), 50, poison_rate=0.1)
    conf = _config(tmp_path, source)
    conf.write_text(conf.read_text(encoding="utf-8").replace(TARGET, "default.`orders-t`"), encoding="utf-8")
    # the commands in-process, on this session (its catalog is the local default too): the
    # refusal is the config's, before any session or table is touched; what a new process
    # adds, its exit code, is main's return (tests/unit/test_cli_exit.py: console)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["validate", "--conf", str(conf)]) == 2
    checked = capsys.readouterr().err
    assert "config key 'target.table'" in checked and "letters, digits and _ only" in checked, checked
    assert main(["run", "--conf", str(conf)]) == 2
    ran = capsys.readouterr().err
    assert "config key 'target.table'" in ran, ran
    # no table, no folder left behind: not in the working directory, not in the session's warehouse
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert not (tmp_path / "spark-warehouse").exists() and not (warehouse / "orders-t").exists()


def test_the_counts_of_a_write_that_creates_a_catalog_table_are_none_not_a_failure(spark: Any) -> None:
    # saveAsTable of a new name is Delta's CREATE TABLE AS SELECT: the observed plan runs in
    # a query of its own and Spark completes the observation with an empty row, on which
    # Observation.get fails (toPyRow: assertion failed); the batch then counts over its cache
    from pyspark.sql import Observation

    from quarantine.metrics.columns import observed_row

    db = f"observed_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    try:
        created, appended = Observation("created"), Observation("appended")
        for obs in (created, appended):
            rows = spark.range(5).observe(obs, F.count(F.lit(1)).alias("n"))
            rows.write.format("delta").mode("append").saveAsTable(f"{db}.t")
        # Spark 4.1 completes it with an empty row (None: count over the cache); Spark 4.0 with its metrics
        assert observed_row(created) in (None, {"n": 5})
        assert observed_row(appended) == {"n": 5}
    finally:
        spark.sql(f"DROP DATABASE {db} CASCADE")
