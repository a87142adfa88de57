"""The README's table of contents, from its headings (## and ###), between the TOC markers.

``python scripts/readme_toc.py`` rewrites it in place; ``--check`` exits 1 when it is stale
(tests/unit/test_readme_toc.py runs the check, so a new section cannot be left out).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- toc -->", "<!-- /toc -->"


def anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def toc(markdown: str) -> str:
    lines, fenced, seen = [], False, {}
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^(##|###) (.+)$", line)
        if not m:
            continue
        title = m.group(2).strip()
        base = anchor(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        link = base if n == 0 else f"{base}-{n}"
        indent = "" if m.group(1) == "##" else "  "
        lines.append(f"{indent}- [{title.replace('`', '')}](#{link})")
    return "\n".join(lines)


def render(markdown: str) -> str:
    head, rest = markdown.split(START, 1)
    _, tail = rest.split(END, 1)
    body = tail  # headings come after the TOC
    return f"{head}{START}\n{toc(body)}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("README.md's table of contents is stale: run python scripts/readme_toc.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
