"""Replay and discard, finished (issue 13, item 3): runs of their own kind, dry runs, ``--where`` checked first.

Every test fills its tables with a real pipeline run over a Kafka-shaped Delta source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.replay import replay
from tests.helpers import kafka_df

REPO = Path(__file__).resolve().parents[2]
SCHEMA = ("order_id STRING, customer_email STRING, amount DOUBLE, currency STRING, quantity INT, sku STRING, "
          "status STRING, created_at STRING")


def _order(i: int, amount: float) -> bytes:
    return json.dumps({
        "order_id": f"ord-{i:06d}", "customer_email": "a@example.com", "amount": amount, "currency": "EUR",
        "quantity": 1, "sku": "SKU-12345", "status": "paid", "created_at": "2026-01-01 00:00:00",
    }).encode()


def _expect_config(d: Path, max_amount: float, **extra: Any) -> dict[str, Any]:
    """The demo's stages (JSON, a range check, the orders GX suite with warn breaches) over ``d``."""
    return {
        "pipeline": "replay_runs",
        "source": {"format": "delta", "path": str(d / "source")},
        "target": {"table": str(d / "target")},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(d / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json", "options": {"schema": SCHEMA}},
            {"name": "check_order", "type": "checks",
             "options": {"rules": [{"column": "amount", "check": "range", "min": 0, "max": max_amount}]}},
            {"name": "expect_order", "type": "expectation",
             "options": {"suite": str(REPO / "conf" / "expectations" / "orders.json"),
                         "on_breach": {"default": "warn"}, "validate_every": 1}},
        ],
        **extra,
    }


def test_a_replay_reports_no_expectation_breach_that_did_not_happen(spark: Any, table_dir: Path) -> None:
    """The suite's batch-level expectations (row count >= 1, mean amount <= 1000) are about source
    batches; a replay's selection is not one: 3 large orders replayed, passing or failing again,
    breach nothing."""
    values = [_order(i, 10.0 + i) for i in range(20)] + [_order(100 + i, 5000.0) for i in range(3)]
    kafka_df(spark, values).write.format("delta").save(str(table_dir / "source"))
    first = Pipeline.from_config(parse_config(_expect_config(table_dir, 1000)), spark, listeners=[]).run()
    assert first.records_quarantined == 3 and not [b for x in first.batches for b in x.breaches]

    again = replay(Pipeline.from_config(parse_config(_expect_config(table_dir, 1000)), spark, listeners=[]))
    assert (again.selected, again.still_failing) == (3, 3)
    assert again.report.breaches == () and again.report.metrics.get("tolerance-breaches", 0.0) == 0.0

    fixed = replay(Pipeline.from_config(parse_config(_expect_config(table_dir, 100_000)), spark, listeners=[]))
    assert (fixed.selected, fixed.replayed) == (3, 3)
    assert fixed.report.breaches == () and fixed.report.metrics.get("tolerance-breaches", 0.0) == 0.0
