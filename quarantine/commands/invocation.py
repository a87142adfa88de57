"""A command as its module declares it, and one parsed command as its handler gets it.

Imports no more than argparse: :mod:`quarantine.cli` builds every command's parser from
these declarations for ``--help`` too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

__all__ = ["Command", "Invocation"]


@dataclass
class Invocation:
    """A command being run: what :mod:`quarantine.cli` parsed, and what its handler learned on the way.

    Attributes:
        args: the parsed command line (``args.command`` names the command).
        parser: the command's own parser (its usage, for :meth:`usage_error`).
        tables: the config's tables by role (``target``, ``quarantine``, ``metrics`` when set),
            noted when the handler loads its config (:func:`quarantine.commands.configured.load`):
            what the command line names when a storage fault ends the command
            (:func:`quarantine.errors.describe_failure`); empty until then.
    """

    args: argparse.Namespace
    parser: argparse.ArgumentParser | None = None
    tables: dict[str, str] = field(default_factory=dict)

    def usage_error(self, message: str) -> NoReturn:
        """End the command as argparse ends a bad command line: its usage and ``message``, exit code 2."""
        if self.parser is None:
            raise SystemExit(f"quarantine: error: {message}")
        self.parser.error(message)


@dataclass(frozen=True)
class Command:
    """One ``quarantine`` command, declared by its module as ``COMMAND`` (:data:`quarantine.cli.COMMANDS`).

    A command module imports at its top only what this declaration needs (argparse, the
    shared options): ``quarantine --help`` imports every command module. Its handler imports
    what the command runs when it runs, so no command pays for another's engine.

    Attributes:
        help: what it does, in one line (``--help``'s list; the command's description).
        examples: command lines its ``--help`` shows; the first is in ``quarantine --help``'s too.
        arguments: adds the command's options to its parser.
        handle: runs the command; its exit code (a failure raises: the CLI maps it to a code).
    """

    help: str
    examples: tuple[str, ...]
    arguments: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[Invocation], int]
