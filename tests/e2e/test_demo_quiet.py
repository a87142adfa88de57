"""A demo run without ``--verbose`` prints the project's own lines only (issue 37, section 3).

The Makefile's ``demo`` commands, then ``maintain``, each a ``quarantine`` process as a
user runs it (no ``QUARANTINE_SPARK_LOG_LEVEL``, which the test session sets), in a
folder holding a copy of ``conf/``; the one change is a smaller sample (``--records``).
Every line of their stdout and stderr is counted: each must be the command's own output
(stdout) or a line of a ``quarantine.*`` logger (stderr); Spark's start-up lines,
MLflow's, Great Expectations' and Delta's are not, and the demo's per-record
error-context lines (``errors.log.enable``) are summarised.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_demo_cli import _make_demo_commands

REPO = Path(__file__).resolve().parents[2]
RECORDS = 400

#: A line of a ``quarantine.*`` logger in the CLI's format (``quarantine.cli``).
OWN_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:INFO|WARNING|ERROR) quarantine(?:\.\w+)*: ")
#: Lines the issue counted that are not the project's: the JVM's, Spark's (log4j), MLflow's,
#: Great Expectations', Delta's VACUUM, another logger's.
FOREIGN = re.compile(
    r"^WARNING: Using incubator modules|^Using Spark's default log4j profile|^Setting default log level"
    r"|^To adjust logging level|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:WARN|INFO|ERROR) |^Deleted \d+ files"
    r"|Creating initial MLflow database tables|Updating database tables|Created temporary directory"
    r"|^\d{4}[-/]\d\d[-/]\d\d \d\d:\d\d:\d\d,?\d* (?:DEBUG|INFO|WARNING|ERROR) (?!quarantine\b)"
)


def _quarantine(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "QUARANTINE_SPARK_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-m", "quarantine", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False, timeout=900)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.timeout(1200)
def test_a_demo_run_without_verbose_prints_only_the_projects_own_lines(tmp_path: Path) -> None:
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    init, run_demo = _make_demo_commands()
    conf = run_demo[run_demo.index("--conf") + 1]
    runs = [
        _quarantine([*init, "--records", str(RECORDS), "--poison-rate", "0.1"], tmp_path),
        _quarantine(run_demo, tmp_path),
        _quarantine(["maintain", "--conf", conf], tmp_path),
    ]
    out = [line for p in runs for line in p.stdout.splitlines()]
    err = [line for p in runs for line in p.stderr.splitlines()]
    foreign = [line for line in out if FOREIGN.search(line)] + [line for line in err if not OWN_LOG_LINE.match(line)]
    print(f"{len(out) + len(err)} lines: {len(out)} on stdout, {len(err)} on stderr, {len(foreign)} not the project's")
    assert foreign == []
    # the per-record error-context lines are summarised: how many, by stage and class, where to look
    assert not [line for line in err if "error context [" in line]
    ran = runs[1].stdout
    assert re.search(r"^error context: \d+ of \d+ failed records logged on quarantine\.errors", ran, re.M), ran
    assert f"quarantine inspect --conf {conf}" in ran
    assert len(out) + len(err) <= 40
