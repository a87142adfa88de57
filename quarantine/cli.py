"""The ``quarantine`` command line: ``quarantine --help`` lists the commands with examples.

Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed);
2 bad usage or bad config (nothing was read or written); 3 an optional dependency the
command needs is not installed (the message says the ``pip install``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import yaml

from quarantine.command_logging import HOLDS, configure_logging
from quarantine.errors import ConfigError, MissingDependencyError, QuarantineError, describe_failure, storage_fault

if TYPE_CHECKING:
    from quarantine.config import PipelineConfig
    from quarantine.stage import Stage

__all__ = ["COMMANDS", "console", "main", "parse_since"]


def _overrides(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError("--set", p, "key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def _predicate(where: str | None) -> str | None:
    """A ``--where`` as given, or None (every open record) when it is empty: a job parameter left blank."""
    return where if where and where.strip() else None


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
    from quarantine.ops import triage

    for name in triage.COMMANDS:
        triage.add_arguments(name, command(name))
    return ap


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
    """Run the parsed command; its exit code (see :func:`main`)."""
    tables: dict[str, str] = {}  # the config's tables by role, once it is loaded: what a storage fault names
    try:
        if args.command == "init-demo":
            return _init_demo(args)
        if args.command == "connect-server":
            from quarantine.spark.connect_server import serve

            bad = [p for p in args.spark_conf if "=" not in p]
            if bad:
                raise ConfigError("--conf", bad[0], "KEY=VALUE (a Spark setting)")
            serve(args.port, dict(p.split("=", 1) for p in args.spark_conf))
            return 0
        if args.command == "schema":
            return _schema(args.out)
        if args.command in ("inspect", "stats", "sql", "views"):
            from quarantine.ops.triage import run_command

            _start_reader(args)
            return run_command(args, _overrides(args.set))
        from quarantine.config import WrittenBy, load_config

        config = load_config(args.conf, _overrides(args.set))
        tables = _roles(config)
        if getattr(args, "pipeline", None) and args.pipeline != config.pipeline:
            raise ConfigError("--pipeline", args.pipeline, f"{config.pipeline} (the pipeline of {args.conf})")
        if args.command == "report":
            return _report(config, args.out, args.since)
        from quarantine.pipeline import Pipeline

        if args.command == "validate":
            stages = Pipeline.check_config(config)
            print(f"config ok: pipeline {config.pipeline}, {len(stages)} stages: "
                  + " -> ".join(f"{s.name}({type(s).__name__})" for s in stages))
            print(_target_columns(config, stages))
            print(_tables(config))
            print("checked without starting Spark; SQL expressions and regexes are compiled when a run starts")
            from quarantine.source_contract import unchecked

            not_checked = unchecked(config.source)
            if not_checked:
                print(f"not checked: {not_checked}")
            return 0
        if args.command == "replay":
            from quarantine.runners.replay import preview_replay, replay

            if args.dry_run:
                print(preview_replay(Pipeline.from_config(config, listeners=[]), _predicate(args.where)).render())
                return 0
            if config.target.written_by is WrittenBy.PIPELINE:  # the pipeline's next update replays them
                from quarantine.declarative.replay_queue import queue_replay

                print(queue_replay(Pipeline.from_config(config, listeners=[]), _predicate(args.where)).render())
                return 0
            print(replay(Pipeline.from_config(config), _predicate(args.where)).render())
            return 0
        if args.command == "metrics":
            from quarantine.declarative.metrics import record_pipeline_metrics
            from quarantine.spark.session import get_spark

            spark = get_spark(f"quarantine:metrics:{config.pipeline}", config.spark_conf)
            n = record_pipeline_metrics(spark, config)
            print(f"recorded {n:,} new batch(es) of pipeline {config.pipeline} in {config.metrics.table}")
            return 0
        if args.command == "discard":
            from quarantine.runners.replay import discard, preview_discard

            if args.dry_run:
                print(preview_discard(Pipeline.from_config(config, listeners=[]), args.where).render())
                return 0
            n = discard(Pipeline.from_config(config), args.where, args.reason)
            print(f"discarded {n:,} open record(s) (run_kind discard)")
            return 0
        if args.command == "rebuild-target":
            from quarantine.ops.rebuild import rebuild_target

            print(rebuild_target(Pipeline.from_config(config, listeners=[] if args.dry_run else None),
                                 dry_run=args.dry_run).render())
            return 0
        if args.command == "maintain":
            from quarantine.ops.maintain import maintain
            from quarantine.spark.session import get_spark

            print(maintain(get_spark(f"quarantine:maintain:{config.pipeline}", config.spark_conf), config).render())
            return 0
        # a batch run's summary lists each breach: its log line is not shown too (a stream's is)
        HOLDS.breaches = not config.source.streaming
        pipe = Pipeline.from_config(config)
        summary = pipe.run()
        print(summary.render())
        print(_tables(config))
        if summary.records_quarantined:
            print(f"next: quarantine inspect --conf {args.conf}")
        return 0
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
        kind = "" if storage_fault(exc, tables) is not None else f"{type(exc).__name__}: "
        print(f"quarantine: run failed: {kind}{describe_failure(exc, tables)}", file=sys.stderr)
        return 1


def _start_reader(args: argparse.Namespace) -> None:
    """Start the lean session of a command that reads tables (``get_spark(read_only=True)``).

    :mod:`quarantine.ops.triage` then gets it as the active session. Nothing starts when the
    command needs no Spark (``sql`` without a name, ``views --print``) or cannot run (no ``--conf``, an
    unknown query, a bad config): triage reports those as before.
    """
    if getattr(args, "conf", None) is None or (args.command == "sql" and args.name is None):
        return
    if args.command == "views" and args.print_sql:  # prints the statements; reads nothing
        return
    from quarantine.config import load_config
    from quarantine.spark.session import get_spark

    try:
        if args.command == "sql":
            from quarantine.sql import get_query

            get_query(args.name)
        config = load_config(args.conf, _overrides(args.set))
    except ConfigError:
        return
    get_spark(f"quarantine:{args.command}", config.spark_conf, read_only=True)


def _roles(config: PipelineConfig) -> dict[str, str]:
    """A pipeline's tables by role (``target``, ``quarantine``, ``metrics`` when set)."""
    roles = {"target": config.target.table, "quarantine": config.errors.dlq_table_name}
    return roles | ({"metrics": config.metrics.table} if config.metrics.table else {})


def _target_columns(config: PipelineConfig, stages: Sequence[Stage]) -> str:
    """The target's columns as the config declares them: the last stage's result, then the source's."""
    from quarantine.lineage import declared_result
    from quarantine.schema import TARGET_SOURCE_COLUMNS, target_columns

    last = stages[-1].name
    declared = declared_result(config.stages, stages)
    if declared is None:
        shown = f"the result of the last stage, {last} (its type is known when a run starts)"
    else:
        fields = target_columns(declared, last).fields
        shown = ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in fields)
        shown += f" (the last stage's result: {last})"
    if config.target.source_columns:
        shown += " + " + ", ".join(TARGET_SOURCE_COLUMNS.fieldNames())
    return f"target columns: {shown}"


def _tables(config: PipelineConfig) -> str:
    """Where a pipeline's records are: its target, quarantine and metrics tables, one per line."""
    rows = [
        ("target", config.target.table),
        ("quarantine", config.errors.dlq_table_name),
        ("metrics", config.metrics.table or "(off: metrics.table is not set)"),
    ]
    return "tables:\n" + "\n".join(f"  {what:<11}{name}" for what, name in rows)


def parse_since(text: str) -> dt.datetime:
    """``--since`` as an aware datetime: an ISO date or date-time (UTC unless it has an offset)."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError("--since", text, "an ISO date or date-time, e.g. 2026-11-01 or 2026-11-01T12:00") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _report(config: PipelineConfig, out: str, since: str | None = None) -> int:
    """``quarantine report``: write the page for ``config``'s pipeline and tables, print a summary; exit 0.

    Raises:
        ConfigError: ``--since`` is not an ISO date or date-time.
        ReportDependencyError: Plotly (the ``report`` extra) is not installed.
    """
    from quarantine.ops.report_page import require_plotly, write_report
    from quarantine.spark.session import get_spark

    when = parse_since(since) if since else None
    require_plotly()
    spark = get_spark(f"quarantine:report:{config.pipeline}", config.spark_conf, read_only=True)
    data = write_report(
        spark, out, pipeline=config.pipeline, quarantine_table=config.errors.dlq_table_name,
        metrics_table=config.metrics.table, since=when,
    )
    print("\n".join(data.summary_lines()))
    print(f"wrote the report to {out}")
    return 0


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


def _schema(out: str | None) -> int:
    """Print the config's JSON Schema, or write it to ``out`` (its folders created)."""
    from pathlib import Path

    from quarantine.config import schema_text

    text = schema_text()
    if out is None:
        sys.stdout.write(text)
        return 0
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote the config's JSON Schema to {target}")
    return 0


def _init_demo(args: argparse.Namespace) -> int:
    from quarantine.demo.orders import write_demo_config, write_demo_source, write_demo_table
    from quarantine.spark.session import get_spark

    if not 0.0 <= args.poison_rate <= 1.0:
        raise ConfigError("--poison-rate", args.poison_rate, "a fraction in [0, 1]")
    if args.table is not None and (args.table.count(".") != 2 or "/" in args.table):
        raise ConfigError("--table", args.table, "a catalog table name catalog.schema.table")
    if args.format != "json" and args.table is not None:
        raise ConfigError("--format", args.format, "json with --table (that demo writes its schemas next to its "
                          "config: use --out)")
    spark = get_spark("quarantine:init-demo")
    if args.format == "declarative":
        from quarantine.demo.declarative import write_declarative_demo

        conf = write_declarative_demo(spark, args.out, args.records, poison_rate=args.poison_rate, seed=args.seed)
        source = conf.parent / "data" / "source"
        print(f"wrote {args.records:,} order events ({args.poison_rate:.0%} poison) to {source} "
              f"(Delta, Kafka-shaped) and the declarative pipeline project to {conf.parent} (orders.yml, "
              f"spark-pipeline.yml, transformations/); run it from there: spark-pipelines run --remote sc://…")
        return 0
    if args.format != "json":  # avro / protobuf: the source, the writer schemas beside it, the config
        if args.format == "avro":
            from quarantine.demo.avro import write_avro_demo as writer
        else:
            from quarantine.demo.protobuf import write_protobuf_demo as writer
        conf = writer(spark, os.path.abspath(args.out), args.records, poison_rate=args.poison_rate, seed=args.seed)
        name = {"avro": "Avro", "protobuf": "Protobuf"}[args.format]
        print(f"wrote {args.records:,} {name} order events ({args.poison_rate:.0%} poison) to "
              f"{conf.parent / 'source'} (Delta, Kafka-shaped, schema-registry wire format), their writer "
              f"schemas to {conf.parent / 'schemas'}")
        print(f"wrote the {name} demo pipeline's config to {conf}; run it: quarantine run --conf {conf}")
        return 0
    if args.table is not None:
        n = write_demo_table(spark, args.table, args.records, poison_rate=args.poison_rate, seed=args.seed,
                             if_missing=args.if_missing)
        print(f"wrote {n:,} order events ({args.poison_rate:.0%} poison) to {args.table} (Kafka-shaped)"
              if n else f"{args.table} exists: left as it is (--if-missing)")
        return 0
    # absolute for Spark: the JVM resolves a relative path against its own start folder, which
    # is not this process's after an os.chdir (a notebook, a test); the config says the same path
    out = args.out if ":" in args.out.split("/", 1)[0] else os.path.abspath(args.out)
    path = f"{out.rstrip('/')}/source"
    n = write_demo_source(spark, path, args.records, poison_rate=args.poison_rate, seed=args.seed)
    print(f"wrote {n:,} order events ({args.poison_rate:.0%} poison) to {path} (Delta, Kafka-shaped)")
    conf = write_demo_config(args.out)
    print(f"wrote the demo pipeline's config to {conf}; run it: quarantine run --conf {conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
