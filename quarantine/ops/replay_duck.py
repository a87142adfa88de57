"""``replay --dry-run``'s selection on DuckDB: the open rows a replay would take, without a JVM.

The selection (:class:`~quarantine.dry_run.ReplaySelection`) of
:func:`quarantine.runners.replay.select_replay`, counted over a path quarantine table read
by delta-rs into Arrow: the pipeline's ``open`` rows that ``--where`` selects, by their
quarantined stage and error class with the smallest message as the example (opened where its key
is readable here, else ``encrypted (N bytes)``). ``--where``
is Spark SQL; it is translated (:func:`quarantine.ops.duck.duckdb_predicate`) and bound by
DuckDB, or refused with the reason (Spark then selects).
"""

from __future__ import annotations

from quarantine.columns import ERROR_CLASS, MESSAGE, PIPELINE, STAGE, STATUS, QuarantineStatus
from quarantine.config import PipelineConfig
from quarantine.dry_run import ErrorGroup, ReplaySelection, largest_first
from quarantine.keyring import KeyRing
from quarantine.ops.duck import Session, duckdb_predicate

__all__ = ["select_replay"]


def select_replay(config: PipelineConfig, where: str | None) -> ReplaySelection:
    """The open rows of ``config``'s pipeline that ``where`` selects, by their quarantined failure.

    Args:
        config: the pipeline config; its quarantine table is a path.
        where: a Spark SQL predicate over the quarantine table's columns, or None (every open row).

    Raises:
        ValueError: DuckDB cannot take ``where`` (the message says why, in one line).
        QuarantineError: no quarantine table yet.
        DeltaRsUnreadableError: delta-rs or DuckDB cannot read the table.
    """
    condition = duckdb_predicate(where) if where else None
    session = Session(config)
    session.need("quarantine")
    if condition is not None:
        session.condition("quarantine", condition)
    _, rows = session.rows(
        f"SELECT {STAGE}, {ERROR_CLASS}, count(1), min({MESSAGE}) FROM quarantine "
        f"WHERE {PIPELINE} = $pipeline AND {STATUS} = '{QuarantineStatus.OPEN.value}'"
        + (f" AND ({condition})" if condition is not None else "")
        + f" GROUP BY {STAGE}, {ERROR_CLASS}",
        {"pipeline": config.pipeline},
    )
    keys = KeyRing.from_errors(config.errors)
    groups = [ErrorGroup(stage, error_class, int(n), keys.open_text(example))
              for stage, error_class, n, example in rows]
    return ReplaySelection(selected=sum(g.records for g in groups), groups=largest_first(groups))
