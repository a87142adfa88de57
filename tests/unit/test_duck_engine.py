"""Which engine answers a read-only command, and the SQL library's translation to DuckDB (issue 53; no JVM)."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from quarantine.config import parse_config
from quarantine.errors import ConfigError
from quarantine.ops.duck import ENGINE_ENV, SPARK_MACROS, _engine, duckdb_sql, spark_reason
from quarantine.sql import bind, catalogue

pytestmark = pytest.mark.unit


def _config(quarantine: str, metrics: str | None = None, **spark_conf: str) -> Any:
    raw: dict[str, Any] = {
        "pipeline": "p", "source": {"format": "delta", "path": "/data/source"}, "target": {"table": "/data/target"},
        "errors": {"deadletterqueue.table.name": quarantine}, "stages": [{"name": "decode", "type": "decode_utf8"}],
    }
    if metrics:
        raw["metrics"] = {"table": metrics}
    if spark_conf:
        raw["spark"] = {"conf": spark_conf}
    return parse_config(raw)


def test_path_tables_are_read_without_a_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    monkeypatch.delenv("QUARANTINE_SPARK_REMOTE", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert spark_reason(_config("data/q", "/mnt/m"), ("quarantine", "metrics")) is None


@pytest.mark.parametrize(("quarantine", "metrics", "reads", "why"), [
    ("main.ops.q", None, ("quarantine",), "the quarantine table main.ops.q is not a local path"),
    ("s3://bucket/q", None, ("quarantine",), "the quarantine table s3://bucket/q is not a local path"),
    ("dbfs:/q", None, ("quarantine",), "the quarantine table dbfs:/q is not a local path"),
    ("data/q", "main.ops.m", ("quarantine", "metrics"), "the metrics table main.ops.m is not a local path"),
])
def test_a_catalog_name_or_a_uri_is_read_by_spark(
    monkeypatch: pytest.MonkeyPatch, quarantine: str, metrics: str | None, reads: tuple[str, ...], why: str
) -> None:
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    monkeypatch.delenv("QUARANTINE_SPARK_REMOTE", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert spark_reason(_config(quarantine, metrics), reads) == why


def test_databricks_connect_and_the_switch_send_every_read_to_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUARANTINE_SPARK_REMOTE", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    monkeypatch.setenv(ENGINE_ENV, "spark")
    assert spark_reason(_config("data/q"), ("quarantine",)) == f"${ENGINE_ENV} is spark"
    monkeypatch.setenv(ENGINE_ENV, "auto")
    assert spark_reason(_config("data/q", None, **{"spark.remote": "sc://h:15002"}), ("quarantine",)) == "Spark Connect"
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "18.0")
    assert spark_reason(_config("data/q"), ("quarantine",)) == "on Databricks"


def test_an_unknown_engine_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINE_ENV, "duck")
    with pytest.raises(ConfigError, match="QUARANTINE_READ_ENGINE"):
        _engine()


def test_every_query_of_the_library_binds_and_plans_on_duckdb() -> None:
    db = duckdb.connect()
    for macro in SPARK_MACROS:
        db.execute(macro)
    db.execute("CREATE TABLE quarantine AS SELECT * FROM (VALUES ('p', 'orders', 0, 1::BIGINT, 'open', 's', 'E', "
               "'m', 1, now(), now(), NULL::TIMESTAMPTZ, NULL::VARCHAR, "
               "[{'at': now(), 'run_id': 'r', 'stage': 's', 'error_class': 'E', 'message': 'm'}])) "
               "t(pipeline, topic, \"partition\", \"offset\", status, stage, error_class, message, error_count, "
               "first_seen_at, last_seen_at, resolved_at, resolution, error_history)")
    db.execute("CREATE TABLE metrics AS SELECT 'p' AS pipeline, now() AS recorded_at, 'records-in' AS metric, "
               "'orders' AS topic, 1.0 AS value")
    for query in catalogue().values():
        text = duckdb_sql(bind(query, {}, {"quarantine": "quarantine", "metrics": "metrics"}))
        db.execute(text).fetchall()  # raises on anything DuckDB cannot run


def test_literals_keep_their_escapes_and_comments_their_text() -> None:
    text = duckdb_sql("SELECT 'it\\'s' AS a, `odd``name`, offset -- offset in a comment\nFROM `t`")
    assert text == "SELECT E'it\\'s' AS a, \"odd`name\", \"offset\" -- offset in a comment\nFROM \"t\""
    assert duckdb.connect().execute("SELECT E'it\\'s'").fetchall() == [("it's",)]
