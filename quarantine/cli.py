"""The ``quarantine`` command line: ``quarantine --help`` lists the commands with examples.

Each command is a module of :mod:`quarantine.commands` that declares its help, examples,
arguments and handler (``COMMAND``, a :class:`~quarantine.commands.invocation.Command`);
:data:`COMMANDS` names the modules, one line each: a new command is a module and a line. This
module builds the parser from the declarations (argparse alone: the command modules import
no engine at their top, so ``--help`` and ``--version`` import none), maps what a command
raises to its exit code, and runs the handler, which imports what its command needs.

Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed);
2 bad usage or bad config (nothing was read or written); 3 an optional dependency the
command needs is not installed (the message says the ``pip install``); 4 a ``fail_on``
condition held after the run's writes committed (:mod:`quarantine.errorhandling.fail_on`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from quarantine.command_logging import configure_logging
from quarantine.commands.invocation import Command, Invocation
from quarantine.errors import ConditionFailedError, ConfigError, MissingDependencyError, QuarantineError, failure_reason
from quarantine.redaction import redact_text
from quarantine.secret_refs import resolved_secrets

__all__ = ["COMMANDS", "command", "console", "main"]

#: Each command and the module that declares it, in the order ``--help`` lists them: THE command table.
COMMANDS: dict[str, str] = {
    "run": "quarantine.commands.run",
    "validate": "quarantine.commands.validate",
    "replay": "quarantine.commands.replay",
    "discard": "quarantine.commands.discard",
    "forget": "quarantine.commands.forget",
    "rebuild-target": "quarantine.commands.rebuild_target",
    "maintain": "quarantine.commands.maintain",
    "report": "quarantine.commands.report",
    "init-demo": "quarantine.commands.init_demo",
    "metrics": "quarantine.commands.metrics",
    "schema": "quarantine.commands.schema",
    "inspect": "quarantine.commands.inspect",
    "stats": "quarantine.commands.stats",
    "sql": "quarantine.commands.sql",
    "connect-server": "quarantine.commands.connect_server",
    "views": "quarantine.commands.views",
}

_EXIT_CODES = (
    "Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed); "
    "2 bad usage or bad config (nothing was read or written); 3 an optional dependency is missing "
    "(the message says what to pip install); 4 a fail_on condition held (the run's writes are committed)."
)


def command(name: str) -> Command:
    """The declaration of the command ``name`` (its module's ``COMMAND``)."""
    declared: Command = importlib.import_module(COMMANDS[name]).COMMAND
    return declared


def _examples(lines: Sequence[str]) -> str:
    return "Examples:\n" + "\n".join(f"  {line}" for line in lines)


def _parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    return _parsers()[0]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command line's parser, and each command's own."""
    raw = argparse.RawDescriptionHelpFormatter
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                        help="show other projects' log lines too (MLflow's and Great Expectations' INFO, "
                             "Spark's WARN) and each error-context line")
    declared = {name: command(name) for name in COMMANDS}
    ap = argparse.ArgumentParser(
        prog="quarantine", formatter_class=raw, parents=[common],
        description="Error handling for Spark pipelines on Delta Lake: failed records go to a quarantine "
                    "table with their raw bytes, good rows to the target.",
        epilog=_examples([c.examples[0] for c in declared.values()]) + "\n\n" + _EXIT_CODES,
    )
    ap.add_argument("--version", action="version", version=f"quarantine (spark-quarantine) {_version()}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {}
    for name, c in declared.items():
        parsers[name] = sub.add_parser(name, help=c.help, description=c.help[0].upper() + c.help[1:] + ".",
                                       epilog=_examples(c.examples), formatter_class=raw, parents=[common])
        c.arguments(parsers[name])
    return ap, parsers


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spark-quarantine")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from quarantine import __version__

        return __version__


def console() -> None:
    """The ``quarantine`` command's entry point: :func:`main` over ``sys.argv``.

    Raises:
        SystemExit: with :func:`main`'s code when it is not 0. A Databricks
            ``python_wheel_task`` calls this function and ignores what it returns, so a
            failure must be raised for the task to fail.
    """
    code = main()
    if code:
        raise SystemExit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``quarantine`` command (``argv`` default ``sys.argv[1:]``); its exit code."""
    parser, parsers = _parsers()
    args = parser.parse_args(argv)
    tally = configure_logging(getattr(args, "verbose", False))
    _stop_retries_on_sigterm()
    try:
        return _command(Invocation(args, parsers[args.command]))
    finally:
        if tally is not None:
            for line in tally.summary(getattr(args, "conf", None)):
                print(line)


def _command(call: Invocation) -> int:
    """Run the parsed command through its handler; its exit code (see :func:`main`)."""
    try:
        return command(call.args.command).handle(call)
    except ConfigError as exc:
        print(f"quarantine: bad config: {exc}", file=sys.stderr)
        return 2
    except MissingDependencyError as exc:
        print(f"quarantine: missing dependency: {exc}", file=sys.stderr)
        return 3
    except ConditionFailedError as exc:
        print(f"quarantine: run failed: {_shown(failure_reason(exc))}", file=sys.stderr)
        return 4
    except QuarantineError as exc:
        print(f"quarantine: run failed: {_shown(failure_reason(exc))}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark/Delta/Py4J: one line for the user, the stack in the log
        logging.getLogger("quarantine").debug("run failed", exc_info=True)
        # a storage fault is said in words; Py4J's class name would say nothing more
        print(f"quarantine: run failed: {_shown(failure_reason(exc, call.tables))}", file=sys.stderr)
        return 1


def _shown(reason: str) -> str:
    """A failure's line as printed: redacted, also of the secrets this process read from a secret scope."""
    return redact_text(reason, resolved_secrets())


def _stop_retries_on_sigterm() -> None:
    """SIGTERM (a job cancelled, a container stopping) ends retries, then the run, cleanly.

    Retries — even ``errors.retry.timeout: -1`` — give up (:func:`quarantine.errorhandling.retry.stop_retries`)
    and the run stops with ``KeyboardInterrupt``: the batch in flight is not committed,
    listeners see the run end, and a restart resumes from the last committed batch.
    """
    import signal
    import threading

    from quarantine.errorhandling.retry import stop_retries

    def on_term(signum: int, frame: object) -> None:
        stop_retries()
        raise KeyboardInterrupt(f"signal {signum}: stopping")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)


if __name__ == "__main__":
    sys.exit(main())
