"""quarantine vs databricks-labs-dqx: the same row checks, valid and invalid rows to two Delta tables.

Both arms read the same Kafka-shaped source (10% poison by default) and apply
the same row checks to the parsed order: ``order_id`` not null, ``amount`` in
[0, 10000], ``quantity`` in [1, 1000], ``currency`` in {EUR, USD, GBP}, ``sku``
matching ``SKU-[0-9]{4}``.

* **dqx** — decode + ``from_json`` in plain PySpark (dqx checks columns, it does
  not parse), then ``DQEngineCore.apply_checks_by_metadata_and_split`` and the
  two writes dqx's own ``save_results_in_table`` does: valid rows to one Delta
  table, invalid rows (with ``_errors``/``_warnings``) to another.
* **quarantine** — a pipeline with ``decode_utf8`` → ``json`` → ``checks``
  stages carrying the same rules: good rows to the target table, failed rows
  MERGEd into the quarantine table (raw bytes, error, history).

dqx's engine wants a Databricks ``WorkspaceClient``; it only uses it to check
connectivity and to send telemetry (``clusters.select_spark_version``).
:class:`OfflineWorkspaceClient` is a stand-in that answers those calls locally
and counts them; a Python audit hook records every outbound socket connection
and DNS lookup during the dqx arm, and the benchmark fails if any went to a
non-loopback address (Spark's own py4j traffic is loopback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from benchmarks import Row, add_smoke, bench_spark, drop_dir, ensure_source, fresh_dir, markdown_table, median, timed
from quarantine.config import parse_config
from quarantine.demo.orders import ORDER_SCHEMA_DDL
from quarantine.pipeline import Pipeline

__all__ = ["DQX_CHECKS", "QUARANTINE_RULES", "NetworkGuard", "OfflineWorkspaceClient", "main", "run"]

#: Goal of issue 2: dqx time / quarantine time.
GOAL = 3.0

#: The checks, in dqx's metadata form.
DQX_CHECKS: list[dict[str, Any]] = [
    {"criticality": "error", "check": {"function": "is_not_null", "arguments": {"column": "order_id"}}},
    {"criticality": "error",
     "check": {"function": "is_in_range", "arguments": {"column": "amount", "min_limit": 0, "max_limit": 10000}}},
    {"criticality": "error",
     "check": {"function": "is_in_range", "arguments": {"column": "quantity", "min_limit": 1, "max_limit": 1000}}},
    {"criticality": "error",
     "check": {"function": "is_in_list", "arguments": {"column": "currency", "allowed": ["'EUR'", "'USD'", "'GBP'"]}}},
    {"criticality": "error",
     "check": {"function": "regex_match", "arguments": {"column": "sku", "regex": "^SKU-[0-9]{4}$"}}},
]

#: The same checks as rules of quarantine's ``checks`` stage.
QUARANTINE_RULES: list[dict[str, Any]] = [
    {"column": "order_id", "check": "not_null"},
    {"column": "amount", "check": "range", "min": 0, "max": 10000},
    {"column": "quantity", "check": "range", "min": 1, "max": 1000},
    {"column": "currency", "check": "in_set", "values": ["EUR", "USD", "GBP"]},
    {"column": "sku", "check": "regex", "pattern": "SKU-[0-9]{4}"},
]


# --------------------------------------------------------------------------- offline dqx


class _OfflineConfig:
    """The parts of ``databricks.sdk.core.Config`` dqx touches: product info, copy, user agent."""

    def __init__(self) -> None:
        self._product_info: tuple[str, str] | None = None
        self.retry_timeout_seconds = 0
        self.http_timeout_seconds = 0

    def copy(self) -> _OfflineConfig:
        return self

    def with_user_agent_extra(self, key: str, value: str) -> _OfflineConfig:
        return self


class _OfflineClusters:
    def select_spark_version(self) -> str:
        OfflineWorkspaceClient.calls.append("clusters.select_spark_version")
        return "offline"


class OfflineWorkspaceClient:
    """A stand-in for ``databricks.sdk.WorkspaceClient`` that never leaves the process.

    dqx's ``DQEngineCore`` uses its client only for a connectivity check and for
    telemetry; both call ``clusters.select_spark_version()``, answered here.
    Every call is appended to :attr:`calls` (shared by all instances, because
    dqx's telemetry re-creates the client with ``type(ws)(config=...)``).
    """

    calls: ClassVar[list[str]] = []

    def __init__(self, config: _OfflineConfig | None = None) -> None:
        self.config = config or _OfflineConfig()
        self.clusters = _OfflineClusters()


class NetworkGuard:
    """Records outbound connections and DNS lookups to non-loopback hosts while active.

    Uses a :func:`sys.addaudithook` hook (``socket.connect``, ``socket.getaddrinfo``);
    hooks cannot be removed, so one guard is installed per process and toggled.
    """

    _installed: ClassVar[NetworkGuard | None] = None

    def __init__(self) -> None:
        self.active = False
        self.outbound: list[str] = []

    @classmethod
    def get(cls) -> NetworkGuard:
        if cls._installed is None:
            guard = cls()
            sys.addaudithook(guard._hook)
            cls._installed = guard
        return cls._installed

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        if event == "socket.connect":
            addr = args[1]
            host = addr[0] if isinstance(addr, tuple) else str(addr)
            if not _loopback(str(host)):
                self.outbound.append(f"connect {addr}")
        elif event == "socket.getaddrinfo":
            host = args[0]
            if host is not None and not _loopback(str(host)):
                self.outbound.append(f"getaddrinfo {host}")


def _loopback(host: str) -> bool:
    return host in {"localhost", "127.0.0.1", "::1", ""} or host.startswith("127.") or host.startswith("/")


# --------------------------------------------------------------------------- the arms


def parsed_orders(df: DataFrame) -> DataFrame:
    """Decode + parse in plain PySpark (the dqx arm's input: one column per order field)."""
    schema = cast(StructType, StructType.fromDDL(ORDER_SCHEMA_DDL))
    return df.select(
        F.from_json(F.col("value").cast("string"), schema).alias("o"),
        "topic", "partition", "offset", "timestamp",
    ).select("o.*", "topic", "partition", "offset", "timestamp")


def run_dqx(spark: SparkSession, source: str, out: Path) -> None:
    """The dqx arm: check, split, write ``out/valid`` and ``out/quarantine``."""
    from databricks.labs.dqx.engine import DQEngineCore
    from databricks.sdk import WorkspaceClient

    engine = DQEngineCore(cast(WorkspaceClient, OfflineWorkspaceClient()), spark)
    df = spark.read.format("delta").load(source)
    good, bad, *_ = engine.apply_checks_by_metadata_and_split(parsed_orders(df), DQX_CHECKS)
    good.write.format("delta").mode("append").save(str(out / "valid"))
    bad.write.format("delta").mode("append").save(str(out / "quarantine"))


def quarantine_config(source: str, out: Path) -> Any:
    """decode → parse → checks with :data:`QUARANTINE_RULES`, tolerance all."""
    return parse_config(
        {
            "pipeline": "bench_dqx",
            "source": {"format": "delta", "path": source},
            "target": {"table": str(out / "valid")},
            "errors": {"tolerance": "all", "deadletterqueue.table.name": str(out / "quarantine")},
            "stages": [
                {"name": "decode", "type": "decode_utf8"},
                {"name": "parse_order", "type": "json", "options": {"schema": ORDER_SCHEMA_DDL}},
                {"name": "check_order", "type": "checks", "options": {"rules": QUARANTINE_RULES}},
            ],
        }
    )


def run_quarantine(spark: SparkSession, source: str, out: Path) -> None:
    """The quarantine arm (``listeners=[]``)."""
    Pipeline.from_config(quarantine_config(source, out), spark, listeners=[]).run()


def _counts(spark: SparkSession, out: Path) -> tuple[int, int]:
    read = spark.read.format("delta").load
    return read(str(out / "valid")).count(), read(str(out / "quarantine")).count()


def run(
    records: int = 1_000_000,
    repeat: int = 3,
    *,
    poison_rate: float = 0.10,
    spark: SparkSession | None = None,
    smoke: bool = False,
) -> list[Row]:
    """Measure dqx vs quarantine; one row (ratio = dqx time / quarantine time).

    ``smoke``: the warm-up (and its check that both arms split alike) on the measured source,
    not on a 20k-record one of its own.

    Raises:
        RuntimeError: the dqx arm attempted a non-loopback network connection.
    """
    spark = spark or bench_spark("bench-dqx")
    source = ensure_source(spark, records, poison_rate)
    guard = NetworkGuard.get()

    def dqx_arm(out: Path) -> None:
        guard.active = True
        try:
            run_dqx(spark, source, out)
        finally:
            guard.active = False

    arms: dict[str, Callable[[Path], None]] = {
        "dqx": dqx_arm,
        "quarantine": lambda out: run_quarantine(spark, source, out),
    }
    # warm-up (JIT, Delta, dqx imports) and a sanity check: both arms split the same way
    warm = source if smoke else ensure_source(spark, 20_000, poison_rate)
    counts: dict[str, tuple[int, int]] = {}
    warm_arms: dict[str, Callable[[Path], None]] = {
        "dqx": lambda o: run_dqx(spark, warm, o),
        "quarantine": lambda o: run_quarantine(spark, warm, o),
    }
    for name, fn in warm_arms.items():
        out = fresh_dir(f"warm-{name}")
        guard.active = name == "dqx"
        try:
            fn(out)
        finally:
            guard.active = False
        counts[name] = _counts(spark, out)
        drop_dir(out)
    print(f"dqx: warm-up split (valid, invalid) dqx={counts['dqx']} quarantine={counts['quarantine']}",
          file=sys.stderr)

    samples: dict[str, list[float]] = {a: [] for a in arms}
    print(f"dqx: {records:,} records, {poison_rate:.0%} poison, {repeat} repeats", file=sys.stderr)
    for k in range(repeat):
        for name in (list(arms) if k % 2 == 0 else list(reversed(arms))):
            out = fresh_dir(name)
            try:
                samples[name].append(timed(partial(arms[name], out)))
            finally:
                drop_dir(out)
            print(f"  [{name}] repeat {k + 1}/{repeat}: {samples[name][-1]:.2f}s", file=sys.stderr, flush=True)
    if guard.outbound:
        raise RuntimeError(f"dqx arm attempted network access: {sorted(set(guard.outbound))}")
    print(f"  dqx offline: stand-in client calls {len(OfflineWorkspaceClient.calls)}, "
          "non-loopback connections 0", file=sys.stderr)
    dqx_s, q_s = median(samples["dqx"]), median(samples["quarantine"])
    return [
        Row(
            bench="dqx",
            case=f"{records:,} rec, {poison_rate:.0%} poison; ratio = dqx / quarantine",
            baseline_s=q_s, subject_s=dqx_s, ratio=dqx_s / q_s,
            goal=f">= {GOAL:.1f}x", met=dqx_s / q_s >= GOAL, samples=samples,
        )
    ]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """``python -m benchmarks.bench_dqx [--records N] [--repeat K] [--smoke]``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    add_smoke(ap)
    args = ap.parse_args(argv)
    rows = run(args.records, max(args.repeat, 1), smoke=args.smoke)
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    main()
