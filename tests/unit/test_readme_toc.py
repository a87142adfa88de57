"""The README is the user's manual: its table of contents lists every section, and every
link inside it lands on a heading (scripts/readme_toc.py writes the table of contents)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from readme_toc import anchor, render  # noqa: E402


def test_the_table_of_contents_lists_every_section() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert render(text) == text, "stale: run python scripts/readme_toc.py"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "readme_toc.py"), "--check"], check=False)
    assert proc.returncode == 0


def test_every_link_inside_the_readme_lands_on_a_heading() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    headings = {anchor(m.group(2)) for m in re.finditer(r"^(#{1,4}) (.+)$", text, re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links and links <= headings | {f"{h}-1" for h in headings}, sorted(links - headings)


def test_a_stale_table_of_contents_is_found() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8") + "\n## A section nobody listed\n"
    assert render(text) != text
    assert "- [A section nobody listed](#a-section-nobody-listed)" in render(text)
