"""Soak test: SIGKILL the streaming pipeline many times over a real broker; check exactly-once.

    .venv/bin/python scripts/soak_kafka.py --kills 20 [--records 300000] [--seed 1]
    .venv/bin/python scripts/soak_kafka.py --records 20000 --max-offsets 1000 --kills 3 \\
        --restart-broker-every 60 --mlflow-outage-s 120 --metrics-conflict

Starts its own broker (loopback, temp dir), produces order events (1% poison)
to 2 topics x 2 partitions, runs ``quarantine run`` with a processing-time
trigger and kills it (SIGKILL to the whole driver, Python + JVM) at random
points while a micro-batch is in flight, ``--kills`` times, restarting each
time; then drains with an available-now run and prints the ledger: records,
kills, duplicates, lost, byte mismatches, wall time. Exit 0 only when exactly once.
Not part of CI (it takes tens of minutes on 2 cores).

Production faults, on top of the kills, while the stream runs (run from the
repository root: the MLflow server comes from ``tests/e2e/mlflow_fixtures.py``):

* ``--restart-broker-every S`` — every S seconds the broker is restarted on the
  same ports and data (alternately a clean stop and a SIGKILL). A stream that
  fails because of it is restarted, as a job's retry policy would
  (``--max-self-exits``), and each such exit is reported.
* ``--mlflow-outage-s S`` — the pipeline tracks to a real ``mlflow server``;
  it is SIGKILLed ``--mlflow-outage-after`` seconds into the kill phase and
  started again S seconds later (same store, same port).
* ``--metrics-conflict`` — the pipeline writes a metrics table, and another
  process (its own Spark driver) commits to that table in a loop: a janitor's
  append-then-DELETE, an ``OPTIMIZE`` and a table-property change (which
  conflicts with every concurrent commit). The pipeline log's "not written"
  warnings and the metrics rows that landed are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script: the repository root (tests.support, tests.e2e) is importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quarantine.schema import METRICS_SCHEMA
from quarantine.spark.session import get_spark
from tests.support import (
    KafkaBroker,
    create_topics,
    kafka_pipeline_conf,
    ledger,
    order_records,
    produce,
)
from tests.support.crash import run_to_completion, run_with_kills, write_conf

SPARK_CONF = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}

PIPELINE = "orders_soak"
#: The conflicting writer's own rows in the metrics table (deleted again by it).
JANITOR = "soak-metrics-janitor"


class Fault:
    """A production fault injected from a background thread while the stream runs.

    ``action(n)`` is called every ``every_s`` seconds (after a first ``after_s``)
    until :meth:`stop`; each call's outcome is kept in :attr:`events`.
    """

    def __init__(self, name: str, action: Callable[[int], str], *, after_s: float, every_s: float) -> None:
        self.name = name
        self.action = action
        self.after_s = after_s
        self.every_s = every_s
        self.events: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _loop(self) -> None:
        wait, n = self.after_s, 0
        while not self._stop.wait(wait):
            t = time.monotonic() - self._t0
            try:
                self.events.append(f"t={t:.0f}s {self.action(n)}")
            except Exception as exc:  # a fault that could not be injected is reported, not fatal
                self.events.append(f"t={t:.0f}s {self.name} #{n} failed: {type(exc).__name__}: {exc}")
            n += 1
            if self.every_s <= 0:
                return
            wait = self.every_s

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def broker_restarts(broker: KafkaBroker, every_s: float) -> Fault:
    """Restart the broker every ``every_s`` s, alternately clean (SIGTERM) and crashed (SIGKILL)."""

    def restart(n: int) -> str:
        hard = n % 2 == 1
        t0 = time.monotonic()
        broker.restart(hard=hard, timeout_s=120)
        return f"broker {'killed' if hard else 'stopped'} and restarted, down {time.monotonic() - t0:.1f}s"

    return Fault("broker-restart", restart, after_s=every_s, every_s=every_s)


def mlflow_outage(server: Any, after_s: float, outage_s: float) -> Fault:
    """SIGKILL the MLflow server ``after_s`` s in; start it again ``outage_s`` s later."""

    def outage(n: int) -> str:
        server.kill()
        time.sleep(outage_s)
        server.start()
        return f"mlflow server down for {outage_s:.0f}s, back on {server.url}"

    return Fault("mlflow-outage", outage, after_s=after_s, every_s=0)


def start_metrics_conflict(table: Path, stop_file: Path, log: Path) -> subprocess.Popen[bytes]:
    """The conflicting metrics-table writer: this script's ``--metrics-conflict-worker`` mode."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, __file__, "--metrics-conflict-worker", str(table), str(stop_file)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )


#: The conflicts a commit racing the pipeline's may meet; any other failure of the
#: worker's own commits is a broken fault, and fails the soak.
CONFLICTS = ("MetadataChanged", "ConcurrentAppend", "ConcurrentDelete", "ProtocolChanged")


def janitor_row(i: int) -> tuple[Any, ...]:
    """One row of :data:`~quarantine.schema.METRICS_SCHEMA` as a janitor appends it, built from
    the schema's field names (a column added to the schema cannot leave the tuple short)."""
    values = {"pipeline": JANITOR, "run_id": "janitor", "batch_id": i, "metric": "records-in",
              "value": 1.0, "run_kind": "run"}
    return tuple(values.get(f.name) for f in METRICS_SCHEMA.fields)


def broken_faults(result: dict[str, Any]) -> dict[str, int]:
    """The worker's own failures that are not commit conflicts (``own_failures`` by name)."""
    return {k: n for k, n in result.get("own_failures", {}).items() if k not in CONFLICTS}


def metrics_conflict_worker(table: str, stop_file: Path) -> int:
    """Commit to the metrics table in a loop until ``stop_file`` exists; print what happened.

    Each commit is one a real deployment makes next to a running pipeline: a janitor
    appending and deleting its own rows, ``OPTIMIZE``, and a table-property change
    (metadata: every commit racing it conflicts). The worker's own conflicts are counted.
    """
    spark = get_spark("soak-metrics-conflict", SPARK_CONF)
    while not stop_file.exists():  # the pipeline creates the table on its first run
        with contextlib.suppress(Exception):
            spark.read.format("delta").load(table).schema  # noqa: B018 (probe)
            break
        time.sleep(1)
    commits: dict[str, int] = {}
    failures: dict[str, int] = {}
    i = 0
    while not stop_file.exists():
        kind = ("tblproperties", "janitor", "optimize")[i % 3]
        try:
            if kind == "tblproperties":
                spark.sql(
                    f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('quarantine.soak.tick' = '{i}')"
                )
            elif kind == "janitor":
                df = spark.createDataFrame([janitor_row(i)], METRICS_SCHEMA)
                df.write.format("delta").mode("append").save(table)
                spark.sql(f"DELETE FROM delta.`{table}` WHERE pipeline = '{JANITOR}'")
            else:
                spark.sql(f"OPTIMIZE delta.`{table}`")
            commits[kind] = commits.get(kind, 0) + 1
        except Exception as exc:
            name = type(exc).__name__
            for marker in CONFLICTS:
                if marker in str(exc):
                    name = marker
            failures[name] = failures.get(name, 0) + 1
        i += 1
        time.sleep(0.5)
    print("METRICS_CONFLICT " + json.dumps({"commits": commits, "own_failures": failures}))
    spark.stop()
    return 0


def _start_mlflow(work: Path) -> Any:
    from tests.e2e.mlflow_fixtures import MlflowServer, free_port

    root = work / "mlflow"
    (root / "art").mkdir(parents=True, exist_ok=True)
    server = MlflowServer(root, free_port())
    server.start()
    return server


def _metrics_summary(spark: Any, table: Path, log: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(str(table)).where(F.col("pipeline") == PIPELINE)
    batches = df.select("run_id", "batch_id").distinct().count()
    text = log.read_text(errors="replace") if log.exists() else ""
    return {
        "metrics_batches_recorded": batches,
        "metrics_appends_not_written": text.count("not written:"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--max-offsets", type=int, default=10_000, help="max.offsets.per.trigger")
    ap.add_argument("--max-delay", type=float, default=5.0, help="kill within this many s of a batch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=None, help="keep tables/logs here (default: a temp dir)")
    ap.add_argument("--stall-timeout", type=float, default=300.0,
                    help="fail when the stream plans or commits no batch for this many s")
    ap.add_argument("--restart-broker-every", type=float, default=0.0, metavar="S",
                    help="restart the broker every S seconds of the kill phase (0: never)")
    ap.add_argument("--max-self-exits", type=int, default=10,
                    help="restarts allowed when the stream fails by itself during broker restarts")
    ap.add_argument("--mlflow-outage-s", type=float, default=0.0, metavar="S",
                    help="track to a real mlflow server and take it down for S seconds (0: no MLflow)")
    ap.add_argument("--mlflow-outage-after", type=float, default=30.0, metavar="S",
                    help="the outage starts S seconds into the kill phase")
    ap.add_argument("--metrics-conflict", action="store_true",
                    help="write a metrics table and run a conflicting writer against it")
    ap.add_argument("--metrics-conflict-worker", nargs=2, metavar=("TABLE", "STOP_FILE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.metrics_conflict_worker:
        return metrics_conflict_worker(args.metrics_conflict_worker[0], Path(args.metrics_conflict_worker[1]))

    work = Path(args.workdir or tempfile.mkdtemp(prefix="quarantine-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    broker = KafkaBroker(work / "kafka")
    broker.start()
    mlflow_server = _start_mlflow(work) if args.mlflow_outage_s > 0 else None
    faults: list[Fault] = []
    conflict: subprocess.Popen[bytes] | None = None
    stop_file = work / "metrics-conflict.stop"
    conflict_log = work / "metrics-conflict.log"
    try:
        topics = ["soak-orders", "soak-payments"]
        create_topics(broker.bootstrap, dict.fromkeys(topics, 2))
        produced = produce(broker.bootstrap, order_records(topics, 2, args.records, seed=args.seed))
        stream = kafka_pipeline_conf(
            broker.bootstrap, work, topics=topics, pipeline=PIPELINE,
            processing_time="1 second", max_offsets_per_trigger=args.max_offsets,
            spark_conf=SPARK_CONF,
        )
        if mlflow_server is not None:
            stream["mlflow"] = {
                "enabled": True, "tracking_uri": mlflow_server.url, "experiment": "soak",
                "http_timeout_s": 2,
            }
        if args.metrics_conflict:
            stream["metrics"] = {"table": str(work / "metrics")}
        stream_yml = write_conf(stream, work / "stream.yml")
        final_yml = write_conf({**stream, "trigger": "available_now"}, work / "final.yml")
        log = work / "pipeline.log"
        if args.restart_broker_every > 0:
            faults.append(broker_restarts(broker, args.restart_broker_every))
        if mlflow_server is not None:
            faults.append(mlflow_outage(mlflow_server, args.mlflow_outage_after, args.mlflow_outage_s))
        if args.metrics_conflict:
            conflict = start_metrics_conflict(work / "metrics", stop_file, conflict_log)
        for f in faults:
            f.start()
        try:
            crashes = run_with_kills(
                stream_yml, work / "checkpoint", kills=args.kills, log=log,
                rng=random.Random(args.seed), max_delay_s=args.max_delay,
                stall_timeout_s=args.stall_timeout,
                max_self_exits=args.max_self_exits if args.restart_broker_every > 0 else 0,
            )
        finally:
            for f in faults:
                f.stop()  # an MLflow outage in progress ends (server back) before the drain
                print(f"{f.name}: {json.dumps(f.events)}", file=sys.stderr)
            if broker.pid is None:
                broker.start()
        final_s = run_to_completion(final_yml, log, timeout_s=1800)
        if conflict is not None:
            stop_file.touch()
            conflict.wait(300)
        spark = get_spark("quarantine-soak-check", SPARK_CONF)
        book = ledger(spark, produced, target=str(work / "target"),
                      quarantine=str(work / "quarantine"), pipeline=PIPELINE)
        metrics = _metrics_summary(spark, work / "metrics", log) if args.metrics_conflict else {}
        spark.stop()
    finally:
        if conflict is not None and conflict.poll() is None:
            stop_file.touch()
            with contextlib.suppress(subprocess.TimeoutExpired):
                conflict.wait(120)
            if conflict.poll() is None:
                conflict.kill()
        if mlflow_server is not None:
            mlflow_server.kill()
        broker.stop()
    figures: dict[str, Any] = {
        "records": book.produced,
        "poison_in_quarantine": book.in_quarantine,
        "in_target": book.in_target,
        "kills": crashes.kills,
        "kill_points(batch,delay_s)": crashes.kill_points,
        "duplicates": len(book.duplicates),
        "lost": len(book.lost),
        "unexpected": len(book.unexpected),
        "bytes_mismatch": len(book.bytes_mismatch),
        "kill_phase_s": round(crashes.wall_s, 1),
        "final_run_s": round(final_s, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "workdir": str(work),
    }
    if faults or conflict is not None:
        figures["faults"] = {f.name: f.events for f in faults}
        figures["stream_self_exits(code)"] = [code for code, _ in crashes.self_exits]
        figures["stream_self_exit_tails"] = [tail.splitlines()[-3:] for _, tail in crashes.self_exits]
    if conflict is not None:
        lines = conflict_log.read_text(errors="replace").splitlines() if conflict_log.exists() else []
        result = next((ln for ln in reversed(lines) if ln.startswith("METRICS_CONFLICT ")), None)
        figures["metrics_conflict_writer"] = (
            json.loads(result[len("METRICS_CONFLICT "):]) if result else f"no result (exit {conflict.returncode})"
        )
        figures.update(metrics)
    print(json.dumps(figures, indent=2))
    result = figures.get("metrics_conflict_writer")
    broken = {} if conflict is None else broken_faults(result) if isinstance(result, dict) else {"no result": 1}
    if broken:  # a fault that never happened proves nothing: say so, and fail
        print(f"the metrics-conflict fault was not injected as planned: {broken}", file=sys.stderr)
    return 0 if book.exactly_once and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
