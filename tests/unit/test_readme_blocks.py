"""Every command, SQL statement, config and code block of the manual is run by a test
(issue 12, item 6; issue 37: the README and every page of ``docs/``).

Each ``bash``, ``sql``, ``python``, ``yaml`` and ``json`` block carries a marker naming its
key and the tests that run it, or says it is an illustration and why
(``tests/support/readme.py``). Here, without running anything, the manual is held to its
markers: a new block without one, a marker whose test file does not read that block by its
key, a ``.ci/run`` marker on commands CI does not run, or an illustration not listed below
fails. The tests named do the running; each reads its block through ``readme.block(KEY)``,
so a block edited in the manual is the block they run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.support import readme
from tests.support.readme import RUNNABLE, Block, all_blocks

REPO = Path(__file__).resolve().parents[2]

#: Blocks a test checks but cannot run on the CI machine, and why. Nothing else may be here.
CHECKED_NOT_RUN = {
    "databricks": "the Databricks CLI and a workspace do not exist on the CI machine; "
                  "test_bundle checks every job, target, variable, parameter and secret the commands name",
}


#: The blocks no test can run as written, by where they are: each a decision, listed here.
ILLUSTRATIONS = {
    ("docs/configuration.md", "yaml"): "the first lines of a config, whose comment an editor reads",
    ("docs/configuration.md", "json"): "a VS Code setting",
}


def _runnable() -> list[Block]:
    return [b for b in all_blocks() if b.lang in RUNNABLE and not b.illustration]


def test_every_block_has_a_marker_with_a_unique_key() -> None:
    blocks = [b for b in all_blocks() if b.lang in RUNNABLE]
    assert len(blocks) >= 34
    unmarked = [f"{b.where()} ({b.lang})" for b in blocks if not b.key and not b.illustration]
    assert not unmarked, f"blocks without '<!-- run: KEY by TEST -->' or '<!-- illustration: WHY -->': {unmarked}"
    keys = [b.key for b in blocks if b.key]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert {b.path for b in blocks} > {"README.md"}, "the pages of docs/ are read too"


#: The generated reference's examples (docs/reference/): each is loaded through the config
#: loader by the test that generates the pages, not by key (there is one per key and option).
GENERATED = "generated reference example, loaded by tests/unit/test_config_reference.py"


def test_the_illustrations_are_the_listed_ones() -> None:
    generated = [b for b in all_blocks() if b.illustration == GENERATED]
    assert generated and all(b.path.startswith("docs/reference/") and b.lang == "yaml" for b in generated)
    assert "parse_config" in (REPO / "tests" / "unit" / "test_config_reference.py").read_text(encoding="utf-8")
    marked = sorted((b.path, b.lang) for b in all_blocks() if b.illustration and b.illustration != GENERATED)
    assert marked == sorted(ILLUSTRATIONS), "a new illustration is a decision: list it in ILLUSTRATIONS, or run it"


def test_an_illustration_marker_is_read() -> None:
    text = "<!-- illustration: an editor setting -->\n```json\n{}\n```\n"
    (b,) = all_blocks(text, "docs/x.md")
    assert (b.key, b.illustration, b.where()) == ("", "an editor setting", "docs/x.md:2")


@pytest.mark.parametrize("block", _runnable(), ids=lambda b: b.key or b.where())
def test_each_block_is_read_by_the_tests_its_marker_names(block: Block) -> None:
    assert block.by, block
    for path in block.by:
        if path == ".ci/run":
            continue  # checked below
        test_file = REPO / path
        assert test_file.is_file() and path.startswith("tests/"), f"{block.key}: no test file {path}"
        source = test_file.read_text(encoding="utf-8")
        # it reads the block by its key: block("KEY"), or the key as a literal handed to block()
        assert "block(" in source and f'"{block.key}"' in source, f"{path} does not read the README block {block.key!r}"
        if block.key in CHECKED_NOT_RUN:
            continue
        # the test file runs what it reads: a quarantine command through the CLI, SQL through
        # spark.sql, python through exec, other commands as processes
        if block.lang == "sql":
            assert ".statements()" in source, path
        elif block.lang == "python":  # run in this process, or written as the file a process runs
            assert "exec(" in source or ".write_text(block(" in source, path
        elif block.lang in ("yaml", "json"):
            assert "load_config" in source or "_validate(" in source or "yaml.safe_load" in source, path
        else:
            assert ".commands(" in source or ".lines()" in source, path


def test_ci_markers_name_commands_ci_runs() -> None:
    """``.ci/run`` runs ``make test`` and ``make test-matrix``; ``make test`` runs every file
    under ``tests/``: so a ``.ci/run`` block is a make target CI calls or a pytest run of
    test files that exist."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_commands = {ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.startswith("#")}
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    prerequisites = dict(re.findall(r"^([\w-]+):(.*)$", makefile, re.M))
    # the make targets CI runs, and those they depend on (make test-matrix: setup-matrix)
    ci_targets = {c.split()[1] for c in ci_commands if c.startswith("make ")}
    ci_targets |= {d for t in ci_targets for d in prerequisites[t].split()}
    checked = 0
    for block in _runnable():
        if ".ci/run" not in block.by:
            continue
        for line in block.lines():
            argv = shlex.split(line, comments=True)
            if argv[0] == "make":
                target = argv[1]
                assert target in prerequisites, target
                assert target in ci_targets or block.key == "two-commands", line  # make demo: test_demo_cli
            else:
                assert argv[:3] == [".venv/bin/python", "-m", "pytest"], line
                files = [a for a in argv[3:] if not a.startswith("-")]
                assert files and all((REPO / f).is_file() and f.startswith("tests/") for f in files), files
            checked += 1
    assert checked >= 5


def test_make_demo_is_run_by_the_demo_test_and_make_test_by_ci() -> None:
    (demo, test) = readme.block("two-commands").commands("make")
    assert demo == ["make", "demo"] and test == ["make", "test"]
    assert "make test\n" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_a_block_without_a_marker_is_found() -> None:
    text = "intro\n\n<!-- run: a by tests/x.py -->\n```bash\nls\n```\n\n```sql\nSELECT 1\n```\n"
    first, second = all_blocks(text)
    assert (first.key, first.by, first.line) == ("a", ("tests/x.py",), 4)
    assert (second.key, second.lang, second.line) == ("", "sql", 8)


def test_statements_and_commands_are_split_as_sql_and_a_shell_would() -> None:
    sql = Block("k", "sql", "-- a comment\nSELECT 1; -- tail\n\nSELECT 'a;b'\n", 1, ())
    assert sql.statements() == ["SELECT 1", "SELECT 'a", "b'"]  # naive on purpose: README SQL has no ';' in literals
    sh = Block("k", "bash", "# c\nquarantine run --conf x.yml   # trailing\nls\n", 1, ())
    assert sh.commands() == [["quarantine", "run", "--conf", "x.yml"]]
    # so no README statement may be cut inside a literal: each has its quotes in pairs
    cut = [s for b in _runnable() if b.lang == "sql" for s in b.statements() if s.count("'") % 2]
    assert not cut, cut
