# Databricks notebook source
# MAGIC %md
# MAGIC # quarantine: ingest
# MAGIC
# MAGIC Runs one pipeline from its YAML config: every record either lands in the target table or,
# MAGIC with its raw bytes and the reason, in the quarantine table. A thin wrapper over
# MAGIC `quarantine.pipeline.Pipeline` — the same code the `quarantine run` command and the
# MAGIC `quarantine_orders` job run.
# MAGIC
# MAGIC Widgets: `conf` (the YAML config), `overrides` (`key=value` per line, like `--set`).

# COMMAND ----------

import os
from pathlib import Path

import yaml


def widget(name: str, default: str, label: str) -> str:
    """A notebook widget on Databricks; the environment (QUARANTINE_<NAME>) or default elsewhere."""
    try:
        dbutils.widgets.text(name, default, label)  # noqa: F821 - provided by Databricks
        return str(dbutils.widgets.get(name))  # noqa: F821
    except NameError:
        return os.environ.get(f"QUARANTINE_{name.upper()}", default)


def show(df, n: int = 50) -> None:
    """display() on Databricks, show() elsewhere."""
    try:
        display(df)  # noqa: F821 - provided by Databricks
    except NameError:
        df.show(n, truncate=False)


def repo_path(relative: str) -> str:
    """``relative`` (to the repository, the bundle root in a workspace) as an absolute path.

    Locally notebooks run from the repository root; in a Databricks workspace the working
    directory is the notebook's folder (notebooks/), where conf/orders_demo.yml is not.
    """
    for base in (Path.cwd(), Path.cwd().parent):
        if (base / "conf").is_dir():
            return str((base / relative).resolve())
    return str(Path(relative).resolve())


conf_path = widget("conf", repo_path("conf/orders_demo.yml"), "pipeline config (YAML)")
overrides_text = widget("overrides", "", "overrides: key=value per line")

# COMMAND ----------

from quarantine.config import load_config
from quarantine.spark.session import get_spark

overrides = {}
for line in overrides_text.splitlines():
    if line.strip():
        key, _, value = line.partition("=")
        overrides[key.strip()] = yaml.safe_load(value)

config = load_config(conf_path, overrides)
spark = get_spark(f"quarantine:{config.pipeline}", config.spark_conf)
print(f"pipeline {config.pipeline}: {config.source.location} -> {config.target.table}; "
      f"quarantine {config.errors.dlq_table_name}")

# COMMAND ----------

from quarantine.pipeline import Pipeline

pipeline = Pipeline.from_config(config, spark)
summary = pipeline.run()
print(summary.render())

# COMMAND ----------

# MAGIC %md
# MAGIC ## What was quarantined in this run

# COMMAND ----------

from pyspark.sql import functions as F

from quarantine.tables import read_table, table_exists

if table_exists(spark, config.errors.dlq_table_name):
    show(
        read_table(spark, config.errors.dlq_table_name)
        .where((F.col("pipeline") == config.pipeline) & (F.col("run_id") == summary.run.run_id))
        .groupBy("stage", "error_class")
        .count()
        .orderBy(F.desc("count"))
    )
