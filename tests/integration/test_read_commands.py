"""The read commands over catalog tables (Spark answers): each loads its config once and leaves no view behind.

A command's config is loaded by the command, once, whichever engine then answers: the
engine is picked from the loaded config (:func:`quarantine.ops.reads.answer`), never by
loading it again. The loads are counted at :func:`quarantine.config.load.parse_config`,
through which every load goes. Spark registers the tables as the temporary views
``quarantine`` and ``metrics`` for the reads' SQL; a command drops them when it is done, so a
session a command ran in (a notebook's, a test's) keeps no view shadowing a table of its own.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from quarantine.cli import main
from quarantine.config import load as config_load
from quarantine.ops.duck import ENGINE_ENV
from tests.helpers import orders_config
from tests.support.crash import write_conf
from tests.support.two_engines import PIPELINE, write_tables

#: Each read command's arguments after ``--conf FILE`` (``sql`` NAME before it).
READS: list[list[str]] = [
    ["inspect"],
    ["inspect", "--status", "all", "--json"],
    ["stats"],
    ["sql", "top_errors"],
    ["sql", "error_rate", "--json"],
    ["report", "--out", "{out}"],
    ["views", "--print"],
    ["replay", "--dry-run", "--where", "stage = 'nothing'"],
]


@pytest.fixture
def catalog_conf(spark: Any, table_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config whose quarantine and metrics tables are catalog names (Spark answers every read)."""
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    paths = write_tables(spark, table_dir, replayed=False)
    suffix = uuid.uuid4().hex[:8]
    names = {role: f"default.{role}_{suffix}" for role in paths}
    for role, name in names.items():
        spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{paths[role]}'")
    raw = orders_config(table_dir, pipeline=PIPELINE, **{"deadletterqueue.table.name": names["quarantine"]})
    return write_conf({**raw, "metrics": {"table": names["metrics"]}}, table_dir / "p.yml")


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c))
def test_a_read_command_loads_its_config_once_and_leaves_no_view_behind(
    spark: Any, catalog_conf: Path, table_dir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], command: list[str],
) -> None:
    loads: list[object] = []
    parse = config_load.parse_config

    def counted(*args: Any, **kwargs: Any) -> Any:
        loads.append(args)
        return parse(*args, **kwargs)

    monkeypatch.setattr(config_load, "parse_config", counted)
    at = 2 if command[0] == "sql" else 1
    args = [a.replace("{out}", str(table_dir / "r.html")) for a in [*command[:at], "--conf", str(catalog_conf),
                                                                       *command[at:]]]
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert len(loads) == 1, f"quarantine {' '.join(command)} loaded its config {len(loads)} times"
    views = {r["viewName"] for r in spark.sql("SHOW VIEWS").collect() if r["isTemporary"]}
    assert not {"quarantine", "metrics"} & views, views
