"""Terminal tables and JSON of the triage commands, and their time and filter options (no JVM)."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest

from quarantine.commands.options import parse_time
from quarantine.display import decode_bytes, fit_widths, gist, plain, print_json, print_table, shorten
from quarantine.errors import ConfigError
from quarantine.ops.triage_output import (
    INSPECT_COLUMNS,
    RecordFilter,
    inspect_rows,
    print_records,
    record_json,
)


def test_bytes_are_text_where_they_are_utf8_and_hex_where_not() -> None:
    assert decode_bytes(b"caf\xc3\xa9") == ("café", "utf-8")
    assert decode_bytes(b"\xff\xfe\x00") == ("fffe00", "hex")
    assert decode_bytes(b"") == ("", "utf-8")
    assert decode_bytes(None) == (None, None)
    assert plain({"v": bytearray(b"\x80"), "at": dt.datetime(2026, 1, 2, 3, 4, 5), "xs": [b"ok"]}) == {
        "v": "hex:80", "at": "2026-01-02T03:04:05", "xs": ["ok"]}


def test_a_record_as_json_keeps_every_byte_and_names_each_payloads_encoding() -> None:
    long = "x" * 5000
    out = record_json({
        "topic": "t", "partition": 0, "offset": 4, "status": "open",
        "last_seen_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "key": None, "value": long.encode(), "headers": [{"key": "h", "value": b"\xc3("}],
    })
    assert out["value"] == {"text": long, "encoding": "utf-8"}
    assert out["key"] == {"text": None, "encoding": None}
    assert out["headers"] == [{"key": "h", "value": {"text": "c328", "encoding": "hex"}}]
    assert out["last_seen_at"] == "2026-01-01T00:00:00+00:00" and out["stage"] is None
    json.dumps(out)  # JSON-ready


class _Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_a_table_prints_data_literally_one_line_per_row_cut_with_an_ellipsis() -> None:
    out = _Pipe()
    print_table("title", ["n", "message", "at"],
                [[1, "[bold]not markup[/bold] " + "m" * 400, dt.datetime(2026, 1, 1, 1, 2, 3, 456)],
                 [None, "short", 2.5]], out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "title"
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 2 and "[bold]not markup[/bold]" in rows[0] and "…" in rows[0]
    assert "2026-01-01 01:02:03" in rows[0] and "NULL" in rows[1] and "2.50" in rows[1]
    assert max(len(line) for line in lines) <= 200


def test_an_empty_result_says_so() -> None:
    out = _Pipe()
    print_table("nothing", ["a"], [], out=out)
    assert out.getvalue().rstrip().endswith("(no rows)")


def test_widths_keep_narrow_columns_whole_and_share_the_rest() -> None:
    assert fit_widths([3, 10, 4], 100) == [3, 10, 4]
    assert fit_widths([3, 500, 4, 300], 60) == [3, 26, 4, 26]
    assert fit_widths([50, 50], 4) == [6, 6]  # never narrower than a few characters
    assert shorten("abcdef", 4) == "abc…" and shorten("abc", 4) == "abc" and shorten(None, 3) is None


def test_json_output_is_one_document_with_non_ascii_kept() -> None:
    out = _Pipe()
    print_json([{"v": b"\xe2\x82\xac", "n": 1}], out=out)
    assert json.loads(out.getvalue()) == [{"v": "€", "n": 1}] and "€" in out.getvalue()


def test_times_are_iso_in_utc_or_an_age() -> None:
    now = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
    assert parse_time("24h", "--since", now=now) == dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
    assert parse_time("7d", "--since", now=now) == dt.datetime(2026, 11, 18, 12, 0, tzinfo=dt.UTC)
    assert parse_time("30m", "--since", now=now) == dt.datetime(2026, 11, 25, 11, 30, tzinfo=dt.UTC)
    assert parse_time("2026-11-25", "--until") == dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    assert parse_time("2026-11-25T10:00+01:00", "--until").utcoffset() == dt.timedelta(hours=1)
    with pytest.raises(ConfigError, match=r"'--since'.*an age"):
        parse_time("yesterday", "--since")


def test_a_record_filter_checks_its_status_limit_and_time_window() -> None:
    assert RecordFilter(status="all").status == "all"
    with pytest.raises(ConfigError, match=r"open \| replayed \| discarded \| all"):
        RecordFilter(status="closed")
    with pytest.raises(ConfigError, match="--limit"):
        RecordFilter(limit=0)
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    with pytest.raises(ConfigError, match="before --until"):
        RecordFilter(since=t, until=t)


RANGE = "field 'amount': expected between 0 and 100, found 250.0"


def test_a_cut_message_keeps_where_it_failed_and_the_value_found() -> None:
    assert gist(RANGE, 80) == RANGE
    assert gist(RANGE, 40) == "field 'amount': expected … found 250.0"
    assert gist(RANGE, 30) == "field 'amount': … found 250.0"
    # no value found in it: cut at a word, not inside one
    assert gist("Unexpected character ('o' (code 111)): was expecting double-quote", 30) == \
        "Unexpected character ('o'…"
    assert gist("abcdefghij" * 5, 12) == "abcdefghija…"  # one long word: cut inside it
    assert gist(None, 5) is None
    assert all(len(gist(RANGE, w) or "") <= w for w in range(8, 60))


def test_the_inspect_table_shows_the_value_found_however_narrow_its_message_column() -> None:
    record = record_json({"topic": "t", "partition": 0, "offset": 1, "status": "open", "stage": "check_order",
                          "error_class": "range", "message": RANGE, "error_count": 1,
                          "key": None, "value": b"{}", "headers": []})
    assert "found 250.0" in inspect_rows([record])[0][INSPECT_COLUMNS.index("message")]
    out = _Pipe()
    print_table("t", ["stage", "message", "value"], [["check_order", RANGE, "x" * 300]], out=out)
    row = next(line for line in out.getvalue().splitlines() if "check_order" in line)
    assert "found 250.0" in row and "field 'amount'" in row


def test_a_header_key_that_is_not_utf8_is_hex_like_a_value() -> None:
    out = record_json({"topic": "t", "partition": 0, "offset": 1, "key": None, "value": None,
                       "headers": [{"key": b"\xff\xfe-h\xc3(", "value": b"v"}, {"key": b"trace", "value": None},
                                   {"key": "plain", "value": b""}]})
    assert [h["key"] for h in out["headers"]] == ["hex:fffe2d68c328", "trace", "plain"]
    json.dumps(out)


def test_a_table_escapes_control_characters_instead_of_sending_them_to_the_terminal() -> None:
    record = record_json({"topic": "t", "partition": 0, "offset": 1, "message": "bad\rline",
                          "key": b"k\x00", "value": b"\x1b[2J",
                          "headers": [{"key": b"colour\x07", "value": b"\x1b[31mred\xc2\x9b"}]})
    out = _Pipe()
    print_table("t", INSPECT_COLUMNS, inspect_rows([record]), out=out)
    text = out.getvalue()
    assert not any(ch in text for ch in "\x00\x07\x1b\r\x9b"), repr(text)
    assert r"\x1b[31mred\x9b" in text and r"colour\x07=" in text and r"\x1b[2J" in text and r"bad\rline" in text


def test_the_inspect_table_gives_the_message_its_width_before_the_payloads() -> None:
    record = record_json({"topic": "orders", "partition": 0, "offset": 1, "status": "open", "stage": "check_order",
                          "error_class": "range", "message": RANGE, "error_count": 1, "key": b"cust-00000",
                          "last_seen_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "value": b"{" + b"x" * 300,
                          "headers": [{"key": b"trace-id", "value": b"\xff" * 40},
                                      {"key": b"src", "value": b"w" * 50}]})
    out = _Pipe()
    print_records("t", [record], out=out)
    row = next(line for line in out.getvalue().splitlines() if "check_order" in line)
    assert "field 'amount': expected" in row and "found 250.0" in row, row


def test_the_inspect_table_names_a_record_as_kafka_s_tools_do_in_one_column() -> None:
    """``orders-0@4`` (topic-partition@offset): the coordinates in one column leave the message and the
    payloads the page (issue 54, point 6: the table was wider than the page)."""
    record = record_json({"topic": "orders", "partition": 0, "offset": 4, "status": "open", "stage": "decode",
                          "error_class": "InvalidUtf8", "message": "m", "error_count": 1, "key": None,
                          "value": None, "headers": []})
    out = _Pipe()
    print_records("t", [record], out=out)
    header, row = [line for line in out.getvalue().splitlines() if line.startswith(("┃", "│"))]
    assert header.split("┃")[1].strip() == "record" and row.split("│")[1].strip() == "orders-0@4", out.getvalue()
    assert "partition" not in header and "offset" not in header
