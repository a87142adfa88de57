"""Rebuilding a target from its source and the quarantine table (``quarantine rebuild-target``).

A target deleted or rebuilt loses the records that were replayed into it: their
raw bytes are only in the quarantine table. :func:`rebuild_target` builds a new
target without losing any:

1. the pipeline's ``replayed`` rows are reopened (one UPDATE; ``resolution``
   keeps what it was, behind :data:`~quarantine.batch.agreement.REOPENED`);
2. the pipeline runs over its source, as a batch run (reopened records that are in
   the source pass again and are closed as ``replayed`` once more);
3. the reopened rows still open are replayed from their raw bytes.

A crash anywhere leaves every record settled or open: running ``rebuild-target``
again goes on (the target may exist then, as long as rows it reopened are still
open), and so do a plain run and a replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from quarantine.batch.agreement import REOPENED, rebuilding, replayed_records
from quarantine.batch.plan import refuse_pipeline_tables
from quarantine.errorhandling.retry import retried_write
from quarantine.errors import QuarantineWriteError, TablesDisagreeError
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import replay
from quarantine.tables import sql_literal, table_exists, table_ref

__all__ = ["Rebuild", "rebuild_target"]


@dataclass(frozen=True)
class Rebuild:
    """What :func:`rebuild_target` did, or would do (``dry_run``).

    Attributes:
        dry_run: nothing was written.
        reopened: ``replayed`` rows reopened (or that would be).
        records_ok: source records the run wrote to the target.
        replayed: reopened records replayed from the quarantine table's raw bytes.
        still_failing: reopened records that fail the current stages: open again.
        refused: (dry run) why a rebuild would refuse now, before it writes anything (the
            target exists); None: it would go ahead.
    """

    dry_run: bool
    reopened: int
    records_ok: int = 0
    replayed: int = 0
    still_failing: int = 0
    refused: str | None = None

    def render(self) -> str:
        """What was done, or (a dry run) what a rebuild would do now."""
        if self.dry_run:
            then = "with it moved away, " if self.refused else ""
            return (
                "rebuild-target --dry-run (nothing written): "
                + (f"a rebuild would refuse now: {self.refused}; " if self.refused else "")
                + f"{then}{self.reopened:,} replayed record(s) would be reopened and written to the new target "
                "from the quarantine table's raw bytes (through the current stages); then the source would be "
                "run again. Open and discarded records stay as they are."
            )
        return (
            f"rebuild-target: {self.reopened:,} replayed record(s) reopened; the source run wrote "
            f"{self.records_ok:,} record(s) to the target; {self.replayed:,} reopened record(s) replayed from "
            f"the quarantine table, {self.still_failing:,} of them failing the current stages (open)"
        )


def rebuild_target(pipe: Pipeline, *, dry_run: bool = False) -> Rebuild:
    """Build a new target from the source and the quarantine table (see the module doc).

    A dry run writes nothing and refuses nothing a rebuild would refuse for the tables' state:
    it says why a rebuild would refuse now (:attr:`Rebuild.refused`) and what it would do then.

    Raises:
        TablesDisagreeError: the target exists and no rebuild is under way (move or
            delete it first: this writes a new one; not for a dry run), or there is no
            quarantine table.
        ConfigError: ``target.written_by`` is ``pipeline`` (a full refresh of the pipeline
            rebuilds its tables).
    """
    refuse_pipeline_tables(pipe, "quarantine rebuild-target (a full refresh of the pipeline rebuilds its tables)")
    spark, config = pipe.spark, pipe.config
    quarantine = config.errors.dlq_table_name
    if not table_exists(spark, quarantine):
        raise TablesDisagreeError(
            f"the quarantine table {quarantine} does not exist: nothing to rebuild from; `quarantine run` "
            "writes the target from the source"
        )
    refused = None
    if table_exists(spark, config.target.table) and not rebuilding(spark, config):
        refused = (f"the target {config.target.table} exists: rebuild-target writes a new target, so move or "
                   "delete it first")
        if not dry_run:
            raise TablesDisagreeError(f"{refused} (nothing was written)")
    n = replayed_records(spark, config)
    if dry_run:
        return Rebuild(dry_run=True, reopened=n, refused=refused)
    if n:
        def reopen() -> None:
            spark.sql(
                f"UPDATE {table_ref(quarantine)} SET status = 'open', resolved_at = NULL, "
                f"resolution = concat('{REOPENED} (was: ', coalesce(resolution, ''), ')') "
                f"WHERE pipeline = {sql_literal(config.pipeline)} AND status = 'replayed'"
            )

        retried_write(pipe.write_operator, "rebuild-target reopen", quarantine, 0, reopen, failure=QuarantineWriteError)
    summary = pipe.run()
    again = replay(pipe, f"resolution LIKE '{REOPENED}%'")
    return Rebuild(dry_run=False, reopened=n, records_ok=summary.records_ok,
                   replayed=again.replayed, still_failing=again.still_failing)
