"""``quarantine replay --dry-run``'s selection without a JVM: path tables on DuckDB.

The first handler the CLI tries for ``replay`` (issue 53). A dry run over a path quarantine
table prints its selection (the open rows ``--where`` selects, by their quarantined
failure: :mod:`quarantine.ops.replay_duck`) before any JVM starts; what the current stages
would do with them is the second part, which runs the stages on Spark
(:func:`quarantine.commands.replay.dry_run_outcomes`, imported only then). It returns None,
and Spark does all of it (:mod:`quarantine.commands.replay`), for a replay that writes,
a catalog table, Databricks, Spark Connect, ``$QUARANTINE_READ_ENGINE=spark``, no quarantine
table yet, a config without ``target.source_columns`` (Spark says why), a table delta-rs or
DuckDB cannot read, or a ``--where`` DuckDB cannot take (one line on stderr says why).
"""

from __future__ import annotations

import importlib
import sys

from quarantine.commands.configured import load
from quarantine.commands.invocation import Invocation
from quarantine.commands.options import predicate
from quarantine.config import PipelineConfig
from quarantine.dry_run import ReplaySelection
from quarantine.errors import DeltaRsUnreadableError, QuarantineError
from quarantine.ops.duck import spark_reason
from quarantine.ops.replay_duck import select_replay

__all__ = ["duckdb_selection", "handle"]

#: The module whose ``dry_run_outcomes`` runs the stages on Spark: imported when the selection is not empty.
_ON_SPARK = "quarantine.commands.replay"


def duckdb_selection(config: PipelineConfig, where: str | None) -> ReplaySelection | None:
    """The open rows ``where`` selects over ``config``'s path quarantine table, read on DuckDB; None:
    Spark selects (no table yet, which Spark says; delta-rs or DuckDB cannot read the table, or
    DuckDB cannot take ``where``: one line on stderr says why)."""
    try:
        return select_replay(config, where)
    except DeltaRsUnreadableError as exc:
        print(f"quarantine: reading with Spark: {exc}", file=sys.stderr)
    except QuarantineError:  # no table yet: Spark says so, as it always has
        pass
    except ValueError as exc:
        print(f"quarantine: selecting with Spark: DuckDB cannot take --where {where}: {exc}", file=sys.stderr)
    return None


def handle(call: Invocation) -> int | None:
    """Print a dry run's selection from DuckDB, then its outcomes from Spark; 0, or None: Spark answers.

    Raises:
        ConfigError: the config is bad, or ``--pipeline`` names another pipeline.
    """
    if not call.args.dry_run:
        return None
    config = load(call)
    where = predicate(call.args.where)
    if spark_reason(config, ("quarantine",)) is not None or not config.target.source_columns:
        return None
    selection = duckdb_selection(config, where)
    if selection is None:
        return None
    print(selection.render(), flush=True)
    if selection.selected:
        print(importlib.import_module(_ON_SPARK).dry_run_outcomes(config, where))
    return 0
