# Databricks notebook source
# MAGIC %md
# MAGIC # quarantine: triage
# MAGIC
# MAGIC What is in the quarantine table, and why. Every query is plain SQL over the table's
# MAGIC documented columns (see the design's quarantine table contract), so it can be copied
# MAGIC into a SQL editor or a dashboard.
# MAGIC
# MAGIC Widgets: `catalog`, `schema`, `quarantine_table` (a name in catalog.schema, or a path
# MAGIC when catalog is empty), `pipeline`, `days` (look-back window).

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


def show(df, n: int = 100) -> None:
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


catalog = widget("catalog", "", "catalog (empty: quarantine_table is a path)")
schema = widget("schema", "", "schema")
quarantine_table = widget("quarantine_table", repo_path("data/demo/quarantine"), "quarantine table")
pipeline = widget("pipeline", "orders_demo", "pipeline")
days = int(widget("days", "30", "look-back days"))


def table_ref(catalog: str, schema: str, table: str) -> str:
    """A SQL reference: `c`.`s`.`t`, or delta.`path` for a path (made absolute: Delta refuses a relative one)."""
    if catalog:
        return ".".join(f"`{p.replace('`', '``')}`" for p in (catalog, schema, table))
    path = table if "://" in table else os.path.abspath(table)
    return f"delta.`{path.replace('`', '``')}`"


source_ref = table_ref(catalog, schema, quarantine_table)

# COMMAND ----------

from quarantine.spark.session import get_spark

spark = get_spark("quarantine:triage")
# One view of this pipeline's rows; every query below is plain SQL over it.
spark.table(source_ref).where(f"pipeline = '{pipeline.replace(chr(39), chr(39) * 2)}'").createOrReplaceTempView(
    "quarantine_records"
)
T = "quarantine_records"
print(f"quarantine table {source_ref}, pipeline {pipeline}, last {days} days")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Open records by stage, error class, topic and day

# COMMAND ----------

show(spark.sql(f"""
SELECT stage, error_class, topic, to_date(first_seen_at) AS day,
       count(*) AS open_records, min(first_seen_at) AS first_seen, max(last_seen_at) AS last_seen
FROM {T}
WHERE status = 'open' AND first_seen_at >= current_timestamp() - make_interval(0, 0, 0, {days})
GROUP BY stage, error_class, topic, to_date(first_seen_at)
ORDER BY day DESC, open_records DESC
"""))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Status overview (open / replayed / discarded)

# COMMAND ----------

show(spark.sql(f"""
SELECT status, kind, stage, count(*) AS records, max(resolved_at) AS last_resolved
FROM {T}
GROUP BY status, kind, stage
ORDER BY status, records DESC
"""))

# COMMAND ----------

# MAGIC %md
# MAGIC ## The raw records: value and key as text (when valid UTF-8) and hex

# COMMAND ----------

show(spark.sql(f"""
SELECT topic, `partition`, `offset`, stage, error_class, message,
       octet_length(value) AS value_bytes,
       is_valid_utf8(value) AS value_is_utf8,
       CASE WHEN is_valid_utf8(value) THEN CAST(value AS STRING) END AS value_text,
       hex(substring(value, 1, 64)) AS value_hex_first_64_bytes,
       CASE WHEN is_valid_utf8(key) THEN CAST(key AS STRING) ELSE hex(key) END AS key_text_or_hex,
       transform(headers, h -> named_struct('key', h.key, 'value_hex', hex(h.value))) AS headers_hex,
       last_seen_at
FROM {T}
WHERE status = 'open'
ORDER BY last_seen_at DESC, topic, `partition`, `offset`
LIMIT 200
"""))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Error history, one row per failure (oldest first)

# COMMAND ----------

show(spark.sql(f"""
SELECT q.topic, q.`partition`, q.`offset`, q.status, h.pos + 1 AS attempt,
       h.e.at AS failed_at, h.e.run_id, h.e.stage, h.e.error_class, h.e.message
FROM {T} AS q
LATERAL VIEW posexplode(q.error_history) h AS pos, e
ORDER BY q.topic, q.`partition`, q.`offset`, attempt
LIMIT 500
"""))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Records that failed more than once (a replay did not fix them)

# COMMAND ----------

show(spark.sql(f"""
SELECT topic, `partition`, `offset`, size(error_history) AS failures, status,
       element_at(error_history, 1).error_class AS first_error, error_class AS latest_error,
       first_seen_at, last_seen_at
FROM {T}
WHERE size(error_history) > 1
ORDER BY failures DESC, last_seen_at DESC
LIMIT 200
"""))
