# Databricks notebook source
# MAGIC %md
# MAGIC # quarantine: replay
# MAGIC
# MAGIC Re-runs the pipeline's **open** quarantine rows — their raw bytes as read — through the
# MAGIC pipeline's *current* stages (after a parser fix or a widened check). Records that now pass
# MAGIC go to the target and become `replayed`; records that still fail stay `open` with the new
# MAGIC failure appended to `error_history`. A thin wrapper over `quarantine.runners.replay.replay`.
# MAGIC
# MAGIC With `apply` = `false` (the default) nothing is written: the notebook previews how many
# MAGIC selected records would pass now, by stage.
# MAGIC
# MAGIC Widgets: `conf`, `catalog`, `schema`, `quarantine_table`, `target_table` (table names are
# MAGIC set on the config when `catalog` is given; the target defaults to `<catalog>.<schema>.<pipeline>`,
# MAGIC the bundle's convention), `predicate` (SQL over quarantine columns), `apply`. With the defaults
# MAGIC it previews the local demo (`quarantine init-demo`, then `quarantine run --conf conf/orders_demo.yml`).

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


def show(df, n: int = 50) -> None:
    """display() on Databricks, show() elsewhere."""
    try:
        display(df)  # noqa: F821 - provided by Databricks
    except NameError:
        df.show(n, truncate=False)


def repo_path(relative: str) -> str:
    """``relative`` (to the repository, the bundle root in a workspace) as an absolute path.

    Locally notebooks run from the repository root; in a Databricks workspace the working
    directory is the notebook's folder (notebooks/). Relative paths would mean different
    files (and Delta refuses a relative delta.`path`), so every default is made absolute.
    """
    for base in (Path.cwd(), Path.cwd().parent):
        if (base / "conf").is_dir():
            return str((base / relative).resolve())
    return str(Path(relative).resolve())


conf_path = widget("conf", repo_path("conf/orders_demo.yml"), "pipeline config (YAML)")
catalog = widget("catalog", "", "catalog (empty: use the config's tables)")
schema = widget("schema", "", "schema")
quarantine_table = widget("quarantine_table", "quarantine", "quarantine table")
target_table = widget("target_table", "", "target table (empty: the pipeline's name)")
where = widget("predicate", "", "SQL predicate over quarantine columns (empty: all open)")
apply = widget("apply", "false", "apply (true writes)").strip().lower() == "true"

# COMMAND ----------

from quarantine.config import load_config
from quarantine.pipeline import Pipeline
from quarantine.spark.session import get_spark

config = load_config(conf_path)
if catalog:
    config = load_config(conf_path, {
        "target.table": f"{catalog}.{schema}.{target_table or config.pipeline}",
        "errors.deadletterqueue.table.name": f"{catalog}.{schema}.{quarantine_table}",
    })
spark = get_spark(f"quarantine:replay:{config.pipeline}", config.spark_conf)
pipeline = Pipeline.from_config(config, spark)
print(f"pipeline {config.pipeline}: replaying open rows of {pipeline.quarantine_table} "
      f"into {pipeline.target_table}" + (f" where {where}" if where else "") + ("" if apply else " (preview)"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Preview: which selected records pass the current stages (no writes)

# COMMAND ----------

from pyspark.sql import functions as F

from quarantine.runners.replay import open_records
from quarantine.schema import KAFKA_SOURCE_SCHEMA

selected = open_records(pipeline, where or None)
source = selected.select(*[F.col(f.name) for f in KAFKA_SOURCE_SCHEMA.fields])
preview = pipeline.split_frame(source).select(
    F.when(F.col("_q_error").isNull(), F.lit("would pass")).otherwise(F.lit("still failing")).alias("outcome"),
    F.col("_q_error.stage").alias("failing_stage"),
    F.col("_q_error.error_class").alias("error_class"),
)
show(preview.groupBy("outcome", "failing_stage", "error_class").count().orderBy(F.desc("count")))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Replay (only when `apply` is true)

# COMMAND ----------

from quarantine.runners.replay import replay

if apply:
    result = replay(pipeline, where or None)
    print(result.render())
else:
    print("preview only: set the `apply` widget to true to replay")
