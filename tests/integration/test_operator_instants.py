"""Every operator command reads every instant a table can hold, and its JSON names the zone (issue 52, F).

A quarantined record stamped 9999-12-31T12:00:00Z (Kafka's timestamp is the producer's
to set) failed ``quarantine inspect`` with ``ValueError: year 10000 is out of range`` in a
process east of UTC: a collected TIMESTAMP came back as the process's local wall clock.
The same conversion made ``inspect --json`` print an instant without its offset. The
process here is at UTC+14 (``Pacific/Kiritimati``); Spark's session stays at UTC.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from tests.helpers import kafka_rows, orders_config
from tests.support.crash import write_conf

LAST = dt.datetime(9999, 12, 31, 12, 0, tzinfo=dt.UTC)
STAMPED = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def kiritimati(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's local zone at UTC+14, restored after."""
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _conf(spark: Any, d: Path) -> Path:
    rows = kafka_rows([b"\xff", b"{"])
    rows[0] = (*rows[0][:5], LAST, *rows[0][6:])
    rows[1] = (*rows[1][:5], STAMPED, *rows[1][6:])
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(d / "source"))
    raw = orders_config(d)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    return write_conf(raw, d / "p.yml")


def _json(capsys: Any, args: list[str]) -> Any:
    capsys.readouterr()
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _instants(doc: Any) -> list[str]:
    """Every string in ``doc`` that reads as a date and time."""
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in _instants(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in _instants(v)]
    if isinstance(doc, str) and len(doc) >= 19 and doc[4] == "-" and doc[10] == "T":
        return [doc]
    return []


def test_operator_commands_read_year_9999_and_their_json_carries_the_offset(
    spark: Any, table_dir: Path, capsys: Any, kiritimati: None
) -> None:
    conf = str(_conf(spark, table_dir))
    capsys.readouterr()
    assert main(["inspect", "--conf", conf, "--since", "1h"]) == 0
    assert "9999" not in capsys.readouterr().err
    records = _json(capsys, ["inspect", "--conf", conf, "--json"])
    stamps = {r["offset"]: r["timestamp"] for r in records}
    assert stamps == {0: "9999-12-31T12:00:00+00:00", 1: "2026-11-01T12:00:00+00:00"}
    documents = [
        records,
        _json(capsys, ["stats", "--conf", conf, "--json"]),
        _json(capsys, ["sql", "open_records", "--conf", conf, "--json"]),
        _json(capsys, ["sql", "stuck_records", "--conf", conf, "--json"]),
    ]
    instants = [s for d in documents for s in _instants(d)]
    assert instants and all(dt.datetime.fromisoformat(s).utcoffset() == dt.timedelta(0) for s in instants), instants
    page = str(table_dir / "r.html")
    for args in (["stats", "--conf", conf], ["sql", "open_records", "--conf", conf],
                 ["replay", "--conf", conf, "--dry-run"], ["report", "--conf", conf, "--out", page]):
        assert main(args) == 0, args
