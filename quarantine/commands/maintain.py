"""``quarantine maintain``: old closed quarantine rows stripped of their bytes, then OPTIMIZE and VACUUM."""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.ops.maintain import maintain
from quarantine.spark.session import get_spark

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Maintain the config's quarantine table; print what was done."""
    config = load(call)
    print(maintain(get_spark(f"quarantine:maintain:{config.pipeline}", config.spark_conf), config).render())
    return 0
