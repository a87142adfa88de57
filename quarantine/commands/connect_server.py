"""``quarantine connect-server``: a local Spark Connect server with Delta, until Ctrl-C."""

from __future__ import annotations

from quarantine.commands.invocation import Invocation
from quarantine.errors import ConfigError
from quarantine.spark.connect_server import serve

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Serve on ``--port`` with the ``--conf KEY=VALUE`` Spark settings.

    Raises:
        ConfigError: a ``--conf`` is not ``KEY=VALUE``.
    """
    settings = call.args.spark_conf
    bad = [p for p in settings if "=" not in p]
    if bad:
        raise ConfigError("--conf", bad[0], "KEY=VALUE (a Spark setting)")
    serve(call.args.port, dict(p.split("=", 1) for p in settings))
    return 0
