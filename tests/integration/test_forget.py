"""``quarantine forget`` and ``--purge``, with real Spark and Delta: a request's records gone from every file.

Records carry a distinctive plaintext (an e-mail address) in their key, value and a header, and
the json stage's message quotes it. After ``forget --purge`` on a table with deletion vectors and
on one without, the forgotten records' plaintext (and its hex) is in no file under the
quarantine table's folder, read byte for byte: data files, the log, checkpoints, the Change
Data Feed. The other records' bytes are the source's, byte for byte; a batch re-run over the
source, which still holds the forgotten records, delivers and quarantines nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from quarantine.cli import main
from quarantine.config import parse_config
from quarantine.errors import ConfigError, KeyUnavailableError
from quarantine.ops.duck import ENGINE_ENV
from quarantine.ops.forget import RETENTION_CHECK, forget
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.sinks.quarantine import STATS_PROPERTY
from tests.helpers import email_orders_config, files_holding, kafka_rows, uncompressed_parquet
from tests.support.crash import write_conf
from tests.support.readme import block

N = 40
#: The request: two open records (3 by its key, as the manual's commands name it; 9 by offset) and two
#: replayed ones (4, 7).
FORGOTTEN = (3, 4, 7, 9)


def secret(i: int) -> str:
    return f"quux.{i:02d}@example.org"


def needles(i: int) -> list[bytes]:
    raw = secret(i).encode()
    return [raw, raw.hex().encode(), raw.hex().upper().encode()]


def source_rows() -> list[tuple[Any, ...]]:
    """Poison ``i`` (offset ``i``): an amount quoting ``secret(i)`` (``i % 3 != 1``) or no ``order_id``
    (``i % 3 == 1``: a replay without the requirement passes it); then 10 good records."""
    values = [
        (f'{{"amount": 2.5, "email": "{secret(i)}"}}' if i % 3 == 1
         else f'{{"order_id": "o-{i}", "amount": "{secret(i)}", "email": "{secret(i)}"}}').encode()
        for i in range(N)
    ] + [f'{{"order_id": "g-{j}", "amount": 1.0, "email": "g{j}@ok.org"}}'.encode() for j in range(10)]
    keys = [f"cust-{i:05d}".encode() for i in range(N)] + [b"good"] * 10
    headers = [[("email", secret(i).encode())] for i in range(N)] + [None] * 10
    return kafka_rows(values, keys=keys, headers=headers)


def config(d: Path, *, required: tuple[str, ...] = ("order_id",), **errors: Any) -> dict[str, Any]:
    return email_orders_config(d, "forgetful", required=required, **errors)


@pytest.fixture(autouse=True)
def _uncompressed(spark: Any) -> Iterator[None]:
    """Every table of these tests written uncompressed: a byte the files hold is there as written."""
    with uncompressed_parquet(spark):
        yield


def _run(capsys: Any, args: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _version(spark: Any, q: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{q}`").agg(F.max("version")).first()[0])


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["files-rewritten", "deletion-vectors"])
def test_forget_purge_leaves_the_forgotten_bytes_in_no_file_and_every_other_record_as_it_was(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, deletion_vectors: bool
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "spark")
    spark.createDataFrame(source_rows(), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(table_dir / "source"))
    raw = config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    q = str(table_dir / "quarantine")
    spark.sql(f"ALTER TABLE delta.`{q}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2', "
              f"'delta.enableDeletionVectors' = '{str(deletion_vectors).lower()}')")
    fixed = config(table_dir, required=())
    assert replay(Pipeline.from_config(parse_config(fixed), spark, listeners=[])).replayed == 13  # i % 3 == 1
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()  # a re-run: the open rows updated
    before = {r["offset"]: r.asDict(recursive=True) for r in spark.read.format("delta").load(q).collect()}
    in_target = spark.read.format("delta").load(str(table_dir / "target")).count()
    conf = str(write_conf(raw, table_dir / "forgetful.yml"))

    # the manual's commands: a dry run, then the request with --purge within Delta's retention
    dry_run, request = [[conf if a == "conf/orders_demo.yml" else a for a in c[1:]] for c in block("forget").commands()]
    assert dry_run[:4] == request[:4] == ["forget", "--conf", conf, "--key"] and request[4] == "cust-00003"
    version = _version(spark, q)
    code, out, _ = _run(capsys, dry_run)
    assert code == 0 and out.startswith("forget --dry-run (nothing written): 1 row(s) of pipeline forgetful"), out
    code, _, err = _run(capsys, ["forget", "--conf", conf, "--where", "offset >= 0"])
    assert code == 2 and f"it matches all {N} of them: add --all" in err, err
    code, _, err = _run(capsys, ["forget", "--conf", conf])
    assert code == 2 and "--where, --key, or --all" in err
    code, _, err = _run(capsys, [*request, "--retain-hours", "1"])
    assert code == 2 and RETENTION_CHECK in err  # refused before the erase: nothing written
    assert _version(spark, q) == version

    # by key, purged within Delta's retention: when the bytes go is said, with the time
    code, out, err = _run(capsys, request)
    assert code == 0, err
    assert out.startswith("forget: 1 row(s) of pipeline forgetful in "), out
    assert "1 open closed as discarded ('forgotten: erasure request 2026-113')" in out
    assert "deleted by a VACUUM after " in out and "(retention 168 h)" in out
    assert ("REORG … APPLY (PURGE)" in out) is deletion_vectors
    # by offset, two of them replayed, purged now with Delta's documented override
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        code, out, err = _run(capsys, ["forget", "--conf", conf, "--where", "offset IN (4, 7, 9)",
                                       "--reason", "request 114", "--purge", "--retain-hours", "0"])
    finally:
        spark.conf.unset(RETENTION_CHECK)
    assert code == 0, err
    assert "3 row(s) of pipeline forgetful" in out and "(1 open, 2 replayed)" in out
    assert "2 of them were replayed: their records' rows are in the target" in out
    assert "gone from every data and change-data file of the table now" in out

    wanted = [n for i in FORGOTTEN for n in needles(i)]
    folder = table_dir / "quarantine"
    assert {p.parent.name for p in folder.rglob("*.parquet")} >= {"_delta_log", "quarantine"}  # checkpoints
    assert files_holding(folder, wanted) == {}
    kept = [n for i in range(N) if i not in FORGOTTEN for n in needles(i)[:1]]
    assert set(kept) <= {w for hits in files_holding(folder, kept).values() for w in hits}  # the scan sees them

    after = {r["offset"]: r.asDict(recursive=True) for r in spark.read.format("delta").load(q).collect()}
    assert after.keys() == before.keys()
    source = {row[4]: row for row in source_rows()}
    for offset, row in after.items():
        was = before[offset]
        if offset in FORGOTTEN:
            assert [row[c] for c in ("key", "value", "headers", "message", "stacktrace", "encryption_key_id")] == [
                None] * 6, row
            assert all(h["message"] is None for h in row["error_history"])
            kept_columns = ("fingerprint", "topic", "partition", "timestamp", "stage", "kind", "error_class",
                            "error_count", "first_seen_at", "last_seen_at")
            assert [row[c] for c in kept_columns] == [was[c] for c in kept_columns]
            assert [h["at"] for h in row["error_history"]] == [h["at"] for h in was["error_history"]]
            if was["status"] == "open":
                assert row["status"] == "discarded" and row["resolution"] in (
                    "forgotten: erasure request 2026-113", "forgotten: request 114")
            else:
                assert (row["status"], row["resolution"]) == (was["status"], was["resolution"])
        else:
            assert row == was  # untouched, and its bytes the source's, byte for byte
            assert (bytes(row["key"]), bytes(row["value"])) == (source[offset][0], source[offset][1])
            assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == source[offset][7]

    # the source still holds the forgotten records: a batch re-run delivers and quarantines nothing new
    again = Pipeline.from_config(parse_config(fixed), spark, listeners=[]).run()
    assert again.records_ok == 0
    assert spark.read.format("delta").load(str(table_dir / "target")).count() == in_target
    rerun = {r["offset"]: r.asDict(recursive=True) for r in spark.read.format("delta").load(q).collect()}
    assert rerun.keys() == before.keys()
    assert all(rerun[o] == after[o] for o in FORGOTTEN)
    assert files_holding(folder, wanted) == {}


def test_forget_by_key_opens_encrypted_keys_and_refuses_without_them(
    spark: Any, table_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark.createDataFrame(source_rows(), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(table_dir / "source"))
    monkeypatch.setenv("FG_KEY", "k" * 16)
    raw = config(table_dir, **{"deadletterqueue.encryption.key": "env:FG_KEY",
                               "deadletterqueue.encryption.key.id": "2026-12"})
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    q = str(table_dir / "quarantine")
    version = _version(spark, q)
    monkeypatch.delenv("FG_KEY")
    with pytest.raises(KeyUnavailableError, match="FG_KEY is not set"):
        forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), key=b"cust-00009")
    with pytest.raises(ConfigError, match="--where"):  # every row, without --all
        forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), where="true")
    assert _version(spark, q) == version
    # --where needs no key: the coordinates and classes are not encrypted
    done = forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), where="offset = 5")
    assert done.matched == {"open": 1}
    monkeypatch.setenv("FG_KEY", "k" * 16)
    done = forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), key=b"cust-00009", reason="r")
    assert (done.matched, done.erased_before) == ({"open": 1}, 0)
    rows = {r["offset"]: r for r in spark.read.format("delta").load(q).collect()}
    assert rows[9]["value"] is None and rows[9]["status"] == "discarded" and rows[9]["resolution"] == "forgotten: r"
    assert rows[8]["value"] is not None and rows[8]["encryption_key_id"] == "2026-12"
    version = _version(spark, q)
    # a second request: the key is gone with the rest, so it matches nothing and writes nothing; by
    # its coordinates the row is found, already erased
    again = forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), key=b"cust-00009")
    assert again.matched == {} and again.total == 0
    by_offset = forget(Pipeline.from_config(parse_config(raw), spark, listeners=[]), where="offset = 9")
    assert by_offset.matched == {"discarded": 1} and by_offset.erased_before == 1
    assert _version(spark, q) == version


def test_the_log_keeps_no_statistics_of_messages_and_an_older_table_is_told_when_its_log_forgets(
    spark: Any, table_dir: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delta keeps each file's smallest and largest value of a string column (its first 32 characters) in
    the log; a message quotes its record, so the table leaves its content columns out of them."""
    monkeypatch.setenv(ENGINE_ENV, "spark")
    spark.createDataFrame(source_rows(), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(table_dir / "source"))
    raw = config(table_dir)
    Pipeline.from_config(parse_config(raw), spark, listeners=[]).run()
    log = table_dir / "quarantine" / "_delta_log"
    added = [json.loads(line)["add"] for f in sorted(log.glob("*.json"))
             for line in f.read_text(encoding="utf-8").splitlines() if '"add"' in line]
    stats = [json.loads(a["stats"]) for a in added if a.get("stats")]
    assert stats and all("topic" in s["minValues"] for s in stats)
    assert not [s for s in stats for c in ("message", "stacktrace", "resolution") if c in s["minValues"]]

    # an older table (created before the property): forget sets it and purge says when the log forgets
    q = str(table_dir / "quarantine")
    spark.sql(f"ALTER TABLE delta.`{q}` UNSET TBLPROPERTIES ('{STATS_PROPERTY}')")
    conf = str(write_conf(raw, table_dir / "forgetful.yml"))
    code, out, err = _run(capsys, ["forget", "--conf", conf, "--key", "cust-00000", "--purge"])
    assert code == 0, err
    assert f"set {STATS_PROPERTY} on the table" in out
    assert "the log's files from before " in out and "(delta.logRetentionDuration)" in out
    props = spark.sql(f"DESCRIBE DETAIL delta.`{q}`").select("properties").first()[0]
    assert "message" not in props[STATS_PROPERTY] and "topic" in props[STATS_PROPERTY]
