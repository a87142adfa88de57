"""``quarantine init-demo``: a Kafka-shaped sample source with poison records, and the demo's config."""

from __future__ import annotations

import argparse
import os

from quarantine.commands.invocation import Command, Invocation
from quarantine.errors import ConfigError
from quarantine.table_names import is_path

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="data/demo",
                        help="directory; the source goes to OUT/source, the config to OUT/orders_demo.yml")
    parser.add_argument("--records", type=int, default=10_000, help="how many records (default 10000)")
    parser.add_argument("--poison-rate", type=float, default=0.04, help="the fraction of poison records (0.04)")
    parser.add_argument("--seed", type=int, default=7, help="the random seed (7)")
    parser.add_argument("--table", default=None, metavar="CATALOG.SCHEMA.TABLE",
                        help="write the source as this catalog table instead (no config is written)")
    parser.add_argument("--if-missing", action="store_true", help="with --table: leave an existing table alone")
    parser.add_argument("--format", choices=("json", "avro", "protobuf", "declarative"), default="json",
                        help="json: UTF-8 JSON orders (default); avro: Avro in the schema-registry wire format, "
                             "with its writer schemas and an avro stage (OUT/orders_avro_demo.yml); protobuf: "
                             "the same for Protobuf (OUT/orders_protobuf_demo.yml); declarative: the declarative "
                             "pipeline project (docs/declarative.md: OUT/orders.yml, spark-pipeline.yml, "
                             "transformations/) with the JSON orders in OUT/data/source")


def _handle(call: Invocation) -> int:
    """Write the demo's source (``--out`` folder or ``--table``) and, for a folder, its config.

    Raises:
        ConfigError: ``--poison-rate`` is not a fraction, ``--table`` is not a catalog name, or
            ``--format`` is avro/protobuf with ``--table``.
    """
    args = call.args
    if not 0.0 <= args.poison_rate <= 1.0:
        raise ConfigError("--poison-rate", args.poison_rate, "a fraction in [0, 1]")
    if args.table is not None and (args.table.count(".") != 2 or is_path(args.table)):
        raise ConfigError("--table", args.table, "a catalog table name catalog.schema.table")
    if args.format != "json" and args.table is not None:
        raise ConfigError("--format", args.format, "json with --table (that demo writes its schemas next to its "
                          "config: use --out)")
    from quarantine.demo.avro import write_avro_demo
    from quarantine.demo.declarative import write_declarative_demo
    from quarantine.demo.orders import write_demo_config, write_demo_source, write_demo_table
    from quarantine.demo.protobuf import write_protobuf_demo
    from quarantine.spark.session import get_spark

    spark = get_spark("quarantine:init-demo")
    if args.format == "declarative":
        conf = write_declarative_demo(spark, args.out, args.records, poison_rate=args.poison_rate, seed=args.seed)
        source = conf.parent / "data" / "source"
        print(f"wrote {args.records:,} order events ({args.poison_rate:.0%} poison) to {source} "
              f"(Delta, Kafka-shaped) and the declarative pipeline project to {conf.parent} (orders.yml, "
              f"spark-pipeline.yml, transformations/); run it from there: spark-pipelines run --remote sc://…")
        return 0
    if args.format != "json":  # avro / protobuf: the source, the writer schemas beside it, the config
        writer = write_avro_demo if args.format == "avro" else write_protobuf_demo
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


COMMAND = Command(
    help="write a Kafka-shaped sample source (orders with poison records) and the demo's config",
    examples=(
        "quarantine init-demo --out data/demo",
        "quarantine init-demo --table main.quarantine_demo.orders_raw --if-missing",
        "quarantine init-demo --format avro --out data/avro-demo",
        "quarantine init-demo --format protobuf --out data/protobuf-demo",
        "quarantine init-demo --format declarative --out pipelines/orders",
    ),
    arguments=_arguments,
    handle=_handle,
)
