"""Every test the manual names exists: a claim in the README or docs/ cites its test by name.

The manual backs its sentences with test names in backticks: ``tests/e2e/test_x.py::test_y``,
``test_x.py::test_y``, ``::test_y`` (in the file named last before it), a bare ``test_y``
(a test function somewhere under tests/) or a bare module name ``test_x``. A renamed or
deleted test leaves a citation that backs nothing; this test fails on it, naming the document
and the citation.
"""

from __future__ import annotations

import re
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
_CITATION = re.compile(r"`([\w/]*\.py)?(::)?(test_\w+)?`")
_DEF = re.compile(r"^\s*(?:async\s+)?def (test_\w+)", re.M)


def _tests() -> dict[Path, set[str]]:
    return {f: set(_DEF.findall(f.read_text())) for f in (_REPO / "tests").rglob("test_*.py")}


def _broken(text: str, tests: dict[Path, set[str]]) -> list[str]:
    """The citations in ``text`` that name no test (module, file or function)."""
    every = set().union(*tests.values())
    modules = {f.stem for f in tests}
    broken: list[str] = []
    last: list[Path] = []
    for m in _CITATION.finditer(text):
        path, sep, name = m.groups()
        if path and Path(path).name.startswith("test_"):
            last = [f for f in tests if f.as_posix().endswith("/" + path)]
            if not last or (name and not any(name in tests[f] for f in last)):
                broken.append(m.group(0))
        elif sep and name:
            if not any(name in tests[f] for f in last):
                broken.append(m.group(0))
        elif name and not path and name not in every and name not in modules:
            broken.append(m.group(0))
    return broken


def test_every_test_the_manual_cites_exists() -> None:
    tests = _tests()
    docs = [_REPO / "README.md", *sorted((_REPO / "docs").rglob("*.md"))]
    broken = {d.relative_to(_REPO).as_posix(): _broken(d.read_text(), tests) for d in docs}
    assert {d: b for d, b in broken.items() if b} == {}


def test_a_renamed_test_is_found_in_each_citation_form() -> None:
    tests = _tests()
    real = next(f for f in tests if f.name == "test_docs_test_references.py")
    rel = real.relative_to(_REPO).as_posix()
    good = f"`{rel}::test_every_test_the_manual_cites_exists`, `::test_a_renamed_test_is_found_in_each_citation_form`"
    assert _broken(good, tests) == []
    assert _broken("`test_docs_test_references`, `test_every_test_the_manual_cites_exists`", tests) == []
    bad = f"`{rel}::test_gone`, `::test_also_gone`, `test_nowhere_at_all`, `tests/unit/test_missing.py`"
    assert _broken(bad, tests) == [
        f"`{rel}::test_gone`", "`::test_also_gone`", "`test_nowhere_at_all`", "`tests/unit/test_missing.py`"
    ]
