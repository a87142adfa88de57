"""What the source's commits and the target's history say a batch run reads (pure: parsed log actions)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from quarantine.batch.increment import (
    MAX_FILES_BYTES,
    NewFile,
    ReadMark,
    decode_files,
    encode_files,
    files_not_read,
    new_files,
    target_changed,
)
from quarantine.identity import Floors


def test_new_files_reads_appends_and_names_every_other_commit() -> None:
    add = {"add": {"path": "a.parquet", "partitionValues": {}, "dataChange": True}}
    info = {"commitInfo": {"operation": "WRITE"}}
    assert new_files({3: [info, add]}) == [NewFile("a.parquet")]
    optimize = [{"commitInfo": {"operation": "OPTIMIZE"}},
                {"remove": {"path": "old.parquet", "dataChange": False}},
                {"add": {"path": "big.parquet", "dataChange": False}}]
    assert new_files({3: [info, add], 4: optimize}) == [NewFile("a.parquet")]
    merged = [{"commitInfo": {"operation": "MERGE"}}, {"remove": {"path": "a.parquet", "dataChange": True}}]
    assert new_files({3: merged}) == "version 3 of the source (MERGE) removed or rewrote records"
    assert "changed its schema" in str(new_files({5: [{"metaData": {}}]}))
    dv = {"add": {"path": "b.parquet", "dataChange": True, "deletionVector": {"x": 1}}}
    assert "deleted rows" in str(new_files({6: [dv]}))
    compacted = [{"remove": {"path": "a.parquet", "dataChange": False}}]
    assert "compaction" in str(new_files({3: [add], 4: compacted}))


def test_target_changed_allows_only_appends_and_compactions() -> None:
    assert target_changed([
        {"version": 1, "operation": "MERGE", "operationMetrics": {"numTargetRowsDeleted": "0"}},
        {"version": 2, "operation": "WRITE", "operationParameters": {"mode": "Append"}},
        {"version": 3, "operation": "OPTIMIZE"},
    ]) is None
    assert "version 4: DELETE" in str(target_changed([{"version": 4, "operation": "DELETE"}]))
    overwrite = {"version": 5, "operation": "WRITE", "operationParameters": {"mode": "Overwrite"}}
    assert "WRITE" in str(target_changed([overwrite]))
    assert "MERGE" in str(target_changed([{"version": 6, "operation": "MERGE",
                                           "operationMetrics": {"numTargetRowsUpdated": "2"}}]))


def test_a_mark_reads_back_as_written_and_an_unreadable_one_as_none() -> None:
    mark = ReadMark(source="/s", source_id="i", version=3, stages="f", quarantine_id=None, target_version=7)
    assert ReadMark.from_json(mark.to_json()) == mark
    assert ReadMark.from_json("{") is None and ReadMark.from_json('{"version": 1}') is None
    assert ReadMark.from_json(None) is None


def test_a_parquet_marks_files_read_back_as_written() -> None:
    names = [f"file:/data/orders/part-{i:05d}-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901-c000.snappy.parquet"
             for i in range(2000)]
    encoded = encode_files(reversed(names))
    assert encoded is not None and decode_files(encoded) == frozenset(names)
    assert len(encoded) < 20 * 1024, "a Spark job's names cost a few bytes each"
    assert decode_files(encode_files([]) or "") == frozenset()
    mark = ReadMark(source="/s", source_id="p", version=2, stages="f", quarantine_id=None, target_version=1,
                    files=encode_files(["a", "b"]))
    assert ReadMark.from_json(mark.to_json()) == mark
    # a mark written before Parquet sources were marked reads back with no files
    assert ReadMark.from_json(mark.to_json().replace(',"files":"' + str(mark.files) + '"', "")) is not None


def test_more_names_than_a_mark_holds_are_not_recorded() -> None:
    rng = random.Random(61)
    names = [f"{rng.getrandbits(128):032x}.parquet" for _ in range(MAX_FILES_BYTES // 8)]
    assert encode_files(names) is None
    assert "read whole" in str(files_not_read(None, names))


def test_files_not_read_are_the_new_ones_and_a_gone_file_reads_all() -> None:
    read = encode_files(["a.parquet", "b.parquet"])
    assert files_not_read(read, ["b.parquet", "a.parquet"]) == []
    assert files_not_read(read, ["c.parquet", "a.parquet", "b.parquet", "0.parquet"]) == ["0.parquet", "c.parquet"]
    assert files_not_read(read, ["a.parquet", "c.parquet"]) == (
        "1 file(s) the last run read are gone from the directory (removed or rewritten)")
    assert "could not be decoded" in str(files_not_read("not base64!", ["a.parquet"]))
    assert "could not be decoded" in str(files_not_read("aGVsbG8=", ["a.parquet"]))


def test_floors_need_every_coordinate_and_a_bounded_count() -> None:
    assert Floors.of([("a", 0, 5), ("a", 1, 0)]) == Floors((("a", 0, 5), ("a", 1, 0)))
    assert Floors.of([("a", None, 5)]) is None and Floors.of([]) is None
    assert Floors.of([("a", p, 0) for p in range(Floors.MOST + 1)]) is None
    sql = Floors((("o'x", 0, 5),)).sql("t", "tp", "pa", "of")
    assert sql == "((t.tp = 'o\\'x' AND t.pa = 0 AND t.of >= 5))"


_FINGERPRINT = """
import sys
from quarantine.config import load_config
from quarantine.stages import build_stages
from quarantine.stages.python import python_stage
from quarantine.batch.increment import stages_fingerprint
from tests.fixtures_py_stage import parse_amount
c = load_config("conf/orders_demo.yml")
stages = [*build_stages(c.stages), python_stage("amount", parse_amount, "DOUBLE", input="decode")]
print(stages_fingerprint(stages, c.redacted().get("target")))
"""


def test_the_stages_fingerprint_is_the_same_in_every_process_and_changes_with_a_stage() -> None:
    root = Path(__file__).resolve().parents[2]

    def taken(seed: str, code: str = _FINGERPRINT) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        run = [sys.executable, "-c", code]
        out = subprocess.run(run, cwd=root, env=env, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    first = taken("1")
    assert len(first) == 32 and taken("2") == first == taken("3")
    assert taken("1", _FINGERPRINT.replace('"DOUBLE"', '"FLOAT"')) != first
