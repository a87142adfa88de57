"""The ``quarantine`` command line.

    quarantine run --conf conf/orders_demo.yml [--set key=value ...]
    quarantine replay --conf conf/orders_demo.yml [--pipeline orders_demo] [--where "stage = 'parse_order'"]
    quarantine discard --conf conf/orders_demo.yml --where "..." --reason "..."
    quarantine init-demo --out data/demo [--records N] [--poison-rate F]
    quarantine init-demo --table catalog.schema.orders_raw [--if-missing]
    quarantine validate --conf conf/orders_demo.yml
    quarantine schema [--out FILE]

Exit codes: 0 success; 1 the run failed (tolerance exceeded, a write failed);
2 bad usage or bad config (nothing was read or written).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from quarantine.errors import ConfigError, QuarantineError

__all__ = ["console", "main"]


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


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="quarantine", description=__doc__.split("\n")[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline from a YAML config")
    run.add_argument("--conf", required=True, help="the pipeline config (YAML)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config key, e.g. --set source.path=/data/x (repeatable)")
    val = sub.add_parser("validate", help="load and check a config and its stages; write nothing")
    val.add_argument("--conf", required=True)
    val.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    rep = sub.add_parser("replay", help="re-run open quarantine rows through the current stages")
    rep.add_argument("--conf", required=True)
    rep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    rep.add_argument("--where", default=None, help="SQL predicate over quarantine columns (empty: every open row)")
    rep.add_argument("--pipeline", default=None,
                     help="the pipeline the config must be (a guard for jobs that take the name as a parameter)")
    dis = sub.add_parser("discard", help="mark open quarantine rows as discarded")
    dis.add_argument("--conf", required=True)
    dis.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    dis.add_argument("--where", required=True, help="SQL predicate over quarantine columns")
    dis.add_argument("--reason", required=True)
    sch = sub.add_parser("schema", help="print (or write) the JSON Schema of a pipeline config, for editors")
    sch.add_argument("--out", default=None, metavar="FILE", help="write it to FILE instead of printing it")
    demo = sub.add_parser(
        "init-demo", help="write a Kafka-shaped sample source (orders with poison records) and the demo's config"
    )
    demo.add_argument("--out", default="data/demo",
                      help="directory; the source goes to OUT/source, the config to OUT/orders_demo.yml")
    demo.add_argument("--records", type=int, default=10_000)
    demo.add_argument("--poison-rate", type=float, default=0.04)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--table", default=None, metavar="CATALOG.SCHEMA.TABLE",
                      help="write the source as this catalog table instead (no config is written)")
    demo.add_argument("--if-missing", action="store_true", help="with --table: leave an existing table alone")
    return ap


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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "urllib3", "alembic", "mlflow"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = _parser().parse_args(argv)
    _stop_retries_on_sigterm()
    try:
        if args.command == "init-demo":
            return _init_demo(args)
        if args.command == "schema":
            return _schema(args.out)
        from quarantine.config import load_config

        config = load_config(args.conf, _overrides(args.set))
        if getattr(args, "pipeline", None) and args.pipeline != config.pipeline:
            raise ConfigError("--pipeline", args.pipeline, f"{config.pipeline} (the pipeline of {args.conf})")
        from quarantine.pipeline import Pipeline

        if args.command == "validate":
            pipe = Pipeline.from_config(config, listeners=[])
            print(f"config ok: pipeline {config.pipeline}, {len(pipe.stages)} stages: "
                  + " -> ".join(f"{s.name}({type(s).__name__})" for s in pipe.stages))
            return 0
        if args.command == "replay":
            from quarantine.replay import replay

            print(replay(Pipeline.from_config(config), _predicate(args.where)).render())
            return 0
        if args.command == "discard":
            from quarantine.replay import discard

            n = discard(Pipeline.from_config(config, listeners=[]), args.where, args.reason)
            print(f"discarded {n:,} open record(s)")
            return 0
        pipe = Pipeline.from_config(config)
        summary = pipe.run()
        print(summary.render())
        return 0
    except ConfigError as exc:
        print(f"quarantine: bad config: {exc}", file=sys.stderr)
        return 2
    except QuarantineError as exc:
        print(f"quarantine: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark/Delta/Py4J: one line for the user, the stack in the log
        from quarantine.errors import describe_failure

        logging.getLogger("quarantine").debug("run failed", exc_info=True)
        print(f"quarantine: run failed: {type(exc).__name__}: {describe_failure(exc)}", file=sys.stderr)
        return 1


def _stop_retries_on_sigterm() -> None:
    """SIGTERM (a job cancelled, a container stopping) ends retries, then the run, cleanly.

    Retries — even ``errors.retry.timeout: -1`` — give up (:func:`quarantine.retry.stop_retries`)
    and the run stops with ``KeyboardInterrupt``: the batch in flight is not committed,
    listeners see the run end, and a restart resumes from the last committed batch.
    """
    import signal
    import threading

    from quarantine.retry import stop_retries

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
    from quarantine.demo import write_demo_config, write_demo_source, write_demo_table
    from quarantine.session import get_spark

    if not 0.0 <= args.poison_rate <= 1.0:
        raise ConfigError("--poison-rate", args.poison_rate, "a fraction in [0, 1]")
    if args.table is not None and (args.table.count(".") != 2 or "/" in args.table):
        raise ConfigError("--table", args.table, "a catalog table name catalog.schema.table")
    spark = get_spark("quarantine:init-demo")
    if args.table is not None:
        n = write_demo_table(spark, args.table, args.records, poison_rate=args.poison_rate, seed=args.seed,
                             if_missing=args.if_missing)
        print(f"wrote {n:,} order events ({args.poison_rate:.0%} poison) to {args.table} (Kafka-shaped)"
              if n else f"{args.table} exists: left as it is (--if-missing)")
        return 0
    path = f"{args.out.rstrip('/')}/source"
    n = write_demo_source(spark, path, args.records, poison_rate=args.poison_rate, seed=args.seed)
    print(f"wrote {n:,} order events ({args.poison_rate:.0%} poison) to {path} (Delta, Kafka-shaped)")
    conf = write_demo_config(args.out)
    print(f"wrote the demo pipeline's config to {conf}; run it: quarantine run --conf {conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
