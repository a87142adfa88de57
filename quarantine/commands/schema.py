"""``quarantine schema``: the JSON Schema of a pipeline config, for editors."""

from __future__ import annotations

import sys
from pathlib import Path

from quarantine.commands.invocation import Invocation
from quarantine.config import schema_text

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Print the config's JSON Schema, or write it to ``--out`` (its folders created)."""
    text = schema_text()
    if call.args.out is None:
        sys.stdout.write(text)
        return 0
    target = Path(call.args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote the config's JSON Schema to {target}")
    return 0
