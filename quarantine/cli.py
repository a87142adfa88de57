"""The ``quarantine`` command line: ``quarantine --help`` lists the commands with examples.

This module parses (argparse alone: ``--help`` and ``--version`` import no engine), maps
what a command raises to its exit code, and hands the command to its handler, a module of
:mod:`quarantine.commands` imported only when that command runs (:data:`HANDLERS`, tried in order).

Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed);
2 bad usage or bad config (nothing was read or written); 3 an optional dependency the
command needs is not installed (the message says the ``pip install``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence

from quarantine.command_logging import configure_logging
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import overrides as _overrides  # noqa: F401  (as before: tests, jobs)
from quarantine.commands.options import parse_since
from quarantine.commands.options import predicate as _predicate  # noqa: F401  (as before: tests, jobs)
from quarantine.errors import ConfigError, MissingDependencyError, QuarantineError, describe_failure, storage_fault

__all__ = ["COMMANDS", "console", "main", "parse_since"]


#: Each command: its one-line help, then the examples ``--help`` shows (plain text).
_COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "run": ("run a pipeline from a YAML config", (
        "quarantine run --conf data/demo/orders_demo.yml",
        "quarantine run --conf conf/local.yml --set source.path=/data/orders_raw",
    )),
    "validate": ("load and check a config and its stages without starting Spark; write nothing", (
        "quarantine validate --conf data/demo/orders_demo.yml",
    )),
    "replay": ("re-run open quarantine rows through the current stages", (
        "quarantine replay --conf data/demo/orders_demo.yml",
        "quarantine replay --conf data/demo/orders_demo.yml --where \"stage = 'parse_order'\"",
        "quarantine replay --conf data/demo/orders_demo.yml --dry-run",
    )),
    "discard": ("mark open quarantine rows as discarded (kept, with the reason)", (
        "quarantine discard --conf data/demo/orders_demo.yml --where \"error_class = 'InvalidUtf8'\" "
        "--reason \"producer bug, resent\"",
        "quarantine discard --conf data/demo/orders_demo.yml --where \"stage = 'decode'\" --dry-run",
    )),
    "forget": ("erase the bytes and messages of the quarantine rows an erasure request names (identity kept)", (
        "quarantine forget --conf data/demo/orders_demo.yml --key customer-42 --dry-run",
        "quarantine forget --conf data/demo/orders_demo.yml --where \"offset IN (17, 18)\" "
        "--reason \"request 2026-113\" --purge",
    )),
    "rebuild-target": ("write a new target from the source and the quarantine table's replayed records", (
        "quarantine rebuild-target --conf data/demo/orders_demo.yml --dry-run",
        "quarantine rebuild-target --conf data/demo/orders_demo.yml",
    )),
    "maintain": ("strip old replayed/discarded quarantine rows of their bytes, then OPTIMIZE and VACUUM the table", (
        "quarantine maintain --conf data/demo/orders_demo.yml",
        "quarantine maintain --conf data/demo/orders_demo.yml --set errors.deadletterqueue.retention.days=90",
    )),
    "report": ("write a self-contained HTML report of a pipeline's quarantine and metrics (charts)", (
        "quarantine report --conf data/demo/orders_demo.yml --out report.html",
        "quarantine report --conf data/demo/orders_demo.yml --out report.html --since 2026-11-01",
    )),
    "init-demo": ("write a Kafka-shaped sample source (orders with poison records) and the demo's config", (
        "quarantine init-demo --out data/demo",
        "quarantine init-demo --table main.quarantine_demo.orders_raw --if-missing",
        "quarantine init-demo --format avro --out data/avro-demo",
        "quarantine init-demo --format protobuf --out data/protobuf-demo",
        "quarantine init-demo --format declarative --out pipelines/orders",
    )),
    "metrics": ("write a declarative pipeline's counts to its metrics table (after an update)", (
        "quarantine metrics --conf pipelines/orders/orders.yml",
    )),
    "schema": ("print (or write) the JSON Schema of a pipeline config, for editors", (
        "quarantine schema --out .vscode/quarantine.schema.json",
    )),
    "inspect": ("show quarantined records, payloads decoded (UTF-8, else hex)", (
        "quarantine inspect --conf data/demo/orders_demo.yml --stage parse_order --limit 5",
        "quarantine inspect --conf data/demo/orders_demo.yml --status all --since 24h --json",
    )),
    "stats": ("count quarantined records by status, stage and error class, and per topic partition", (
        "quarantine stats --conf data/demo/orders_demo.yml",
    )),
    "sql": ("run a query of the SQL library (without NAME: list them)", (
        "quarantine sql",
        "quarantine sql stuck_records --conf data/demo/orders_demo.yml --param hours=48 --param failures=2",
    )),
    "connect-server": ("start a local Spark Connect server with Delta (for spark-pipelines); Ctrl-C stops it", (
        "SPARK_CONNECT_AUTHENTICATE_TOKEN=$(openssl rand -hex 16) quarantine connect-server --port 15002",
    )),
    "views": ("create views over the quarantine table (<table>_open, <table>_summary, ...)", (
        "quarantine views --conf data/demo/orders_demo.yml --print",
        "quarantine views --conf conf/prod.yml",
    )),
}

#: The command names, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = tuple(_COMMANDS)

_EXIT_CODES = (
    "Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed); "
    "2 bad usage or bad config (nothing was read or written); 3 an optional dependency is missing "
    "(the message says what to pip install)."
)


def _examples(lines: Sequence[str]) -> str:
    return "Examples:\n" + "\n".join(f"  {line}" for line in lines)


def _parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                        help="show other projects' log lines too (MLflow's and Great Expectations' INFO, "
                             "Spark's WARN) and each error-context line")
    ap = argparse.ArgumentParser(
        prog="quarantine", formatter_class=raw, parents=[common],
        description="Error handling for Spark pipelines on Delta Lake: failed records go to a quarantine "
                    "table with their raw bytes, good rows to the target.",
        epilog=_examples([ex for _, examples in _COMMANDS.values() for ex in examples[:1]]) + "\n\n" + _EXIT_CODES,
    )
    ap.add_argument("--version", action="version", version=f"quarantine (spark-quarantine) {_version()}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str) -> argparse.ArgumentParser:
        summary, examples = _COMMANDS[name]
        return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                              epilog=_examples(examples), formatter_class=raw, parents=[common])

    run = command("run")
    run.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set source.path=/data/x (repeatable)")
    val = command("validate")
    val.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    val.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    rep = command("replay")
    rep.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    rep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    rep.add_argument("--where", default=None, help="SQL predicate over quarantine columns (empty: every open row)")
    rep.add_argument("--pipeline", default=None,
                     help="the pipeline the config must be (a guard for jobs that take the name as a parameter)")
    rep.add_argument("--dry-run", action="store_true", help="say what would be replayed and how; write nothing")
    dis = command("discard")
    dis.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    dis.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    dis.add_argument("--where", required=True, help="SQL predicate over quarantine columns")
    dis.add_argument("--reason", default=None, help="why, kept in the rows' resolution (not needed with --dry-run)")
    dis.add_argument("--dry-run", action="store_true", help="say what would be discarded; write nothing")
    fgt = command("forget")
    fgt.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    fgt.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    fgt.add_argument("--where", default=None, help="SQL predicate over quarantine columns (open or closed rows)")
    fgt.add_argument("--key", default=None, metavar="KEY",
                     help="only rows whose record key is KEY: its text, or hex:<hex digits> for its bytes")
    fgt.add_argument("--all", action="store_true",
                     help="every row of the pipeline, or a --where that matches them all (refused without it)")
    fgt.add_argument("--reason", default=None, help="kept in the resolution of the open rows it closes")
    fgt.add_argument("--dry-run", action="store_true", help="count the rows it would erase; write nothing")
    fgt.add_argument("--purge", action="store_true",
                     help="then REORG (deletion vectors) and VACUUM the table; say when the old bytes are gone")
    fgt.add_argument("--retain-hours", type=float, default=None, metavar="HOURS",
                     help="--purge's VACUUM retention (default: errors.deadletterqueue.vacuum.retention.hours); "
                          "below the table's only with spark.databricks.delta.retentionDurationCheck.enabled=false")
    fgt.add_argument("--pipeline", default=None, help="the pipeline the config must be (a guard for jobs)")
    reb = command("rebuild-target")
    reb.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    reb.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    reb.add_argument("--dry-run", action="store_true", help="say what a rebuild would do; write nothing")
    mnt = command("maintain")
    mnt.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    mnt.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    mnt.add_argument("--pipeline", default=None, help="the pipeline the config must be (a guard for jobs)")
    met = command("metrics")
    met.add_argument("--conf", required=True, help="the declarative pipeline's config (YAML), with metrics.table")
    met.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    rpt = command("report")
    rpt.add_argument("--conf", required=True, help="the pipeline config (YAML): its quarantine and metrics tables")
    rpt.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    rpt.add_argument("--out", required=True, metavar="FILE", help="the HTML file to write")
    rpt.add_argument("--since", default=None, metavar="DATE",
                     help="only records first seen (breaches, resolutions) at or after this ISO date/time (UTC)")
    demo = command("init-demo")
    demo.add_argument("--out", default="data/demo",
                      help="directory; the source goes to OUT/source, the config to OUT/orders_demo.yml")
    demo.add_argument("--records", type=int, default=10_000, help="how many records (default 10000)")
    demo.add_argument("--poison-rate", type=float, default=0.04, help="the fraction of poison records (0.04)")
    demo.add_argument("--seed", type=int, default=7, help="the random seed (7)")
    demo.add_argument("--table", default=None, metavar="CATALOG.SCHEMA.TABLE",
                      help="write the source as this catalog table instead (no config is written)")
    demo.add_argument("--if-missing", action="store_true", help="with --table: leave an existing table alone")
    demo.add_argument("--format", choices=("json", "avro", "protobuf", "declarative"), default="json",
                      help="json: UTF-8 JSON orders (default); avro: Avro in the schema-registry wire format, "
                           "with its writer schemas and an avro stage (OUT/orders_avro_demo.yml); protobuf: "
                           "the same for Protobuf (OUT/orders_protobuf_demo.yml); declarative: the declarative "
                           "pipeline project (docs/declarative.md: OUT/orders.yml, spark-pipeline.yml, "
                           "transformations/) with the JSON orders in OUT/data/source")
    srv = command("connect-server")
    srv.add_argument("--port", type=int, default=15002, help="the gRPC port (default 15002)")
    srv.add_argument("--conf", dest="spark_conf", action="append", default=[], metavar="KEY=VALUE",
                     help="a Spark setting on top of a local session's, e.g. spark.sql.warehouse.dir=/data/wh")
    sch = command("schema")
    sch.add_argument("--out", default=None, metavar="FILE", help="write it to FILE instead of printing it")
    for name in ("inspect", "stats", "sql", "views"):
        _triage_arguments(name, command(name))
    return ap


def _triage_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """The options of ``command`` (inspect, stats, sql or views: :mod:`quarantine.ops.triage`) on its subparser."""
    need_conf = command != "sql"  # `quarantine sql` alone lists the library
    parser.add_argument("--conf", required=need_conf, help="the pipeline config (YAML): its tables and pipeline")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    if command in ("inspect", "stats"):
        parser.add_argument("--pipeline", default=None,
                            help="the pipeline whose rows to show (default: the config's; '' for every pipeline)")
    if command == "inspect":
        parser.add_argument("--stage", default=None, help="only records that failed in this stage")
        # QuarantineStatus.OPEN (quarantine.schema, which imports pyspark: not at --help; a unit test holds them equal)
        parser.add_argument("--status", default="open", help="open (default), replayed, discarded or all")
        parser.add_argument("--error-class", default=None, help="only records with this error class")
        parser.add_argument("--since", default=None, metavar="TIME",
                            help="only records last seen at or after TIME (2026-11-25, 2026-11-25T10:00, or 24h, 7d)")
        parser.add_argument("--until", default=None, metavar="TIME", help="only records last seen before TIME")
        parser.add_argument("--limit", type=int, default=20, help="at most this many records (default 20)")
    if command == "sql":
        parser.add_argument("name", nargs="?", default=None, metavar="NAME",
                            help="the query (without NAME: list the library)")
        parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                            help="a query parameter (repeatable); pipeline defaults to the config's")
        parser.add_argument("--limit", type=int, default=100,
                            help="at most this many rows (default 100); the output says when more match")
        parser.add_argument("--print", action="store_true", dest="print_sql",
                            help="print the query's SQL with the tables and values in place; run nothing")
    if command == "views":
        parser.add_argument("--schema", default=None, metavar="[CATALOG.]SCHEMA",
                            help="where to create the views (default: next to a catalog table; "
                                 "the current schema for a path)")
        parser.add_argument("--print", action="store_true", dest="print_sql",
                            help="print the CREATE VIEW statements; create nothing")
    if command != "views":
        parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")


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
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "discard" and not args.dry_run and not (args.reason or "").strip():
        parser.error("discard needs --reason: why, kept in each discarded row's resolution (--dry-run does not)")
    tally = configure_logging(getattr(args, "verbose", False))
    _stop_retries_on_sigterm()
    try:
        return _command(args)
    finally:
        if tally is not None:
            for line in tally.summary(getattr(args, "conf", None)):
                print(line)


def _command(args: argparse.Namespace) -> int:
    """Run the parsed command through its handler; its exit code (see :func:`main`)."""
    call = Invocation(args)
    try:
        return _dispatch(call)
    except ConfigError as exc:
        print(f"quarantine: bad config: {exc}", file=sys.stderr)
        return 2
    except MissingDependencyError as exc:
        print(f"quarantine: missing dependency: {exc}", file=sys.stderr)
        return 3
    except QuarantineError as exc:
        print(f"quarantine: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark/Delta/Py4J: one line for the user, the stack in the log
        logging.getLogger("quarantine").debug("run failed", exc_info=True)
        # a storage fault is said in words; Py4J's class name would say nothing more
        kind = "" if storage_fault(exc, call.tables) is not None else f"{type(exc).__name__}: "
        print(f"quarantine: run failed: {kind}{describe_failure(exc, call.tables)}", file=sys.stderr)
        return 1


#: The handlers the JVM-free read path tries first, and Spark's after them.
_TRIAGE = ("quarantine.commands.triage_local", "quarantine.commands.triage")

#: Each command's handler modules (:mod:`quarantine.commands`), tried in order when that command
#: runs: the first whose ``handle`` answers (returns an exit code, not None) decides. A module
#: that needs an optional package the install lacks (the ``local`` extra's delta-rs and DuckDB)
#: is passed over. Module names, each an edge the import-graph test counts (``import_module``
#: over names a module holds); no handler imports this module, so none is a circle.
HANDLERS: dict[str, tuple[str, ...]] = {
    "run": ("quarantine.commands.run",),
    "validate": ("quarantine.commands.validate",),
    "replay": ("quarantine.commands.replay_local", "quarantine.commands.replay"),
    "discard": ("quarantine.commands.discard",),
    "forget": ("quarantine.commands.forget",),
    "rebuild-target": ("quarantine.commands.rebuild_target",),
    "maintain": ("quarantine.commands.maintain",),
    "report": ("quarantine.commands.report_local", "quarantine.commands.report"),
    "init-demo": ("quarantine.commands.init_demo",),
    "metrics": ("quarantine.commands.metrics",),
    "schema": ("quarantine.commands.schema",),
    "inspect": _TRIAGE,
    "stats": _TRIAGE,
    "sql": _TRIAGE,
    "views": _TRIAGE,
    "connect-server": ("quarantine.commands.connect_server",),
}

#: Packages a handler may need that an install may lack: its module is then passed over.
_OPTIONAL = frozenset({"deltalake", "duckdb", "pyarrow"})


def _handlers(command: str) -> Iterator[Callable[[Invocation], int | None]]:
    """The ``handle`` of each of ``command``'s :data:`HANDLERS` modules this install can import, in order.

    Each module is imported when the one before it has not answered, not before: the JVM-free
    handler of a read-only command answers without Spark's handler (and pyspark) being imported.
    Only the command that runs has its code imported (``--help`` imports none): see
    :mod:`quarantine.commands` for why.
    """
    for name in HANDLERS[command]:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name not in _OPTIONAL:
                raise
            continue
        yield module.handle


def _dispatch(call: Invocation) -> int:
    """Run ``call`` through its command's handlers: the first that answers gives the exit code."""
    for handle in _handlers(call.args.command):
        code = handle(call)
        if code is not None:
            return code
    raise RuntimeError(f"no handler answered {call.args.command!r}")  # the last of each entry always answers


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
