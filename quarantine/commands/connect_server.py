"""``quarantine connect-server``: a local Spark Connect server with Delta, until Ctrl-C."""

from __future__ import annotations

import argparse

from quarantine.commands.invocation import Command, Invocation
from quarantine.errors import ConfigError

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=15002, help="the gRPC port (default 15002)")
    parser.add_argument("--conf", dest="spark_conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting on top of a local session's, e.g. spark.sql.warehouse.dir=/data/wh")


def _handle(call: Invocation) -> int:
    """Serve on ``--port`` with the ``--conf KEY=VALUE`` Spark settings.

    Raises:
        ConfigError: a ``--conf`` is not ``KEY=VALUE``.
    """
    settings = call.args.spark_conf
    bad = [p for p in settings if "=" not in p]
    if bad:
        raise ConfigError("--conf", bad[0], "KEY=VALUE (a Spark setting)")
    from quarantine.spark.connect_server import serve

    serve(call.args.port, dict(p.split("=", 1) for p in settings))
    return 0


COMMAND = Command(
    help="start a local Spark Connect server with Delta (for spark-pipelines); Ctrl-C stops it",
    examples=("SPARK_CONNECT_AUTHENTICATE_TOKEN=$(openssl rand -hex 16) quarantine connect-server --port 15002",),
    arguments=_arguments,
    handle=_handle,
)
