"""The manual's blocks (``README.md`` and every page under ``docs/``), by key: one reader
for every test that runs them.

Every fenced ``bash``, ``sql``, ``python``, ``yaml`` and ``json`` block of the manual follows
a marker line, one of::

    <!-- run: KEY by PATH[, PATH ...] -->
    <!-- illustration: WHY -->

``KEY`` names the block (unique across the manual); each ``PATH`` is a test file that runs
it (and says so by calling :func:`block` with ``KEY``) or ``.ci/run``, for the commands CI
itself runs. An illustration is a block no test can run as written (a fragment of a file
the reader's own project holds, an editor setting); ``WHY`` says why, and
``tests/unit/test_readme_blocks.py`` lists every one of them, so a new one is a decision.
That test holds the manual to its markers: a block without one, a key used twice, or a test
file that does not read its block fails there. The markers are HTML comments, so GitHub,
MkDocs and the Databricks workspace do not show them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
#: The languages whose blocks are run, or marked as illustrations.
RUNNABLE = ("bash", "sql", "python", "yaml", "json")
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!-- (?:run: (?P<key>[\w-]+) by (?P<by>[^>]+?)|illustration: (?P<why>[^>]+?)) -->\n$")


def manual_files() -> list[Path]:
    """The manual's files: the README, then every page of ``docs/`` in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def manual_text() -> str:
    """The whole manual as one text (for a test that looks for a sentence wherever it is)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in manual_files())


@dataclass(frozen=True)
class Block:
    """One fenced block of the README.

    Attributes:
        key: the marker's key ("" when the block has no marker).
        lang: the fence's language.
        body: the text between the fences.
        line: the 1-based line of the opening fence.
        by: the paths the marker names (test files, or ``.ci/run``).
        path: the file, relative to the repository (``README.md``, ``docs/…``).
        illustration: the marker's reason when the block is marked as an illustration.
    """

    key: str
    lang: str
    body: str
    line: int
    by: tuple[str, ...]
    path: str = "README.md"
    illustration: str = ""

    def where(self) -> str:
        """``path:line``, for messages."""
        return f"{self.path}:{self.line}"

    def lines(self) -> list[str]:
        """The block's non-empty lines, comments (``#`` or ``--`` lines) left out, trailing
        comments kept (a shell strips them)."""
        return [ln for ln in self.body.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "--"))]

    def commands(self, prog: str = "quarantine") -> list[list[str]]:
        """The lines that run ``prog``, split as a shell would (trailing ``#`` comments dropped)."""
        return [shlex.split(ln, comments=True) for ln in self.lines() if ln.split()[0] == prog]

    def statements(self) -> list[str]:
        """A SQL block's statements: split at ``;``, ``--`` comments removed, empty ones dropped."""
        parts = (re.sub(r"--[^\n]*", "", part).strip() for part in self.body.split(";"))
        return [p for p in parts if p]


def all_blocks(text: str | None = None, path: str = "README.md") -> list[Block]:
    """Every fenced block with a language, in order, with its marker (if any): of ``text``
    (named ``path``) when given, else of the whole manual."""
    if text is None:
        return [b for f in manual_files()
                for b in all_blocks(f.read_text(encoding="utf-8"), f.relative_to(REPO).as_posix())]
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()]
        marker = _MARKER.search(before[before.rfind("\n", 0, len(before) - 1) + 1:])
        key = (marker["key"] or "") if marker else ""
        by = tuple(p.strip() for p in marker["by"].split(",")) if marker and marker["by"] else ()
        why = (marker["why"] or "") if marker else ""
        found.append(Block(key, m.group(1), m.group(2), before.count("\n") + 1, by, path, why))
    return found


def block(key: str) -> Block:
    """The manual's block marked ``key``; fails naming the key when there is none."""
    matches = [b for b in all_blocks() if b.key == key]
    assert len(matches) == 1, f"the manual (README.md, docs/) has {len(matches)} blocks marked {key!r}"
    return matches[0]
