"""No configured secret ever appears in logs, the quarantine table or the params logged for a run.

A pipeline is configured with a password, a SASL JAAS line and a token, and a
real Python stage raises exceptions whose messages echo them (a typical
"auth failed for …" error). Error-context logging is fully on (messages and
configs included) and stack traces are kept in the quarantine table.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.errors import ToleranceExceededError
from quarantine.runner import Pipeline
from tests.helpers import kafka_df

pytestmark = pytest.mark.integration

PASSWORD = "Tru5tst0re-Pa55"
JAAS_PW = "sasl-Pl41n-S3cret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="svc-orders" password="{JAAS_PW}";'
)
TOKEN = "dapi-7f3e9c1b2a4d"
SECRETS = (PASSWORD, JAAS, JAAS_PW, TOKEN)


def leaky_lookup(value: str) -> str:
    """A user function whose failures echo credentials (as drivers' errors often do)."""
    if value.startswith("bad"):
        raise ConnectionError(
            f"login as svc-orders failed (password={PASSWORD}); sasl.jaas.config={JAAS}; "
            f"retry with token {TOKEN} or {JAAS_PW}"
        )
    return value.upper()


def _raw(d: Path, **errors: Any) -> dict[str, Any]:
    return {
        "pipeline": "orders_secrets",
        "source": {
            "format": "delta",
            "path": str(d / "source"),
            "options": {
                "kafka.ssl.truststore.password": PASSWORD,
                "kafka.sasl.jaas.config": JAAS,
                "kafka.sasl.oauthbearer.token": TOKEN,
            },
        },
        "target": {"table": str(d / "target")},
        "errors": {
            "tolerance": "all",
            "deadletterqueue.table.name": str(d / "quarantine"),
            "deadletterqueue.context.stacktrace.enable": True,
            "log.enable": True,
            "log.include.messages": True,
            "log.include.configs": True,
            **errors,
        },
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {
                "name": "lookup",
                "type": "python",
                "options": {"function": f"{__name__}.leaky_lookup", "returns": "STRING"},
            },
        ],
    }


def _assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"secret {s[:4]}… leaked into {where}"


def test_no_secret_in_logs_quarantine_rows_or_run_params(
    spark: Any, table_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    values = [b"good-1", b"bad-1", b"good-2", b"bad-2"]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    config = parse_config(_raw(table_dir))
    assert set(SECRETS) <= set(config.secrets())
    pipe = Pipeline.from_config(config, spark, listeners=[])

    with caplog.at_level(logging.DEBUG):
        summary = pipe.run()
    assert (summary.records_ok, summary.records_quarantined) == (2, 2)

    # logs: error-context lines were written (with messages and configs) and are clean
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert "error context" in logs and "class=ConnectionError" in logs and "config=" in logs
    _assert_clean(logs, "logs")

    # quarantine rows: the message, the stack trace and the history are clean
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    rows = q.select("message", "stacktrace", "error_history", "error_class").collect()
    assert len(rows) == 2
    for r in rows:
        assert r["error_class"] == "ConnectionError"
        assert "[redacted]" in r["message"] and "svc-orders" in r["message"]
        assert r["stacktrace"] and "ConnectionError" in r["stacktrace"]
        _assert_clean(r["message"], "quarantine.message")
        _assert_clean(r["stacktrace"], "quarantine.stacktrace")
        _assert_clean(json.dumps([e.asDict() for e in r["error_history"]], default=str), "history")

    # run params (what MLflow logs as params): the redacted config
    params = json.dumps(pipe.run_info().config, default=str)
    assert "kafka.sasl.jaas.config" in params and "[redacted]" in params
    _assert_clean(params, "run params")


def test_tolerance_failure_message_carries_no_secret(spark: Any, table_dir: Path) -> None:
    kafka_df(spark, [b"bad-1"]).write.format("delta").save(str(table_dir / "source"))
    pipe = Pipeline.from_config(parse_config(_raw(table_dir, tolerance="none")), spark, listeners=[])
    with pytest.raises(ToleranceExceededError) as info:
        pipe.run()
    _assert_clean(str(info.value), "the tolerance error")
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    (row,) = q.select("message").collect()
    _assert_clean(row["message"], "quarantine.message")


def test_messages_are_redacted_with_stack_traces_off(spark: Any, table_dir: Path) -> None:
    """With stack traces off the runner skips that field's redaction; messages stay clean."""
    kafka_df(spark, [b"good-1", b"bad-1"]).write.format("delta").save(str(table_dir / "source"))
    raw = _raw(table_dir, **{"deadletterqueue.context.stacktrace.enable": False})
    summary = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    assert (summary.records_ok, summary.records_quarantined) == (1, 1)
    q = spark.read.format("delta").load(str(table_dir / "quarantine"))
    (row,) = q.select("message", "stacktrace", "error_history").collect()
    assert row["stacktrace"] is None
    assert "[redacted]" in row["message"] and "svc-orders" in row["message"]
    _assert_clean(row["message"], "quarantine.message")
    _assert_clean(json.dumps([e.asDict() for e in row["error_history"]], default=str), "history")


PAIR_TEXTS = [
    None,
    "",
    "no secret here: amount=12, currency: EUR",
    "login failed (password=hunter2); retry",
    'kafka.ssl.truststore.password = "with spaces inside"',
    "api-key: 'q1 w2'; apiKey=abc&token=xyz,next",
    "PASSWORD=Upper;Secret: s3 AccessKey=AKIA123",
    "pässwört=x und db.password=ünïcödé-wert fertig",
    "jdbc:postgresql://db/x?user=a&password=p%40ss&ssl=true",
    "sasl.jaas.config=org.X required username=\"u\" password=\"p w\";",
    "private_key:\n-----BEGIN",
    "token=",
]


def test_native_pair_masking_matches_the_python_redaction(spark: Any) -> None:
    """Without configured secrets the quarantine path masks natively; same output as Python."""
    from pyspark.sql import functions as F

    from quarantine.redaction import redact_column, redact_text

    df = spark.createDataFrame([(i, t) for i, t in enumerate(PAIR_TEXTS)], "i INT, t STRING")
    plan_col = redact_column(F.col("t"))

    def plan(c: Any) -> str:
        return str(df.select(c)._jdf.queryExecution().analyzed().toString())

    assert "_redacted" not in plan(plan_col) and "regexp_replace" in plan(plan_col)
    assert "_redacted" in plan(redact_column(F.col("t"), ["s3cret"]))  # with secrets: the UDF
    got = {r["i"]: r["m"] for r in df.select("i", plan_col.alias("m")).collect()}
    for i, t in enumerate(PAIR_TEXTS):
        assert got[i] == (None if t is None else redact_text(t)), t
    assert "[redacted]" in got[3] and "hunter2" not in got[3]
