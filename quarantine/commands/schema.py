"""``quarantine schema``: the JSON Schema of a pipeline config, for editors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quarantine.commands.invocation import Command, Invocation

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None, metavar="FILE", help="write it to FILE instead of printing it")


def _handle(call: Invocation) -> int:
    """Print the config's JSON Schema, or write it to ``--out`` (its folders created)."""
    from quarantine.config import schema_text

    text = schema_text()
    if call.args.out is None:
        sys.stdout.write(text)
        return 0
    target = Path(call.args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote the config's JSON Schema to {target}")
    return 0


COMMAND = Command(
    help="print (or write) the JSON Schema of a pipeline config, for editors",
    examples=("quarantine schema --out .vscode/quarantine.schema.json",),
    arguments=_arguments,
    handle=_handle,
)
