"""The Spark Connect relay's contract, on an in-memory stand-in for ``spark.conf``.

The relay between the foreachBatch worker and the client goes through nothing but
``spark.conf.set/get/unset`` (run for real over a Connect server in
``tests/e2e/test_spark_connect.py``); here its bookkeeping: every report once, in
order, its setting removed; a failure raised as itself, or named when it cannot travel.
"""

from __future__ import annotations

import datetime as dt
import pickle
from pathlib import Path
from typing import Any

from quarantine.config import load_config
from quarantine.errors import ConfigError, QuarantineError, ToleranceExceededError
from quarantine.listeners.events import BatchReport, RunInfo
from quarantine.runners.relay import RelayListener, RelayReader, relay_prefix


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self) -> None:
        self.conf = _Conf()


def _report(batch_id: int) -> BatchReport:
    run = RunInfo("p", "r" * 32, "orders", {"a": 1}, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    return BatchReport(run=run, batch_id=batch_id, records_in=10, records_ok=9, records_quarantined=1,
                       quarantined_by_stage={"parse": 1})


def test_reports_arrive_once_in_order_and_their_settings_are_removed() -> None:
    session: Any = _Session()
    prefix = relay_prefix("query-run-1")
    worker, client = RelayListener(session, prefix), RelayReader(session, prefix)
    assert client.reports() == [] and client.error() is None
    worker.on_batch(_report(0))
    worker.on_batch(_report(1))
    assert [r.batch_id for r in client.reports()] == [0, 1]
    worker.on_batch(_report(2))
    (third,) = client.reports()
    assert (third.batch_id, third.records_quarantined, third.quarantined_by_stage) == (2, 1, {"parse": 1})
    assert client.reports() == []
    client.close()
    assert session.conf.values == {}


def test_a_restarted_query_reads_only_its_own_reports() -> None:
    session: Any = _Session()
    RelayListener(session, relay_prefix("start-1")).on_batch(_report(0))
    assert RelayReader(session, relay_prefix("start-2")).reports() == []


def test_a_failure_arrives_as_itself_and_one_that_cannot_travel_is_named() -> None:
    session: Any = _Session()
    prefix = relay_prefix("q")
    worker, client = RelayListener(session, prefix), RelayReader(session, prefix)
    worker.failed(ToleranceExceededError("errors.tolerance=none: 3 record(s) failed in batch 4", count=3))
    got = client.error()
    assert isinstance(got, ToleranceExceededError) and str(got).startswith("errors.tolerance=none: 3 record(s)")

    # ConfigError's constructor takes (key, value, allowed): it does not unpickle from its message
    worker.failed(ConfigError("errors.tolerance", "sometimes", "none or all"))
    got = client.error()
    assert type(got) is QuarantineError and str(got).startswith("ConfigError: config key 'errors.tolerance'")


def test_a_config_pickles_to_an_equal_one(tmp_path: Path) -> None:
    conf = tmp_path / "p.yml"
    conf.write_text(
        "pipeline: p\nsource: {format: kafka, bootstrap.servers: 'b:9092', topics: [t], options: {a: '1'}}\n"
        "target: {table: t, checkpoint: cp}\nerrors: {tolerance: all, deadletterqueue.table.name: q}\n"
        "spark: {conf: {spark.sql.shuffle.partitions: '2'}}\nstages: [{name: d, type: decode_utf8}]\n"
    )
    config = load_config(conf)
    back = pickle.loads(pickle.dumps(config))  # what Spark Connect sends the worker
    assert back == config and dict(back.source.options) == {"a": "1"}


def test_a_stage_that_cannot_be_sent_to_the_connect_server_is_named_before_the_query_starts() -> None:
    import threading
    from dataclasses import dataclass

    import pytest

    from quarantine.runners.foreach_batch import shippable_stages
    from quarantine.stages.decode import DecodeUtf8

    @dataclass(frozen=True, repr=False)
    class Locked(DecodeUtf8):
        lock: Any = None

    fine = [DecodeUtf8("decode")]
    assert shippable_stages(fine) == fine
    with pytest.raises(QuarantineError, match=r"stage 'held' cannot be sent to the Spark Connect server.*pickle"):
        shippable_stages([DecodeUtf8("decode"), Locked("held", lock=threading.Lock())])


def test_a_report_published_as_the_query_ends_reaches_the_client() -> None:
    """The client reads the relay about every second and removes its settings once the query
    has ended. The last batch may commit, and the query end, between a read and that check:
    the settings are removed only after a read that began once the query had ended, so that
    batch's report is still read (it was lost, from the summary and the listeners, when the
    last batch got faster)."""
    from types import SimpleNamespace

    from quarantine.runners.streaming import _relay_to

    session: Any = _Session()
    worker = RelayListener(session, relay_prefix("run-1"))
    worker.on_batch(_report(0))

    class Query:
        runId = "run-1"  # noqa: N815 (StreamingQuery's name)
        running = True

        @property
        def isActive(self) -> bool:  # noqa: N802 (StreamingQuery's name)
            if self.running:  # the last batch commits and the query ends as the client asks
                worker.on_batch(_report(1))
                self.running = False
            return self.running

    handed: list[BatchReport] = []
    runner: Any = SimpleNamespace(run=SimpleNamespace(report_batch=handed.append), reports=[], error=None)
    collect = _relay_to(session, Query(), runner)  # type: ignore[arg-type]
    collect()  # a tick while the query runs
    collect()  # the read after the query ended
    assert [r.batch_id for r in runner.reports] == [0, 1] and handed == runner.reports
    assert session.conf.values == {}  # then the relay's settings are gone
