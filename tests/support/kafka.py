"""A single-node Apache Kafka broker (KRaft) on loopback, and producer helpers.

The broker runs ``kafka.Kafka`` from the jars in ``$QUARANTINE_JAR_CACHE/kafka`` (by
default ``.cache/jars/kafka``; resolved from Maven Central by ``scripts/resolve_jars.sh``,
the repository's dev flow: the library never needs a broker) in a child JVM with a small
heap. One process is both broker and controller (``process.roles=broker,controller``);
the controller quorum listens on a second loopback port. Topics are never
auto-created: tests create them with :func:`create_topics` and an explicit
partition count, so partitioning is deterministic.

Lifecycle contract of :class:`KafkaBroker`:

* :meth:`~KafkaBroker.start` formats the data dir on first use, starts the JVM and
  returns only once an AdminClient can list topics; otherwise it kills the JVM and
  raises :class:`BrokerError` with the tail of the broker's log.
* :meth:`~KafkaBroker.stop` is a clean shutdown (SIGTERM), :meth:`~KafkaBroker.kill`
  a crash (SIGKILL). :meth:`~KafkaBroker.restart` starts again on the same ports and
  the same data dir, so topics and offsets survive.
* A broker started by this process is killed when the process exits, unless it was
  started ``detached`` (the local demo's ``scripts/kafka_broker.sh``).

Command line (used by ``scripts/kafka_broker.sh``)::

    python -m tests.support.kafka start --dir .cache/kafka-demo --port 9092
    python -m tests.support.kafka stop --dir .cache/kafka-demo
    python -m tests.support.kafka status --dir .cache/kafka-demo
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quarantine.errors import QuarantineError

__all__ = [
    "ORDER_SCHEMA_DDL",
    "POISON_KINDS",
    "BrokerError",
    "KafkaBroker",
    "Ledger",
    "ProducedRecord",
    "Record",
    "broker_classpath",
    "broker_jars",
    "create_topics",
    "free_port",
    "kafka_pipeline_conf",
    "ledger",
    "main",
    "order_records",
    "produce",
]

#: Largest record the broker, topics and our producers accept (the 5 MB poison fits).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_REPO = Path(__file__).resolve().parents[2]

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class BrokerError(QuarantineError):
    """The local Kafka broker could not be formatted, started or reached."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def broker_jars() -> list[str]:
    """The broker's runtime jars, from ``$QUARANTINE_JAR_CACHE/kafka`` (default ``.cache/jars/kafka``).

    Runs ``scripts/resolve_jars.sh`` once if the folder holds none.

    Raises:
        BrokerError: the script could not resolve them from Maven Central.
    """
    folder = Path(os.environ.get("QUARANTINE_JAR_CACHE") or _REPO / ".cache" / "jars") / "kafka"
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if jars:
        return jars
    script = _REPO / "scripts" / "resolve_jars.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BrokerError(f"resolving the broker's jars from Maven Central failed ({script}):\n{proc.stderr[-2000:]}")
    return sorted(str(p) for p in folder.glob("*.jar"))


def broker_classpath() -> str:
    """The broker's ``java -cp`` value.

    The resolved tree carries ``slf4j-api`` 1.7 next to log4j's SLF4J 2 binding,
    which silences every broker log line; pyspark ships ``slf4j-api`` 2, so that
    one is used instead.

    Raises:
        BrokerError: the Kafka jars are missing from the cache.
    """
    jars = broker_jars()
    if not any(Path(j).name.startswith("kafka_2.13-") for j in jars):
        raise BrokerError(f"no kafka_2.13-*.jar among the {len(jars)} resolved Kafka jars")
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    slf4j2 = sorted(spark_jars.glob("slf4j-api-2*.jar"))
    if slf4j2:
        jars = [j for j in jars if not Path(j).name.startswith("slf4j-api-1")] + [str(slf4j2[-1])]
    return os.pathsep.join(jars)


def _kafka_uuid() -> str:
    """A cluster id in Kafka's form: 16 random bytes, URL-safe base64, no padding.

    Never starting with "-" (Kafka's ``Uuid.randomUuid`` draws again then too): the
    storage tool's argument parser would take "-t -Xyz…" for a missing value.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass
class KafkaBroker:
    """One local KRaft broker+controller on loopback.

    Attributes:
        data_dir: holds ``server.properties``, the log dirs, ``broker.log`` and ``broker.pid``.
        port: the client (PLAINTEXT) port; 0 picks a free one at first start.
        controller_port: the KRaft controller port; 0 picks a free one at first start.
        heap: the JVM's ``-Xmx``.
        extra_config: extra ``server.properties`` entries (override the defaults).
    """

    data_dir: Path
    port: int = 0
    controller_port: int = 0
    heap: str = "512m"
    extra_config: Mapping[str, str] = field(default_factory=dict)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()

    # ------------------------------------------------------------------ paths and state

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients (``127.0.0.1:<port>``)."""
        if not self.port:
            raise BrokerError("the broker has no port yet: call start() first")
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def pid(self) -> int | None:
        """The JVM's pid if it is running (from this object or the pid file)."""
        if self._proc is not None:
            return self._proc.pid if self._proc.poll() is None else None
        try:
            pid = int(self.pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        return pid

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's log (and its stdout/stderr)."""
        out = []
        for f in (self.log_file, self.data_dir / "broker.out"):
            if f.exists():
                text = f.read_text(encoding="utf-8", errors="replace").splitlines()
                out.append(f"--- {f.name} (last {lines} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(out) or "(no broker log)"

    # ------------------------------------------------------------------ lifecycle

    def _properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "message.max.bytes": str(MAX_MESSAGE_BYTES),
            "replica.fetch.max.bytes": str(MAX_MESSAGE_BYTES),
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.retention.hours": "-1",
        }
        props.update(self.extra_config)
        return props

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        ports = {"port": self.port, "controller_port": self.controller_port}
        (self.data_dir / "ports.json").write_text(json.dumps(ports))
        return conf

    def _load_ports(self) -> None:
        f = self.data_dir / "ports.json"
        if f.exists() and not (self.port and self.controller_port):
            saved = json.loads(f.read_text())
            self.port = self.port or int(saved["port"])
            self.controller_port = self.controller_port or int(saved["controller_port"])
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        if self.port == self.controller_port:
            self.controller_port = free_port()

    def _java(self, main_class: str, *args: str) -> list[str]:
        return [
            "java", f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp", broker_classpath(), main_class, *args,
        ]

    def _format(self, conf: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        cmd = self._java(
            "kafka.tools.StorageTool", "format",
            "-t", _kafka_uuid(), "-c", str(conf), "--standalone",
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            raise BrokerError(
                f"formatting the KRaft storage in {self.data_dir / 'logs'} failed "
                f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            )

    def start(self, *, timeout_s: float = 60.0, detached: bool = False) -> None:
        """Start the broker and wait until it answers an AdminClient.

        Args:
            timeout_s: how long to wait for the broker to answer.
            detached: leave it running after this process exits (the local demo).

        Raises:
            BrokerError: it did not answer within ``timeout_s`` or exited; the
                message carries the tail of its log.
        """
        if self.pid is not None:
            raise BrokerError(f"a broker is already running from {self.data_dir} (pid {self.pid})")
        self._load_ports()
        conf = self._write_config()
        self._format(conf)
        out = (self.data_dir / "broker.out").open("ab")
        self._proc = subprocess.Popen(
            self._java("kafka.Kafka", str(conf)),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        self.pid_file.write_text(f"{self._proc.pid}\n")
        if not detached:
            atexit.register(self._kill_at_exit, self._proc)
        try:
            self.wait_ready(timeout_s)
        except BrokerError:
            self.kill()
            raise

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Block until the broker lists topics via an AdminClient.

        Raises:
            BrokerError: the JVM exited, or no answer within ``timeout_s``.
        """
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            _quiet({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        )
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrokerError(
                    f"the Kafka broker exited with code {self._proc.returncode} while starting "
                    f"on {self.bootstrap}\n{self.log_tail()}"
                )
            try:
                admin.list_topics(timeout=2)
                return
            except Exception as exc:  # KafkaException: not up yet
                last = exc
                time.sleep(0.5)
        raise BrokerError(
            f"the Kafka broker on {self.bootstrap} did not answer within {timeout_s:.0f} s "
            f"(last error: {last})\n{self.log_tail()}"
        )

    def _signal(self, sig: signal.Signals, timeout_s: float) -> None:
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None:
                if self._proc.poll() is not None:
                    break
            else:
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if self._proc is not None:
                self._proc.wait(10)
        self._proc = None
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Shut the broker down cleanly (SIGTERM; SIGKILL after ``timeout_s``). Idempotent."""
        self._signal(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        """Crash the broker (SIGKILL). Idempotent."""
        self._signal(signal.SIGKILL, 10.0)

    def restart(self, *, hard: bool = False, timeout_s: float = 60.0) -> None:
        """Stop (or kill, if ``hard``) and start again on the same ports and data dir."""
        if hard:
            self.kill()
        else:
            self.stop()
        self.start(timeout_s=timeout_s)

    @staticmethod
    def _kill_at_exit(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


# ---------------------------------------------------------------------- topics and records


def _quiet(conf: Mapping[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
    """librdkafka config that logs errors only (no reconnect chatter while a broker restarts)."""
    return {"log_level": 2, **conf}


def create_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    *,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Create topics with the given partition counts (replication factor 1).

    Args:
        bootstrap: ``bootstrap.servers``.
        topics: topic name → number of partitions.
        config: topic configs for every topic (``max.message.bytes`` is raised to
            :data:`MAX_MESSAGE_BYTES` unless given).

    Raises:
        BrokerError: a topic could not be created (an existing topic is an error too).
    """
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    cfg = {"max.message.bytes": str(MAX_MESSAGE_BYTES), **(config or {})}
    admin = AdminClient(_quiet({"bootstrap.servers": bootstrap}))
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=n, replication_factor=1, config=cfg)
         for t, n in topics.items()],
        operation_timeout=timeout_s,
    )
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout_s)
        except Exception as exc:
            raise BrokerError(f"creating topic {name!r} on {bootstrap} failed: {exc}") from exc


def recreate_topic(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 60.0) -> None:
    """Delete ``topic`` and create it again, empty (its offsets start at 0 again).

    Deletion finishes in the background: creating again is retried until the broker
    accepts it (``TOPIC_ALREADY_EXISTS`` while the old one is being deleted).

    Raises:
        BrokerError: the topic could not be deleted or created again within ``timeout_s``.
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_quiet({"bootstrap.servers": bootstrap}))
    try:
        admin.delete_topics([topic], operation_timeout=timeout_s)[topic].result(timeout=timeout_s)
    except Exception as exc:
        raise BrokerError(f"deleting topic {topic!r} on {bootstrap} failed: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            create_topics(bootstrap, {topic: partitions}, timeout_s=timeout_s)
            return
        except BrokerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@dataclass(frozen=True)
class Record:
    """A record to produce. ``headers=None`` sends none (Spark then reads NULL)."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] | None = None


@dataclass(frozen=True)
class ProducedRecord:
    """A record as the broker acknowledged it: its coordinates and exact bytes.

    ``headers`` is None when none were sent (Spark reads NULL then, even for an empty list).
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None


def produce(
    bootstrap: str,
    records: Iterable[Record],
    *,
    timeout_s: float = 120.0,
    config: Mapping[str, str | int] | None = None,
) -> list[ProducedRecord]:
    """Produce records idempotently and return each one with its acknowledged offset.

    Records go to their ``partition`` if set, else the producer's partitioner.

    Raises:
        BrokerError: a record was not acknowledged, or not all were within ``timeout_s``.
    """
    from confluent_kafka import KafkaError, Message, Producer

    conf: dict[str, str | int] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "message.max.bytes": MAX_MESSAGE_BYTES + 1_000_000,
        "queue.buffering.max.messages": 500_000,
        "compression.type": "none",
        **(config or {}),
    }
    producer = Producer(_quiet(conf))
    acked: list[ProducedRecord] = []
    failures: list[str] = []

    def on_delivery(r: Record, err: KafkaError | None, msg: Message) -> None:
        # delivery reports carry no headers: keep what was sent
        if err is not None:
            failures.append(f"{r.topic}: {err}")
            return
        acked.append(
            ProducedRecord(
                topic=r.topic, partition=msg.partition() or 0, offset=msg.offset() or 0,
                key=r.key, value=r.value, headers=r.headers or None,
            )
        )

    sent = 0
    for r in records:
        kwargs: dict[str, object] = {
            "value": r.value, "key": r.key, "on_delivery": functools.partial(on_delivery, r),
        }
        if r.partition is not None:
            kwargs["partition"] = r.partition
        if r.headers is not None:
            kwargs["headers"] = list(r.headers)
        while True:
            try:
                producer.produce(r.topic, **kwargs)  # type: ignore[arg-type]
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout_s)
    if failures or remaining:
        raise BrokerError(
            f"producing to {bootstrap}: expected {sent} acknowledged records, got {len(acked)}; "
            f"{remaining} still queued; first failures: {failures[:3]}"
        )
    return acked


#: Poison kinds :func:`order_records` makes, each caught by a stage of ``conf/local.yml``.
POISON_KINDS: tuple[str, ...] = (
    "invalid_utf8", "truncated_json", "wrong_type", "missing_field", "empty_value",
    "null_value", "negative_amount", "bad_currency", "bad_timestamp", "json_array",
)


def _order_json(i: int, amount: float) -> str:
    # formatted by hand: json.dumps is the bottleneck at a few hundred thousand records
    days, sec = divmod(i, 86_400)
    created = f"2026-01-{1 + days % 28:02d} {sec // 3600:02d}:{sec % 3600 // 60:02d}:{sec % 60:02d}"
    return (
        f'{{"order_id":"ord-{i:07d}","customer_email":"customer{i % 5000}@example.com",'
        f'"amount":{amount},"currency":"{("EUR", "USD", "GBP")[i % 3]}","quantity":{i % 7 + 1},'
        f'"sku":"SKU-{i % 977:04d}","status":"{("created", "paid", "shipped")[i % 3]}",'
        f'"created_at":"{created}"}}'
    )


def _poison(kind: str, text: str) -> bytes | None:
    good: dict[str, object] = json.loads(text)
    if kind == "invalid_utf8":
        return b"\xc3\x28\xff\xfe" + text.encode()
    if kind == "truncated_json":
        return text[:25].encode()
    if kind == "wrong_type":
        return json.dumps({**good, "amount": "abc"}).encode()
    if kind == "missing_field":
        return json.dumps({k: v for k, v in good.items() if k != "order_id"}).encode()
    if kind == "empty_value":
        return b""
    if kind == "null_value":
        return None
    if kind == "negative_amount":
        return json.dumps({**good, "amount": -float(str(good["amount"]))}).encode()
    if kind == "bad_currency":
        return json.dumps({**good, "currency": "XXX"}).encode()
    if kind == "bad_timestamp":
        return json.dumps({**good, "created_at": "2026-13-45 25:61:00"}).encode()
    return f"[{text}]".encode()


def order_records(
    topics: Sequence[str],
    partitions: int,
    count: int,
    *,
    poison_rate: float = 0.01,
    seed: int = 7,
) -> list[Record]:
    """``count`` order events spread round-robin over topics x partitions.

    Deterministic for a seed. A ``poison_rate`` share are poison (the kinds in
    :data:`POISON_KINDS`, in turn). Keys are binary (a customer id plus a 0xFF
    byte); half the records carry a binary ``trace-id`` header, the rest none.
    """
    rng = random.Random(seed)
    out: list[Record] = []
    n_poison = 0
    for i in range(count):
        text = _order_json(i, round(rng.random() * 500 + 1, 2))
        value: bytes | None
        if rng.random() < poison_rate:
            value = _poison(POISON_KINDS[n_poison % len(POISON_KINDS)], text)
            n_poison += 1
        else:
            value = text.encode()
        slot = i % (len(topics) * partitions)
        headers = ((("trace-id", i.to_bytes(8, "big") + b"\xff"),) if i % 2 else None)
        out.append(
            Record(
                topics[slot // partitions], value, key=f"cust-{i % 5000}".encode() + b"\xff",
                partition=slot % partitions, headers=headers,
            )
        )
    return out


# ---------------------------------------------------------------------- pipeline configs

#: The JSON payload of :func:`order_records`.
ORDER_SCHEMA_DDL = (
    "order_id STRING, customer_email STRING, amount DOUBLE, currency STRING, "
    "quantity INT, sku STRING, status STRING, created_at STRING"
)


def kafka_pipeline_conf(
    bootstrap: str,
    workdir: Path | str,
    *,
    topics: Sequence[str] = (),
    topic_pattern: str | None = None,
    pipeline: str = "orders_kafka_test",
    processing_time: str | None = None,
    max_offsets_per_trigger: int | None = None,
    source_options: Mapping[str, str] | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A streaming pipeline config (as YAML would load it) over order events.

    Stages: ``decode_utf8`` then ``json`` (required ``order_id``, ``amount``,
    ``currency``). Target, quarantine and checkpoint live under ``workdir``.
    """
    w = Path(workdir)
    source: dict[str, Any] = {
        "format": "kafka", "bootstrap.servers": bootstrap,
        "starting.offsets": "earliest", "include.headers": True,
    }
    if topics:
        source["topics"] = list(topics)
    else:
        source["topic.pattern"] = topic_pattern
    if max_offsets_per_trigger:
        source["max.offsets.per.trigger"] = max_offsets_per_trigger
    if source_options:
        source["options"] = dict(source_options)
    out: dict[str, Any] = {
        "pipeline": pipeline,
        "source": source,
        "target": {"table": str(w / "target"), "checkpoint": str(w / "checkpoint")},
        "trigger": {"processing_time": processing_time} if processing_time else "available_now",
        "errors": {"tolerance": "all", "deadletterqueue.table.name": str(w / "quarantine")},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse_order", "type": "json", "options": {
                "schema": ORDER_SCHEMA_DDL, "required": ["order_id", "amount", "currency"]}},
        ],
    }
    if spark_conf:
        out["spark"] = {"conf": dict(spark_conf)}
    return out


# ---------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Ledger:
    """What a run's two tables hold, checked against what was produced.

    Attributes:
        produced: records acknowledged by the broker.
        in_target: rows in the target (by source coordinates).
        in_quarantine: rows in the quarantine table for the pipeline.
        duplicates: coordinates present more than once across both tables.
        lost: produced coordinates present in neither table.
        unexpected: coordinates in a table that were never produced.
        bytes_mismatch: quarantined coordinates whose key/value/headers differ
            from what was produced.
    """

    produced: int
    in_target: int
    in_quarantine: int
    duplicates: tuple[tuple[str, int, int], ...]
    lost: tuple[tuple[str, int, int], ...]
    unexpected: tuple[tuple[str, int, int], ...]
    bytes_mismatch: tuple[tuple[str, int, int], ...]

    @property
    def exactly_once(self) -> bool:
        """Every produced record is in exactly one table, byte-exact in quarantine."""
        return not (self.duplicates or self.lost or self.unexpected or self.bytes_mismatch)

    def describe(self) -> str:
        return (
            f"produced={self.produced} target={self.in_target} quarantine={self.in_quarantine} "
            f"duplicates={len(self.duplicates)} lost={len(self.lost)} "
            f"unexpected={len(self.unexpected)} bytes_mismatch={len(self.bytes_mismatch)} "
            f"(first: dup {self.duplicates[:3]} lost {self.lost[:3]} "
            f"bytes {self.bytes_mismatch[:3]})"
        )


def _b(x: object) -> bytes | None:
    return None if x is None else bytes(x)  # type: ignore[call-overload]


def ledger(
    spark: Any,
    produced: Sequence[ProducedRecord],
    *,
    target: str,
    quarantine: str,
    pipeline: str | Sequence[str],
    statuses: Sequence[str] | None = None,
    as_of: Mapping[str, int] | None = None,
) -> Ledger:
    """Compare the target and quarantine Delta tables (paths) with what was produced.

    The target must keep its source coordinates (``_source_topic`` …). Collects
    coordinates to the driver: meant for tests of up to a few million records.

    Args:
        pipeline: the quarantine rows counted are this pipeline's (or these pipelines',
            when several share the tables).
        statuses: count only quarantine rows in these statuses. After a replay, a
            record is in exactly one of the target and the ``open`` rows (its
            ``replayed`` row stays, as the audit trail).
        as_of: a table (its path, as given) read at this Delta version, as a run left
            it before later commands changed it.
    """
    from collections import Counter

    from pyspark.sql import functions as F

    def read(path: str) -> Any:
        reader = spark.read.format("delta")
        if as_of and path in as_of:
            reader = reader.option("versionAsOf", as_of[path])
        return reader.load(path)

    coords = Counter[tuple[str, int, int]]()
    t_rows = (
        read(target)
        .select("_source_topic", "_source_partition", "_source_offset").collect()
        if _delta_exists(spark, target) else []
    )
    pipelines = [pipeline] if isinstance(pipeline, str) else list(pipeline)
    q_df = (
        read(quarantine).where(F.col("pipeline").isin(pipelines))
        if _delta_exists(spark, quarantine) else None
    )
    if q_df is not None and statuses is not None:
        q_df = q_df.where(F.col("status").isin(list(statuses)))
    q_rows = (
        q_df.select("topic", "partition", "offset", "key", "value", "headers").collect()
        if q_df is not None else []
    )
    for r in t_rows:
        coords[(r[0], int(r[1]), int(r[2]))] += 1
    for r in q_rows:
        coords[(r[0], int(r[1]), int(r[2]))] += 1
    by_coord = {(p.topic, p.partition, p.offset): p for p in produced}
    mismatch = []
    for r in q_rows:
        c = (r[0], int(r[1]), int(r[2]))
        p = by_coord.get(c)
        if p is None:
            continue
        headers = (
            tuple((h["key"], _b(h["value"])) for h in r["headers"]) if r["headers"] else None
        )
        if (_b(r["key"]), _b(r["value"]), headers) != (p.key, p.value, p.headers):
            mismatch.append(c)
    return Ledger(
        produced=len(produced),
        in_target=len(t_rows),
        in_quarantine=len(q_rows),
        duplicates=tuple(sorted(c for c, n in coords.items() if n > 1)),
        lost=tuple(sorted(c for c in by_coord if c not in coords)),
        unexpected=tuple(sorted(c for c in coords if c not in by_coord)),
        bytes_mismatch=tuple(sorted(mismatch)),
    )


def _delta_exists(spark: Any, path: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


# ---------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``start | stop | status`` of a detached local broker, and ``produce`` demo orders.

    Used by ``scripts/kafka_broker.sh``; ``produce`` writes :func:`order_records`
    (round-robin over the topic's partitions) to a running broker.
    """
    ap = argparse.ArgumentParser(prog="python -m tests.support.kafka")
    ap.add_argument("action", choices=["start", "stop", "status", "produce"])
    ap.add_argument("--dir", default=".cache/kafka-demo", help="data dir (pid file, logs, config)")
    ap.add_argument("--port", type=int, default=9092, help="client port on 127.0.0.1")
    ap.add_argument("--controller-port", type=int, default=9093)
    ap.add_argument("--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                    help="start: create if missing; produce: the topic (repeatable)")
    ap.add_argument("--records", type=int, default=10_000, help="produce: how many")
    ap.add_argument("--poison-rate", type=float, default=0.04, help="produce: poison share")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    broker = KafkaBroker(Path(args.dir), port=args.port, controller_port=args.controller_port)
    topics = {}
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        topics[name] = int(parts or 1)
    if args.action == "status":
        pid = broker.pid
        print(f"running (pid {pid}) on {broker.bootstrap}" if pid else "not running")
        return 0 if pid else 1
    if args.action == "stop":
        pid = broker.pid
        broker.stop()
        print(f"stopped (pid {pid})" if pid else "not running")
        return 0
    if args.action == "produce":
        from confluent_kafka.admin import AdminClient

        meta = AdminClient(_quiet({"bootstrap.servers": broker.bootstrap})).list_topics(timeout=10)
        names = list(topics) or ["orders"]
        parts = {t: len(meta.topics[t].partitions) for t in names if t in meta.topics}
        missing = [t for t in names if t not in parts]
        if missing:
            print(f"topics {missing} do not exist on {broker.bootstrap}", file=sys.stderr)
            return 1
        n_parts = min(parts.values())
        acked = produce(broker.bootstrap, order_records(
            names, n_parts, args.records, poison_rate=args.poison_rate, seed=args.seed))
        print(f"produced {len(acked):,} order events ({args.poison_rate:.0%} poison) to "
              f"{', '.join(names)} on {broker.bootstrap}")
        return 0
    if broker.pid is not None:
        print(f"already running (pid {broker.pid}) on {broker.bootstrap}")
    else:
        try:
            broker.start(detached=True)
        except BrokerError as exc:
            print(exc, file=sys.stderr)
            return 1
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_quiet({"bootstrap.servers": broker.bootstrap}))
    existing = set(admin.list_topics(timeout=10).topics)
    wanted = {t: n for t, n in topics.items() if t not in existing}
    if wanted:
        create_topics(broker.bootstrap, wanted)
    print(f"started (pid {broker.pid}) on {broker.bootstrap}; data in {broker.data_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
