"""The manual's Layout section (docs/contributing.md) names every module of the package, and only modules that exist.

Issue 11 asks that a reader can follow one record through the files in order and that the
layout the manual gives matches the code: a module added without a line there, or a line
left behind by a module that went, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "quarantine"


def _layout() -> str:
    text = (REPO / "docs" / "contributing.md").read_text(encoding="utf-8")
    start = text.index("\n## Layout\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _modules() -> set[str]:
    """Every module of the package, as a path under ``quarantine/`` (``__init__`` files aside)."""
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


def _named(layout: str) -> set[str]:
    """The module paths the layout names: ``a/b.py`` as written, a bare ``b.py`` in the folder of the
    line's first path (``stages/decode.py, json.py`` names ``stages/json.py``)."""
    named: set[str] = set()
    for line in layout.splitlines():
        folder = ""
        for word in re.findall(r"[\w/]+\.py\b", line):
            word = word.removeprefix("quarantine/")
            if "/" in word:
                folder = word.rsplit("/", 1)[0] + "/"
                named.add(word)
            else:
                named.add(folder + word if (PACKAGE / (folder + word)).exists() else word)
    return named


def test_the_layout_names_every_module_of_the_package() -> None:
    missing = _modules() - _named(_layout())
    assert not missing, f"docs/contributing.md Layout does not name: {sorted(missing)}"


def test_every_module_the_layout_names_exists() -> None:
    gone = {m for m in _named(_layout()) if not (PACKAGE / m).exists()}
    assert not gone, f"docs/contributing.md Layout names modules that do not exist: {sorted(gone)}"
