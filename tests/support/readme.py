"""The README's runnable blocks, by key: one reader for every test that runs them.

Every fenced ``bash``, ``sql`` and ``python`` block of ``README.md`` follows a marker line::

    <!-- run: KEY by PATH[, PATH ...] -->

``KEY`` names the block; each ``PATH`` is a test file that runs it (and says so by calling
:func:`block` with ``KEY``) or ``.ci/run``, for the commands CI itself runs.
``tests/unit/test_readme_blocks.py`` holds the README to this: a block without a marker,
a key used twice, or a test file that does not read its block fails there. The markers
are HTML comments, so GitHub and the Databricks workspace do not show them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
#: The languages whose blocks are run (yaml/json blocks are configs, checked by the config tests).
RUNNABLE = ("bash", "sql", "python")
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!-- run: (?P<key>[\w-]+) by (?P<by>[^>]+?) -->\n$")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README.

    Attributes:
        key: the marker's key ("" when the block has no marker).
        lang: the fence's language.
        body: the text between the fences.
        line: the 1-based line of the opening fence.
        by: the paths the marker names (test files, or ``.ci/run``).
    """

    key: str
    lang: str
    body: str
    line: int
    by: tuple[str, ...]

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


def all_blocks(text: str | None = None) -> list[Block]:
    """Every fenced block with a language, in order, with its marker (if any)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()]
        marker = _MARKER.search(before[before.rfind("\n", 0, len(before) - 1) + 1:])
        key, by = (marker["key"], tuple(p.strip() for p in marker["by"].split(","))) if marker else ("", ())
        found.append(Block(key, m.group(1), m.group(2), before.count("\n") + 1, by))
    return found


def block(key: str) -> Block:
    """The README block marked ``key``; fails naming the key when there is none."""
    matches = [b for b in all_blocks() if b.key == key]
    assert len(matches) == 1, f"README.md has {len(matches)} blocks marked {key!r}"
    return matches[0]
