"""The operator's loop from the shell, as the README's walkthrough writes it (issue 13, done-when).

The README's walkthrough block is read and run command by command, in order, through the
``quarantine`` entry point (in this process, on the test session), in a scratch folder
(``demo`` relative to it, the demo folder every page uses); the two comment lines that say what to edit are the edits
this test makes (the bug, then the fix). The only change to the README's commands: the
sample is 800 records instead of 10,000. After each step, the tables are checked:

run (a stage with a bug) -> inspect and stats show its records -> the fix -> replay
--dry-run says they would pass and writes nothing -> replay: target complete, rows
``replayed`` -> a second replay is a no-op -> maintain strips nothing open -> report
renders in headless Chromium without errors. The README's SQL runs too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from quarantine.cli import main
from quarantine.config import load_config
from quarantine.ops.report_page import FIGURES
from quarantine.tables import table_version
from tests.e2e.conftest import open_page
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
RECORDS = 800


def _walkthrough() -> tuple[list[str], str]:
    """The walkthrough's lines, its two comments included (the edits), and its one SQL statement."""
    walk = block("walkthrough")
    lines = walk.body.strip().splitlines()
    # every line but the two comments is a quarantine command
    assert [shlex.split(ln) for ln in lines if not ln.startswith("#")] == walk.commands()
    (sql,) = block("walkthrough-sql").statements()
    return lines, sql


def _amount_max(conf: Path, value: int) -> None:
    raw = yaml.safe_load(conf.read_text())
    (check,) = [s for s in raw["stages"] if s["name"] == "check_order"]
    (rule,) = [r for r in check["options"]["rules"] if r["column"] == "amount" and r["check"] == "range"]
    rule["max"] = value
    conf.write_text(yaml.safe_dump(raw, sort_keys=False))


def test_the_readme_walkthrough_runs_the_whole_loop(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    browser_page: tuple[Any, list[str]],
) -> None:
    monkeypatch.chdir(tmp_path)
    lines, sql = _walkthrough()
    conf = tmp_path / "demo" / "orders_demo.yml"
    outputs: list[tuple[list[str], str]] = []
    for line in lines:
        if line.startswith("# make a bug:"):
            assert "max: 100" in line
            _amount_max(conf, 100)
            continue
        if line.startswith("# the fix:"):
            assert "max: 10000" in line
            _amount_max(conf, 10000)
            continue
        argv = shlex.split(line)
        assert argv[0] == "quarantine", line
        args = argv[1:]
        if args[0] == "init-demo":
            args += ["--records", str(RECORDS), "--poison-rate", "0.1"]
        before = _versions(spark, conf) if "--dry-run" in args else None
        capsys.readouterr()
        assert main(args) == 0, line
        out = capsys.readouterr().out
        if before is not None:
            assert _versions(spark, conf) == before, "a dry run wrote"
        outputs.append((args, out))
        _check(spark, conf, args, out, outputs)

    config = load_config(conf)
    rows = spark.sql(sql.replace("/abs/path/demo/quarantine", config.errors.dlq_table_name)).collect()
    assert {(r["stage"], r["error_class"], r["status"]) for r in rows} >= {("check_order", "range", "replayed")}
    assert sum(r["records"] for r in rows) == spark.read.format("delta").load(config.errors.dlq_table_name).count()

    page, problems = browser_page
    open_page(page, tmp_path / "demo" / "report.html")
    for fig, _ in FIGURES:
        page.wait_for_selector(f"#chart-{fig} .main-svg g.trace", state="attached", timeout=30_000)
    assert problems == []


def _versions(spark: Any, conf: Path) -> tuple[int, int]:
    config = load_config(conf)
    return table_version(spark, config.errors.dlq_table_name), table_version(spark, config.target.table)


#: what the first run quarantined at check_order for the bug (amount > 100, within 10000)
_state: dict[str, int] = {}


def _check(spark: Any, conf: Path, args: list[str], out: str, outputs: list[tuple[list[str], str]]) -> None:
    config = load_config(conf)
    q = spark.read.format("delta").load(config.errors.dlq_table_name) if args[0] != "init-demo" else None
    command = args[0]
    if command == "run":
        assert f"next: quarantine inspect --conf {args[2]}" in out
        victims = q.where("stage = 'check_order' AND error_class = 'range'").count()  # type: ignore[union-attr]
        assert victims > 20, out  # the bug's victims, next to the demo's negative amounts
        _state["range"] = victims
        _state["target"] = spark.read.format("delta").load(config.target.table).count()
    elif command == "inspect":
        assert "check_order" in out and "range" in out and "parse_order" not in out
        assert re.search(r"found -?\d", out), out  # a cut message still shows the amount it found
    elif command == "stats":
        assert "check_order" in out and "range" in out
    elif command == "replay" and "--dry-run" in args:
        m = re.search(r"(\d[\d,]*) open record\(s\) selected:.*?through the current stages: (\d[\d,]*) would be "
                      r"replayed", out, re.S)
        assert m, out
        assert re.search(r"check_order / range: .*found -?\d", out), out  # the example keeps what it found
        # the docs' list of what still fails after the fix: the demo's own poison, and the suite after it
        assert re.search(r"check_order / in_set: field 'currency'.*found \"XXX\"", out), out
        assert re.search(r"expect_order / expect_", out), out
        _state["would_pass"] = int(m.group(2).replace(",", ""))
        assert 0 < _state["would_pass"] < int(m.group(1).replace(",", "")), out  # negative amounts still fail
    elif command == "replay":
        replays = [o for a, o in outputs if a[0] == "replay" and "--dry-run" not in a]
        m = re.search(r"(\d[\d,]*) replayed to the target", out)
        assert m, out
        target = spark.read.format("delta").load(config.target.table).count()
        if len(replays) == 1:
            assert int(m.group(1).replace(",", "")) == _state["would_pass"]
            assert target == _state["target"] + _state["would_pass"]
            assert q.where("status = 'replayed'").count() == _state["would_pass"]  # type: ignore[union-attr]
        else:  # the second replay: it re-runs only what still fails, and nothing more passes
            assert int(m.group(1).replace(",", "")) == 0 and target == _state["target"] + _state["would_pass"]
            _state["open"] = q.where("status = 'open'").count()  # type: ignore[union-attr]
            still = q.where("stage = 'check_order' AND status = 'open'")  # type: ignore[union-attr]
            # the run, the first replay and this one: each failed them (docs: "error_count grows by one")
            assert {r[0] for r in still.select("error_count").distinct().collect()} == {3}, out
    elif command == "maintain":
        assert q.where("status = 'open'").count() == _state["open"]  # type: ignore[union-attr]
        assert q.where("status = 'replayed'").count() == _state["would_pass"]  # type: ignore[union-attr]
    elif command == "report":
        assert (Path.cwd() / "demo" / "report.html").stat().st_size > 100_000
        # the source's records, not the replays' selections too; under tolerance: all no error limit breaks
        m = re.search(r"\n  records\s+([\d,]+)   \(", out)
        assert m and int(m.group(1).replace(",", "")) == RECORDS, out  # each record once: target + held
        m = re.search(r"\n  reads\s+([\d,]+)   \(", out)
        assert m and int(m.group(1).replace(",", "")) == RECORDS, out
        assert re.search(r"breaches\s+[\d,]+ in [\d,]+ run\(s\): error limits 0, expectations", out), out
