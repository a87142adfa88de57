# Databricks notebook source
# MAGIC %md
# MAGIC # quarantine: getting started
# MAGIC
# MAGIC Ten minutes from sample data to a fixed pipeline:
# MAGIC
# MAGIC 1. write a Kafka-shaped sample source: 2,000 order events, some of them poison;
# MAGIC 2. run the demo pipeline (`conf/orders_demo.yml`): good rows go to the target table,
# MAGIC    every failed record, with its raw bytes and the reason, to the **quarantine table**;
# MAGIC 3. look at the quarantine table with SQL;
# MAGIC 4. fix the pipeline (its expectation suite does not know a new order status) and
# MAGIC    **replay** the records it quarantined;
# MAGIC 5. check that every source record is in the target or still open in quarantine.
# MAGIC
# MAGIC Widgets: `catalog` and `schema` put the tutorial's tables in Unity Catalog
# MAGIC (`<catalog>.<schema>.getting_started_*`; the schema must exist); with `catalog` empty
# MAGIC they are Delta folders under `demo_dir`. Each run starts afresh.

# COMMAND ----------

import os
from pathlib import Path


def widget(name: str, default: str, label: str) -> str:
    """A notebook widget on Databricks; the environment (QUARANTINE_<NAME>) or default elsewhere."""
    try:
        dbutils.widgets.text(name, default, label)  # noqa: F821 - provided by Databricks
        return str(dbutils.widgets.get(name))  # noqa: F821
    except NameError:
        return os.environ.get(f"QUARANTINE_{name.upper()}", default)


def repo_path(relative: str) -> str:
    """``relative`` to the repository root (the bundle root in a workspace), as an absolute path."""
    for base in (Path.cwd(), Path.cwd().parent):
        if (base / "conf").is_dir():
            return str((base / relative).resolve())
    return str(Path(relative).resolve())


catalog = widget("catalog", "", "catalog (empty: Delta folders under demo_dir)")
schema = widget("schema", "", "schema")
demo_dir = widget("demo_dir", repo_path("data/getting_started"), "folder for the tables (no catalog)")


def table(name: str) -> str:
    """Where the tutorial's table ``name`` lives: a Unity Catalog name, or an absolute folder."""
    return f"{catalog}.{schema}.getting_started_{name}" if catalog else str(Path(demo_dir, name).resolve())

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Sample data
# MAGIC
# MAGIC Kafka-shaped rows (`key`, `value` as bytes, `topic`, `partition`, `offset`, `headers`…):
# MAGIC JSON order events, 10% of them broken in one of twelve ways (invalid UTF-8, cut-off JSON,
# MAGIC a negative amount, an order status the checks do not know yet…).

# COMMAND ----------

import shutil

from quarantine.demo.orders import write_demo_source, write_demo_table
from quarantine.spark.session import get_spark

spark = get_spark("quarantine:getting-started")
for name in ("source", "orders", "quarantine", "metrics"):  # start afresh
    if catalog:
        spark.sql(f"DROP TABLE IF EXISTS {table(name)}")
    else:
        shutil.rmtree(table(name), ignore_errors=True)
if catalog:
    write_demo_table(spark, table("source"), 2000, poison_rate=0.1)
else:
    write_demo_source(spark, table("source"), 2000, poison_rate=0.1)
print(f"wrote 2,000 order events to {table('source')}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Run the pipeline
# MAGIC
# MAGIC The demo config's stages decode the bytes, parse the JSON, convert the timestamp, check
# MAGIC amount, currency and quantity, and validate a Great Expectations suite. The tables are set
# MAGIC with overrides, the keys `quarantine run --set key=value` takes.

# COMMAND ----------

from quarantine.config import load_config
from quarantine.pipeline import Pipeline

conf_path = repo_path("conf/orders_demo.yml")
overrides = {
    "pipeline": "getting_started",
    "source.path": None if catalog else table("source"),
    "source.table": table("source") if catalog else None,
    "target.table": table("orders"),
    "errors.deadletterqueue.table.name": table("quarantine"),
    "metrics.table": table("metrics"),
    "mlflow.enabled": False,  # `quarantine run` and the ingest notebook log runs to MLflow
}
pipeline = Pipeline.from_config(load_config(conf_path, overrides), spark)
print(pipeline.run().render())

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. The quarantine table, in SQL
# MAGIC
# MAGIC One row per failed record: where it came from (`topic`, `partition`, `offset`), its raw
# MAGIC `key`, `value` and `headers`, the stage that failed and why (`stage`, `error_class`,
# MAGIC `message`), and its `status` (`open` until replayed or discarded). The next cell names it
# MAGIC `quarantine_records` so that the SQL below reads the same on a path and in Unity Catalog.

# COMMAND ----------

quarantine_table = table("quarantine") if catalog else f"delta.`{table('quarantine')}`"
spark.sql(f"CREATE OR REPLACE TEMP VIEW quarantine_records AS SELECT * FROM {quarantine_table}")
print(f"quarantine_records: {quarantine_table}")

# COMMAND ----------

# MAGIC %sql
# MAGIC -- what failed, where and why
# MAGIC SELECT stage, error_class, count(*) AS records, min(message) AS example
# MAGIC FROM quarantine_records
# MAGIC WHERE status = 'open'
# MAGIC GROUP BY stage, error_class
# MAGIC ORDER BY records DESC

# COMMAND ----------

# MAGIC %sql
# MAGIC -- the raw bytes of the records the expectation suite refused
# MAGIC SELECT `partition`, `offset`, error_class, CAST(value AS STRING) AS value_text
# MAGIC FROM quarantine_records
# MAGIC WHERE stage = 'expect_order' AND status = 'open'
# MAGIC ORDER BY `partition`, `offset`
# MAGIC LIMIT 20

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Fix, then replay
# MAGIC
# MAGIC Some `expect_order` failures are orders with the status `refunded`: a status the producer
# MAGIC added and the suite (`conf/expectations/orders.json`) does not list yet. The fix adds it to
# MAGIC the suite (in your project: edit the file; here a copy, given with an override of
# MAGIC `stages`). Replay re-runs the open records' raw bytes through the fixed stages: those that
# MAGIC pass go to the target and become `replayed`; the others (an e-mail address without `@`)
# MAGIC stay `open`, with the new failure added to `error_history`.

# COMMAND ----------

import json
import tempfile

import yaml

from quarantine.runners.replay import replay

stages = yaml.safe_load(Path(conf_path).read_text(encoding="utf-8"))["stages"]
expect_order = next(s for s in stages if s["name"] == "expect_order")
suite_path = Path(conf_path).parent / expect_order["options"]["suite"]
suite = json.loads(suite_path.read_text(encoding="utf-8"))
for expectation in suite["expectations"]:
    if expectation["type"] == "expect_column_values_to_be_in_set" and expectation["kwargs"]["column"] == "status":
        expectation["kwargs"]["value_set"].append("refunded")
fixed_suite = Path(tempfile.mkdtemp(), "orders.json")
fixed_suite.write_text(json.dumps(suite), encoding="utf-8")
expect_order["options"]["suite"] = str(fixed_suite)

fixed = Pipeline.from_config(load_config(conf_path, {**overrides, "stages": stages}), spark)
print(replay(fixed, "stage = 'expect_order'").render())

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT status, stage, count(*) AS records
# MAGIC FROM quarantine_records
# MAGIC GROUP BY status, stage
# MAGIC ORDER BY status, stage

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. Nothing lost
# MAGIC
# MAGIC Every source record is in exactly one place: the target (first run or replay) or an open
# MAGIC quarantine row. Next: the `triage` notebook (open records by day, raw bytes in hex, error
# MAGIC history), the `replay` notebook, and the manual's pages on the quarantine table (docs/concepts.md) and replay (docs/operators-loop.md).

# COMMAND ----------

from quarantine.tables import read_table

in_source = read_table(spark, table("source")).count()
in_target = read_table(spark, table("orders")).count()
still_open = spark.table("quarantine_records").where("status = 'open'").count()
print(f"{in_source:,} source records = {in_target:,} in the target + {still_open:,} open in quarantine")
assert in_source == in_target + still_open, "a record is missing or in two places"
