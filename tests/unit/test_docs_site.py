"""The manual is a MkDocs site that builds strictly, and the README is its front door (issue 37).

``make docs`` builds ``docs/`` with ``mkdocs build --strict``: a broken link, an anchor that is
not there, a page left out of the nav or a nav entry without a page fails the build, and so
fails here. The README stays short and links every page of the nav.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _nav_pages() -> list[str]:
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in walk(v)]
        if isinstance(node, list):
            return [p for v in node for p in walk(v)]
        return []

    return walk(yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^docs: .*\n\t\.venv/bin/mkdocs build --strict", makefile, re.M), "make docs"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "guarantees" / "index.html").is_file()


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    pages = sorted(p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert sorted(_nav_pages()) == pages


def test_the_readme_is_a_front_door_that_links_every_page() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    linked = set(re.findall(r"\]\(docs/([\w/-]+\.md)", text))
    assert linked >= set(_nav_pages()) - {"index.md"}, sorted(set(_nav_pages()) - linked)


def test_getting_started_lists_every_extra_of_the_package() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    page = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)` \|", page, re.M)
    assert sorted(listed) == sorted(extras), (listed, list(extras))
