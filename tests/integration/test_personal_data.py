"""A quarantine table kept encrypted (``errors.deadletterqueue.encryption.*``), with real Spark and Delta.

The records carry a distinctive plaintext (an e-mail address) in their value, their key and
a header, and the json stage's message quotes it. Under encryption it is in no file under the
quarantine table's folder (data files, the log, its checkpoints and checksums, the Change
Data Feed), read byte for byte, nor in its hex spellings (the decode stage quotes bytes in
hex); in no output of ``inspect``/``stats``/``sql``/``report`` on either engine without the
key, and in ``inspect``'s with it. Replay opens the rows with the key, refuses in one line
without it, and reads rows written under a key the config keeps as an old one after a rotation.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.columns import ERROR
from quarantine.config import parse_config
from quarantine.errors import ConfigError, KeyUnavailableError
from quarantine.identity import fingerprint
from quarantine.keyring import KeyRing
from quarantine.ops.duck import ENGINE_ENV
from quarantine.ops.reads import answer, replay_selection
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sinks.dlq_topic import dlq_records
from tests.helpers import email_orders_config, files_holding, kafka_rows, logged, uncompressed_parquet
from tests.support.crash import write_conf

N = 100
KEY_1 = "0123456789abcdef0123456789abcdef"
KEY_2 = "fedcba9876543210fedcba98"  # 24 bytes: AES-192
ENCRYPTED = {"deadletterqueue.encryption.key": "env:PD_KEY_1", "deadletterqueue.encryption.key.id": "k1"}


def secret(i: int) -> str:
    return f"zorblax.{i:03d}@example.com"


def needles(i: int) -> list[bytes]:
    """Record ``i``'s plaintext as any file could hold it: its text, and its bytes in hex (either case)."""
    raw = secret(i).encode()
    return [raw, raw.hex().encode(), raw.hex().upper().encode()]


def source_rows(start: int = 0, count: int = N) -> list[tuple[Any, ...]]:
    """``count`` poison records and 20 good ones. Poison ``i``: a text amount quoting ``secret(i)`` (the
    json stage's message quotes it), or no ``order_id`` (fixed by a replay), or bytes that are not UTF-8
    (the decode stage quotes them in hex); ``secret(i)`` is in the key and a header too."""
    values, keys, headers = [], [], []
    for i in range(start, start + count):
        if i % 3 == 0:
            values.append(f'{{"order_id": "o-{i}", "amount": "{secret(i)}", "email": "{secret(i)}"}}'.encode())
        elif i % 3 == 1:
            values.append(f'{{"amount": 2.5, "email": "{secret(i)}"}}'.encode())
        else:
            values.append(b"\xff" + secret(i).encode())
        keys.append(f"customer {secret(i)}".encode())
        headers.append([("email", secret(i).encode()), ("trace", b"t-1")])
    for j in range(20):
        values.append(f'{{"order_id": "g-{start + j}", "amount": 1.0, "email": "good{j}@ok.org"}}'.encode())
        keys.append(b"good")
        headers.append(None)
    return kafka_rows(values, keys=keys, headers=headers, start_offset=start * 2)


def config(d: Path, *, required: tuple[str, ...] = ("order_id",), **errors: Any) -> dict[str, Any]:
    return email_orders_config(d, "private", required=required, **{"log.enable": True, **errors})


@pytest.fixture(scope="module")
def encrypted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Tables a pipeline kept encrypted (written uncompressed: a byte is in a file as written): a run, a
    checkpoint every other commit, a re-run over the same source and a replay that fails again (the
    Change Data Feed holds their updates); the config file."""
    d = tmp_path_factory.mktemp("encrypted")
    raw = config(d, **ENCRYPTED)
    os.environ["PD_KEY_1"] = KEY_1
    try:
        with uncompressed_parquet(spark):
            spark.createDataFrame(source_rows(), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(d / "source"))
            first = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
            q = str(d / "quarantine")
            spark.sql(f"ALTER TABLE delta.`{q}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
            rows_after_first = spark.read.format("delta").load(q).count()
            second = Pipeline.from_config(parse_config(raw), spark, listeners=[]).run(full=True)
            again = replay(Pipeline.from_config(parse_config(raw), spark, listeners=[]))
    finally:
        del os.environ["PD_KEY_1"]
    yield {"dir": d, "raw": raw, "conf": write_conf(raw, d / "private.yml"), "first": first, "second": second,
           "replay": again, "rows_after_first": rows_after_first}


def test_an_encrypted_quarantine_table_holds_no_plaintext_in_any_file(spark: Any, encrypted: dict[str, Any]) -> None:
    d: Path = encrypted["dir"]
    assert encrypted["first"].records_quarantined == N and encrypted["first"].records_ok == 20
    # the re-run and the replay failed the same records again: updates, history, change data
    assert encrypted["second"].records_quarantined == N and encrypted["replay"].still_failing == N
    q = spark.read.format("delta").load(str(d / "quarantine"))
    assert q.count() == encrypted["rows_after_first"] == N  # nothing new: a record is known by its plaintext
    assert {r[0] for r in q.select("encryption_key_id").distinct().collect()} == {"k1"}
    # failed the same way three times: one entry (the sealing is deterministic: the same plaintext
    # seals the same), counted three times
    assert q.where((F.size("error_history") != 1) | (F.col("error_count") != 3)).count() == 0
    # identity is the plaintext's: the fingerprints are the source records'
    source = spark.read.format("delta").load(str(d / "source"))
    expected = {(r[0], r[1]) for r in source.select("offset", fingerprint().alias("fp")).collect()}
    assert {(r[0], r[1]) for r in q.select("offset", "fingerprint").collect()} <= expected

    wanted = [n for i in range(N) for n in needles(i)]
    plain = [needles(i)[0] for i in range(N)]
    in_source = {w for hits in files_holding(d / "source", plain).values() for w in hits}
    assert in_source == set(plain), "the scan sees each record's plaintext where it is: in the source"
    folder = d / "quarantine"
    kinds = {p.parent.name if p.parent != folder else "data" for p in folder.rglob("*.parquet")}
    assert {"_change_data", "_delta_log", "data"} <= kinds, kinds  # data, checkpoints and change data to read
    assert files_holding(folder, wanted) == {}


def test_the_dlq_topic_and_the_error_context_log_carry_no_record_content(
    spark: Any, encrypted: dict[str, Any], caplog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    d: Path = encrypted["dir"]
    monkeypatch.setenv("PD_KEY_1", KEY_1)
    pipe = Pipeline.from_config(parse_config(encrypted["raw"]), spark, listeners=[])
    source = spark.read.format("delta").load(str(d / "source"))
    failed = pipe.split_frame(source).where(F.col(ERROR).isNotNull())
    rows = pipe.quarantine_writer().rows(failed, run_id="r", batch_id=0, now=dt.datetime.now(dt.UTC))
    # what a DLQ topic would be sent (the same rows the table gets, produced after the table's write)
    records = [json.dumps(r.asDict(recursive=True), default=lambda b: bytes(b).hex())
               for r in dlq_records(rows).collect()]
    assert len(records) == N
    wanted = [n.decode() for i in range(N) for n in needles(i)]
    assert not [w for w in wanted if any(w in r for r in records)]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="quarantine.errors"):
        Pipeline.from_config(parse_config(encrypted["raw"]), spark, listeners=[]).run(full=True)
    lines = logged(caplog)
    assert "error context" in lines and "keeps it encrypted" in lines
    assert not [w for w in wanted if w in lines]


@pytest.mark.parametrize("engine", ["spark", "auto"])
def test_operator_commands_show_encrypted_n_bytes_without_the_key_and_the_bytes_with_it(
    encrypted: dict[str, Any], capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine: str
) -> None:
    conf = str(encrypted["conf"])
    monkeypatch.setenv(ENGINE_ENV, engine)
    monkeypatch.delenv("PD_KEY_1", raising=False)
    commands = [
        ["inspect", "--conf", conf, "--limit", "200"],
        ["inspect", "--conf", conf, "--limit", "200", "--json", "--status", "all"],
        ["stats", "--conf", conf],
        *[["sql", name, "--conf", conf, "--param", "pipeline="] for name in
          ("top_errors", "stuck_records", "open_records", "offset_ranges", "resolution_history")],
        ["sql", "stuck_records", "--conf", conf, "--param", "hours=0", "--param", "failures=0", "--json"],
    ]
    wanted = [n.decode() for i in range(N) for n in needles(i)]
    shown = []
    for command in commands:
        capsys.readouterr()
        assert main(command) == 0, command
        out = capsys.readouterr()
        shown.append(out.out + out.err)
        assert not [w for w in wanted if w in out.out + out.err], command
    assert "encrypted (" in shown[0] and "encrypted (" in shown[3]  # inspect's values, top_errors' example
    opened = json.loads(shown[1])
    assert {r["value"]["encoding"] for r in opened} == {"encrypted"}
    assert main(["report", "--conf", conf, "--out", str(tmp_path / "report.html")]) == 0
    assert not [w for w in wanted if w in (tmp_path / "report.html").read_text(encoding="utf-8")]
    # replay --dry-run's selection (the read both engines run): each example shown as its size
    examples = _selection_examples(encrypted["raw"])
    assert examples and all(e.startswith("encrypted (") for e in examples), examples

    monkeypatch.setenv("PD_KEY_1", KEY_1)
    capsys.readouterr()
    assert main(["inspect", "--conf", conf, "--limit", "200", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == N
    by_offset = {r["offset"]: r for r in records}
    source = {row[4]: row for row in source_rows()}
    for offset, r in by_offset.items():
        key, value = source[offset][0], source[offset][1]
        assert r["key"]["text"] == key.decode()
        assert r["value"]["text"] == (value.decode() if value[:1] != b"\xff" else value.hex())
        assert [h["value"]["text"] for h in r["headers"]] == [v.decode() for _, v in source[offset][7]]
        assert not r["message"].startswith("encrypted")
    examples = _selection_examples(encrypted["raw"])
    assert examples and not [e for e in examples if e.startswith("encrypted")], examples
    assert set(examples) <= {r["message"] for r in records}  # each one a row's message, opened


def _selection_examples(raw: dict[str, Any]) -> list[str]:
    """The example message of each group of ``replay --dry-run``'s selection, read by the engine
    ``$QUARANTINE_READ_ENGINE`` picks and shown through the key ring the environment gives."""
    config = parse_config(raw)
    keys = KeyRing.from_errors(config.errors)
    selection = answer(config, ("quarantine",), lambda reads: replay_selection(reads, config.pipeline, None, keys),
                       app="replay")
    return [g.example for g in selection.groups if g.example is not None]


def test_replay_opens_rows_with_the_key_refuses_without_it_and_reads_an_old_key_after_a_rotation(
    spark: Any, table_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    spark.createDataFrame(source_rows(count=30), KAFKA_SOURCE_SCHEMA).write.format("delta").save(
        str(table_dir / "source"))
    monkeypatch.setenv("PD_KEY_1", KEY_1)
    Pipeline.from_config(parse_config(config(table_dir, **ENCRYPTED)), spark, listeners=[]).run()
    q, target = str(table_dir / "quarantine"), str(table_dir / "target")
    # the fix: order_id is no longer required (the records without one pass); key 2 writes from now on
    rotated = config(table_dir, required=(), **{
        "deadletterqueue.encryption.key": "env:PD_KEY_2", "deadletterqueue.encryption.key.id": "k2",
        "deadletterqueue.encryption.old.keys": {"k1": "env:PD_KEY_1"}})
    version = spark.sql(f"DESCRIBE HISTORY delta.`{q}`").agg(F.max("version")).first()[0]
    in_target = spark.read.format("delta").load(target).count()

    monkeypatch.delenv("PD_KEY_1")
    monkeypatch.setenv("PD_KEY_2", KEY_2)
    with pytest.raises(KeyUnavailableError) as refused:
        replay(Pipeline.from_config(parse_config(rotated), spark, listeners=[]))
    said = str(refused.value)
    assert said.startswith("replay refused, nothing was written") and "\n" not in said
    assert "30 record(s) under key 'k1', not readable here (the environment variable PD_KEY_1 is not set)" in said
    conf = write_conf(rotated, table_dir / "rotated.yml")
    capsys.readouterr()
    assert main(["replay", "--conf", str(conf)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "KeyUnavailableError: replay refused" in err
    assert spark.sql(f"DESCRIBE HISTORY delta.`{q}`").agg(F.max("version")).first()[0] == version
    assert spark.read.format("delta").load(target).count() == in_target
    monkeypatch.delenv("PD_KEY_2")
    with pytest.raises(ConfigError, match="PD_KEY_2 is not set"):  # nor can it write rows it cannot encrypt
        Pipeline.from_config(parse_config(rotated), spark, listeners=[]).run()

    monkeypatch.setenv("PD_KEY_1", KEY_1)
    monkeypatch.setenv("PD_KEY_2", KEY_2)
    result = replay(Pipeline.from_config(parse_config(rotated), spark, listeners=[]))
    assert (result.selected, result.replayed, result.still_failing) == (30, 10, 20)
    emails = {r[0] for r in spark.read.format("delta").load(target).where("order_id IS NULL").select("email").collect()}
    assert emails == {secret(i) for i in range(30) if i % 3 == 1}  # the plaintext reached the target
    rows = spark.read.format("delta").load(q)
    assert {r[0] for r in rows.select("encryption_key_id").distinct().collect()} == {"k1"}  # bytes as written
    latest = {r[0].split(":")[1] for r in rows.where("status = 'open'").select("message").collect()}
    assert latest == {"k2"}  # the replay's new failures are written under the new key

    # new records after the rotation: under key 2; both generations open with both keys, and k1's not without it
    spark.createDataFrame(source_rows(start=50, count=6), KAFKA_SOURCE_SCHEMA).write.format("delta").mode(
        "append").save(str(table_dir / "source"))
    Pipeline.from_config(parse_config(rotated), spark, listeners=[]).run()
    ids = {r[0] for r in spark.read.format("delta").load(q).select("encryption_key_id").distinct().collect()}
    assert ids == {"k1", "k2"}
    monkeypatch.setenv(ENGINE_ENV, "auto")
    capsys.readouterr()
    assert main(["inspect", "--conf", str(conf), "--limit", "100", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {r["encryption_key_id"] for r in shown} == {"k1", "k2"}
    assert all(r["key"]["encoding"] == "utf-8" for r in shown)
    monkeypatch.delenv("PD_KEY_1")
    assert main(["inspect", "--conf", str(conf), "--limit", "100", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {r["key"]["encoding"] for r in shown if r["encryption_key_id"] == "k1"} == {"encrypted"}
    assert {r["key"]["encoding"] for r in shown if r["encryption_key_id"] == "k2"} == {"utf-8"}
