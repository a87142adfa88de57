"""One parsed command as its handler gets it: the arguments, and the tables a failure names.

Imports no more than argparse: :mod:`quarantine.cli` builds one for every command, ``--help`` too.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

__all__ = ["Invocation"]


@dataclass
class Invocation:
    """A command being run: what :mod:`quarantine.cli` parsed, and what its handler learned on the way.

    Attributes:
        args: the parsed command line (``args.command`` names the command).
        tables: the config's tables by role (``target``, ``quarantine``, ``metrics`` when set),
            noted when the handler loads its config (:func:`quarantine.commands.configured.load`):
            what the command line names when a storage fault ends the command
            (:func:`quarantine.errors.describe_failure`); empty until then.
    """

    args: argparse.Namespace
    tables: dict[str, str] = field(default_factory=dict)
