"""Test helpers: Kafka-shaped rows, DataFrame equality that ignores volatile columns, a test's MLflow store."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from quarantine.schema import KAFKA_SOURCE_SCHEMA

VOLATILE = ("first_seen_at", "last_seen_at", "run_id", "resolved_at", "first_seen_date", "error_history")

_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def kafka_rows(
    values: Iterable[bytes | None],
    *,
    topic: str = "orders",
    partition: int = 0,
    start_offset: int = 0,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
) -> list[tuple[Any, ...]]:
    """Rows shaped like Spark's Kafka source, one per value, offsets consecutive."""
    out = []
    for i, v in enumerate(values):
        k = keys[i] if keys is not None else f"k{start_offset + i}".encode()
        h = headers[i] if headers is not None else None
        out.append(
            (k, v, topic, partition, start_offset + i, _T0 + dt.timedelta(seconds=i), 0, h)
        )
    return out


def kafka_df(spark: Any, values: Iterable[bytes | None], **kw: Any) -> Any:
    """A Kafka-shaped DataFrame (see :func:`kafka_rows`)."""
    return spark.createDataFrame(kafka_rows(values, **kw), KAFKA_SOURCE_SCHEMA)


def orders_config(d: Any, pipeline: str = "orders_test", **errors: Any) -> dict[str, Any]:
    """A decode + json pipeline over ``d/source`` (Delta) into ``d/target`` and ``d/quarantine``;
    ``errors.tolerance: all`` unless ``errors`` says otherwise."""
    return {
        "pipeline": pipeline,
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"), **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json",
             "options": {"schema": "order_id STRING, amount DOUBLE", "required": ["order_id"]}},
        ],
    }


#: The report run's source: two partitions; per record what happens to it (see :func:`report_run`).
REPORT_SOURCE: dict[int, list[bytes]] = {
    0: [b'{"order_id":"1","amount":1}', b"\xff", b"{", b'{"amount":1}', b'{"order_id":"5","amount":2.5}'],
    1: [b'{"order_id":"10","amount":3}', b'{"order_id":"11","amount":4.5}', b"\xfe\xff", b"[1,"],
}


def report_run(spark: Any, d: Any) -> Any:
    """Tables with data in every figure of ``quarantine report``; returns the config file (YAML).

    Pipeline ``report_test`` (:func:`orders_config` with a metrics table) over
    :data:`REPORT_SOURCE`: run 1 (``amount INT``) quarantines 7 records at
    ``decode`` and ``parse``; run 2 (``errors.tolerance.limit: 1``, the whole source again) breaches and
    fails; a replay with ``amount DOUBLE`` closes the 2 fractional amounts as
    ``replayed``; a discard closes the 2 invalid UTF-8 records. 3 stay open.
    The config file is the fixed one (``amount DOUBLE``), without the limit.
    """
    import yaml

    from quarantine.config import parse_config
    from quarantine.errors import ToleranceExceededError
    from quarantine.pipeline import Pipeline
    from quarantine.runners.replay import discard, replay

    rows = [r for p, values in REPORT_SOURCE.items() for r in kafka_rows(values, partition=p, start_offset=100 * p)]
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(d / "source"))

    def config(schema: str, **errors: Any) -> dict[str, Any]:
        cfg = orders_config(d, "report_test", **errors)
        cfg["stages"][1]["options"]["schema"] = schema
        cfg["metrics"] = {"table": str(d / "metrics")}
        return cfg

    Pipeline.from_config(parse_config(config("order_id STRING, amount INT")), spark).run()
    try:
        # the whole source again (an unchanged pipeline reads only what is new): its open records breach
        Pipeline.from_config(parse_config(config("order_id STRING, amount INT", **{"tolerance.limit": 1})), spark).run(
            full=True)
    except ToleranceExceededError:
        pass
    else:
        raise AssertionError("run 2 of the report run was meant to breach errors.tolerance.limit")
    fixed = config("order_id STRING, amount DOUBLE")
    replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[]))
    discard(Pipeline.from_config(parse_config(fixed), spark, listeners=[]), "stage = 'decode'", "producer bug")
    conf = d / "report.yml"
    conf.write_text(yaml.safe_dump(fixed), encoding="utf-8")
    return conf


def logged(caplog: Any) -> str:
    """The messages ``caplog`` captured, one a line, as they were logged.

    Not ``caplog.text``: that is formatted by the capture handler's formatter, which a test
    run earlier in the same worker may have replaced (PySpark's JSON one escapes quotes).
    """
    return "\n".join(r.getMessage() for r in caplog.records)


def put_mlflow_store(template: Path, folder: Path) -> str:
    """Copy the migrated empty store ``template`` (the ``mlflow_template`` fixture) to
    ``folder/mlflow.db``; its tracking URI (``sqlite:///`` and the absolute path).

    A config whose ``tracking_uri`` is the relative ``sqlite:///mlflow.db`` (the demo's) run
    in ``folder`` as its working directory logs to this copy. ``folder/mlflow.db`` must not exist.
    """
    target = Path(folder) / "mlflow.db"
    if target.exists():
        raise FileExistsError(target)
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


def spark_report_data(spark: Any, *, pipeline: str, quarantine_table: str, metrics_table: str | None,
                      target_table: str | None = None, **kw: Any) -> Any:
    """The report's data read on Spark (:func:`quarantine.ops.reads.report_data` over a
    :class:`~quarantine.ops.spark_reads.SparkEngine`), its views dropped after; ``target_table``:
    the target whose rows it counts (None: not counted)."""
    from quarantine.ops.reads import Reads, report_data
    from quarantine.ops.spark_reads import SparkEngine

    engine = SparkEngine(spark)
    tables = {"quarantine": quarantine_table, "metrics": metrics_table, "target": target_table}
    try:
        return report_data(Reads(engine, tables), pipeline, **kw)
    finally:
        engine.close()


def email_orders_config(d: Any, pipeline: str, *, required: Sequence[str] = ("order_id",),
                        **errors: Any) -> dict[str, Any]:
    """A decode + json pipeline of orders carrying an e-mail address (``order_id``, ``amount``, ``email``)
    over ``d/source`` (Delta) into ``d/target`` and ``d/quarantine``, stack traces kept; ``errors.tolerance:
    all`` and ``errors`` beside it. The personal-data tests' (tests/integration/test_personal_data.py,
    test_forget.py)."""
    return {
        "pipeline": pipeline,
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine"),
                   "deadletterqueue.context.stacktrace.enable": True, **errors},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {
                "schema": "order_id STRING, amount DOUBLE, email STRING", "required": list(required)}},
        ],
    }


def uncompressed_parquet(spark: Any) -> AbstractContextManager[None]:
    """Parquet written without compression inside the block (data files, checkpoints, change data): a
    byte that is there is there as written, so :func:`files_holding` finds a value wherever it is
    (snappy may keep a repeated text as a back-reference). The session's setting is put back after."""
    from quarantine.spark.session import session_setting

    return session_setting(spark, "spark.sql.parquet.compression.codec", "uncompressed")


def files_holding(folder: Path, wanted: Sequence[bytes]) -> dict[str, list[bytes]]:
    """Every file under ``folder``, read byte for byte, that holds one of ``wanted``, with what it holds
    (the tables written under :func:`uncompressed_parquet`)."""
    found: dict[str, list[bytes]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = [w for w in wanted if w in data]
        if hits:
            found[str(path.relative_to(folder))] = hits
    return found
