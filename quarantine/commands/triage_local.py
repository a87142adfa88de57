"""``quarantine inspect``, ``stats``, ``sql`` and ``views --print`` without a JVM: path tables on DuckDB.

The first handler the CLI tries for these commands (issue 53). It imports delta-rs, DuckDB
and :mod:`quarantine.ops.duck`, never pyspark; when it returns None, Spark answers
(:mod:`quarantine.commands.triage`): a catalog name, Databricks, Spark Connect, a table
delta-rs cannot read (one line on stderr said why) or ``QUARANTINE_READ_ENGINE=spark``.
"""

from __future__ import annotations

from quarantine.commands.invocation import Invocation
from quarantine.commands.options import overrides
from quarantine.ops.duck import answer

__all__ = ["handle"]


def handle(call: Invocation) -> int | None:
    """Run ``call.args.command`` on DuckDB; its exit code, or None: Spark answers.

    Raises:
        ConfigError: bad options, config, query name or parameters.
        QuarantineError: the quarantine table does not exist yet.
    """
    return answer(call.args, overrides(call.args.set))
