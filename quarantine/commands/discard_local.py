"""``quarantine discard --dry-run`` without a JVM: the open rows a discard would close, on DuckDB.

The first handler the CLI tries for ``discard``. A dry run over a path quarantine table is
the selection ``replay --dry-run`` prints first (:mod:`quarantine.ops.replay_duck`: the
pipeline's open rows ``--where`` selects, by their quarantined stage and error class), said
as what a discard would close; that is the whole answer, so no JVM starts. It returns None,
and Spark answers (:mod:`quarantine.commands.discard`), for a discard that writes, a blank
``--where`` (Spark's path refuses it), a catalog table, Databricks, Spark Connect,
``$QUARANTINE_READ_ENGINE=spark``, no quarantine table yet, a table delta-rs or DuckDB cannot
read, or a ``--where`` DuckDB cannot take (one line on stderr says why).
"""

from __future__ import annotations

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import predicate
from quarantine.commands.replay_local import duckdb_selection
from quarantine.ops.duck import spark_reason

__all__ = ["handle"]


def handle(call: Invocation) -> int | None:
    """Print a discard's dry run from DuckDB; 0, or None: Spark answers.

    Raises:
        ConfigError: the config is bad.
    """
    if not call.args.dry_run:
        return None
    config = load(call)
    where = predicate(call.args.where)
    if where is None or spark_reason(config, ("quarantine",)) is not None:
        return None
    selection = duckdb_selection(config, where)
    if selection is None:
        return None
    print(selection.discard_lines())
    return 0
