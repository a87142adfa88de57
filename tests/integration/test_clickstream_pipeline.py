"""A newcomer's pipeline of their own: no field is lost without a word (issue 60, A, B and C).

Clickstream events as JSON, with a nested ``device`` struct and a ``tags`` array, poison of
ten kinds, the stages decode -> json -> cast -> checks -> a ``python`` stage in a module beside
the config, and a new field, ``referrer``, that the producer adds mid-life. Run as the user
runs it (``quarantine validate`` and ``quarantine run`` in this process, from the project's
parent folder, no ``PYTHONPATH``). After every run each source record is in exactly one of
the target and the quarantine table, a quarantined one with its raw bytes; every field the
stages produce is in the target, or the run's summary (and ``validate``) says where it is
left out; nested fields are checked, named and shown as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from tests.helpers import kafka_df

MODULE = '''
"""The clickstream's python stage (beside pipeline.yml)."""

MOBILE = {"ios", "android"}


class UnknownPage(ValueError):
    """A page that is not a path."""


def enrich(event):
    """Three new fields: output: extend (the default) keeps the event's own."""
    page = event["page"]
    if not page or not page.startswith("/"):
        raise UnknownPage(f"page {page!r} is not a path")
    return {
        "is_mobile": event["device"]["os"] in MOBILE,
        "page_section": page.split("/")[1] or "home",
        "tag_count": len(event["tags"] or []),
    }


def enrich_every_field(event):
    """The first version: returns: restates the event, the dict forgets **event."""
    return enrich(event)
'''

SCHEMA = ("event_id STRING, ts STRING, user_id BIGINT, page STRING, "
          "device STRUCT<os: STRING, version: STRING, screenW: INT>, tags ARRAY<STRING>")
ADDED = "is_mobile BOOLEAN, page_section STRING, tag_count INT"
SOURCE_COLUMNS = ["_source_topic", "_source_partition", "_source_offset", "_source_timestamp", "_source_fingerprint"]


def _event(n: int, **changes: Any) -> bytes:
    event: dict[str, Any] = {
        "event_id": f"e-{n}", "ts": f"2026-11-0{1 + n % 9} 10:00:00", "user_id": 100 + n, "page": f"/shop/item-{n}",
        "device": {"os": "ios" if n % 2 else "linux", "version": "17", "screenW": 390 + n}, "tags": ["a"] * (n % 3),
    }
    event.update(changes)
    return json.dumps(event).encode()


GOOD = [_event(n) for n in range(12)]
CUT = '{"event_id": "e-x1", "ts": "2026-11-01'
POISON: list[tuple[bytes | None, str, str, str]] = [
    (CUT.encode(), "parse", "MalformedJson", f"malformed JSON ({len(CUT)} chars); expected a JSON object, found {CUT}"),
    (_event(20, device={"os": "ios", "version": "17", "screenW": "wide"}), "parse", "SchemaMismatch",
     "field 'device.screenW': expected INT, found \"wide\""),
    (_event(21, user_id="abc"), "parse", "SchemaMismatch", "field 'user_id': expected BIGINT, found \"abc\""),
    (_event(22, device="tablet"), "parse", "SchemaMismatch",
     "field 'device': expected STRUCT<os: STRING, version: STRING, screenW: INT>, found \"tablet\""),
    (_event(23, device={"version": "9", "screenW": 800}), "parse", "MissingRequiredField",
     "required field 'device.os': expected a value, found no such field"),
    (_event(24, event_id=None), "parse", "MissingRequiredField",
     "required field 'event_id': expected a value, found null"),
    (_event(25, ts="yesterday"), "convert", "CastFailed",
     "field 'ts': cannot convert \"yesterday\" to TIMESTAMP (format 'yyyy-MM-dd HH:mm:ss')"),
    (_event(26, device={"os": "ios", "version": "17", "screenW": 120}), "check", "range",
     "field 'device.screenW': expected between 200 and 8000, found 120"),
    (_event(27, tags=list("abcdef")), "check", "expr",
     "row: expected size(convert.result.tags) <= 5, found convert.result.tags = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]"),
    (_event(28, page="checkout"), "enrich", "UnknownPage", "page 'checkout' is not a path"),
]


def _config(schema: str = SCHEMA, **enrich: Any) -> dict[str, Any]:
    return {
        "pipeline": "clicks",
        "source": {"format": "delta", "path": "data/events"},
        "target": {"table": "data/clicks"},
        "errors": {"tolerance": "all", "deadletterqueue.table.name": "data/quarantine"},
        "stages": [
            {"name": "decode", "type": "decode_utf8"},
            {"name": "parse", "type": "json", "options": {"schema": schema, "required": ["event_id", "device.os"]}},
            {"name": "convert", "type": "cast",
             "options": {"columns": {"ts": "TIMESTAMP"}, "formats": {"ts": "yyyy-MM-dd HH:mm:ss"}}},
            {"name": "check", "type": "checks", "options": {"rules": [
                {"column": "device.screenW", "check": "range", "min": 200, "max": 8000},
                {"check": "expr", "expr": "size(convert.result.tags) <= 5"},
            ]}},
            {"name": "enrich", "type": "python",
             "options": {"function": "clicks_enrich.enrich", "returns": ADDED, **enrich}},
        ],
    }


class Project:
    """The user's folder: ``clicks/pipeline.yml``, ``clicks/clicks_enrich.py`` and the source's Delta table."""

    def __init__(self, spark: Any, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.spark, self.root, self.capsys = spark, root, capsys
        self.folder = root / "clicks"
        (self.folder / "data").mkdir(parents=True)
        (self.folder / "clicks_enrich.py").write_text(MODULE, encoding="utf-8")
        self.sent: list[bytes | None] = []

    def produce(self, values: list[bytes | None]) -> None:
        """Append records to the source, at the offsets after the ones already there."""
        df = kafka_df(self.spark, values, start_offset=len(self.sent))
        df.write.format("delta").mode("append").save(str(self.folder / "data" / "events"))
        self.sent += values

    def command(self, command: str, config: dict[str, Any], name: str = "pipeline.yml") -> str:
        (self.folder / name).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.capsys.readouterr()
        assert main([command, "--conf", f"clicks/{name}"]) == 0
        return self.capsys.readouterr().out

    def table(self, name: str) -> Any:
        return self.spark.read.format("delta").load(str(self.folder / "data" / name))

    def assert_every_record_in_one_place(self, target: str = "clicks", quarantine: str = "quarantine") -> None:
        """Each source record in exactly one table, a quarantined one byte for byte."""
        ok = {r._source_offset for r in self.table(target).select("_source_offset").collect()}
        held = {r.offset: r.value for r in self.table(quarantine).select("offset", "value").collect()}
        assert not ok & held.keys()
        assert ok | held.keys() == set(range(len(self.sent)))
        assert all(bytes(v) == self.sent[o] if v is not None else self.sent[o] is None for o, v in held.items())


@pytest.fixture()
def project(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return Project(spark, tmp_path, capsys)


def test_the_newcomers_pipeline_loses_no_field_without_a_word(project: Project) -> None:
    # day 1: ten kinds of poison among good events, and a NULL value
    project.produce([*GOOD[:6], *(p[0] for p in POISON), None, *GOOD[6:]])
    validated = project.command("validate", _config())
    parsed = "event_id STRING, ts STRING, user_id BIGINT, page STRING, device STRUCT<os: STRING, version: STRING, "
    assert (f"target columns: {parsed.replace('ts STRING', 'ts TIMESTAMP')}screenW: INT>, tags ARRAY<STRING>, "
            "is_mobile BOOLEAN, page_section STRING, tag_count INT (the last stage's result: enrich)") in validated
    assert "warning" not in validated

    ran = project.command("run", _config())
    assert "status succeeded" in ran and "does not reach" not in ran and "schema drift" not in ran
    project.assert_every_record_in_one_place()
    target = project.table("clicks")
    assert target.columns == ["event_id", "ts", "user_id", "page", "device", "tags", "is_mobile", "page_section",
                              "tag_count", *SOURCE_COLUMNS]
    assert dict(target.dtypes)["device"] == "struct<os:string,version:string,screenW:int>"
    first = target.where("event_id = 'e-1'").first()
    assert (first.is_mobile, first.page_section, first.tag_count, first.device.screenW) == (True, "shop", 1, 391)
    assert target.count() == len(GOOD)
    errors = {r.offset: (r.stage, r.error_class, r.message) for r in project.table("quarantine").collect()}
    assert [errors[6 + i] for i in range(len(POISON))] == [p[1:] for p in POISON]
    assert errors[6 + len(POISON)][:2] == ("decode", "NullInput")

    # day 2: the producer adds referrer; the json stage does not declare it yet: dropped, and said
    project.produce([_event(n, referrer="https://example.com/") for n in range(30, 33)])
    ran = project.command("run", _config())
    assert "schema drift at parse: 3 record(s) with undeclared fields: referrer (3)" in ran
    project.assert_every_record_in_one_place()

    # day 3: the user declares it; the python stage extends its input, so it reaches the target with no
    # change to returns:, and the run says the target gained the column
    project.produce([_event(n, referrer="https://example.com/") for n in range(40, 42)])
    day3 = _config(f"{SCHEMA}, referrer STRING")
    assert "referrer STRING, is_mobile BOOLEAN" in project.command("validate", day3)
    ran = project.command("run", day3)
    assert re.search(r"\n  target \S+/clicks/data/clicks: added column\(s\) referrer \(older rows read NULL", ran), ran
    assert "schema drift" not in ran and "does not reach" not in ran
    project.assert_every_record_in_one_place()
    referrers = {r.event_id: r.referrer for r in project.table("clicks").collect()}
    assert referrers["e-40"] == "https://example.com/" and referrers["e-1"] is None and referrers["e-30"] is None


def test_the_newcomers_first_version_fails_each_record_in_words(project: Project) -> None:
    """returns: restating every field, output: replace, and a dict that forgets **event: each record fails
    naming the fields, and the field returns: leaves out (referrer) is named by validate and the run."""
    project.produce([_event(n, referrer="r") for n in range(4)] + [POISON[0][0]])
    schema = f"{SCHEMA}, referrer STRING"
    every = (f"{SCHEMA.replace('ts STRING', 'ts TIMESTAMP')}, {ADDED}")
    config = _config(schema, function="clicks_enrich.enrich_every_field", returns=every, output="replace")
    lost = "field 'referrer' of stage 'parse' does not reach the target: stage 'enrich' leaves it out"
    assert f"warning: {lost}" in project.command("validate", config)

    ran = project.command("run", config)
    assert lost in ran and re.search(r"ok -> target +0\n", ran)
    project.assert_every_record_in_one_place()
    messages = {r.offset: (r.stage, r.error_class, r.message) for r in project.table("quarantine").collect()}
    missing = ("enrich", "MissingResultField", "the function's result has no 'event_id', 'ts', 'user_id', 'page', "
               "'device', 'tags' (returns: declares them; return None for a NULL, or set missing_fields: as_null)")
    assert [messages[o] for o in range(4)] == [missing] * 4
    assert messages[4][1] == "MalformedJson"
