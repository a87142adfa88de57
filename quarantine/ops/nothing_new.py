"""Whether a batch run has nothing new to read, answered from the tables' Delta logs without a JVM.

``quarantine run`` asks :func:`nothing_new` before it starts Spark. A scheduled batch job over a
Delta source that gained nothing since its last run then ends in the time it takes to read
three Delta logs, not to start a JVM (issue 61: a nothing-new re-run at most half of a run of one
day's records). The decision is the Spark run's own (:func:`quarantine.batch.increment.whole_read_reason`
over :class:`~quarantine.batch.increment.ReadFacts` that delta-rs finds here), and its answer is
only "nothing new" or "ask Spark": any doubt runs the pipeline as usual.

Spark answers instead (None) when the source is streaming or not a Delta table, a table is not
a local path (delta-rs reads a cloud path only with the credentials Spark has), the target is
a declarative pipeline's, the run has listeners a run with nothing new still tells (MLflow, alert
channels) or ``fail_on`` conditions to judge, delta-rs cannot read a table, or the source gained
commits since the last run's read (even ones that added no record: Spark records the new version).
"""

from __future__ import annotations

from typing import Any

from quarantine.config import PipelineConfig, SourceFormat
from quarantine.errors import DeltaRsUnreadableError
from quarantine.ops.delta_arrow import open_table, read_columns
from quarantine.table_names import is_local_path

__all__ = ["nothing_new"]


def nothing_new(config: PipelineConfig) -> str | None:
    """The run summary's ``source:`` line when the run has nothing new to read; None: run Spark.

    Raises:
        ConfigError: the quarantine table's writing key cannot be read (the check a run makes
            before anything else: :meth:`~quarantine.keyring.KeyRing.sealing`).
    """
    from quarantine.batch.increment import MARK_PREFIX, ReadFacts, ReadMark, stages_fingerprint, whole_read_reason
    from quarantine.columns import PIPELINE, RETRIABLE, STATUS, QuarantineStatus
    from quarantine.config.choices import WrittenBy
    from quarantine.keyring import KeyRing
    from quarantine.stages import build_stages

    source, target, quarantine = config.source, config.target.table, config.errors.dlq_table_name
    if source.streaming or source.format is not SourceFormat.DELTA or source.path is None:
        return None
    if config.mlflow.enabled or config.alerts.channels or config.fail_on.any:
        return None
    if config.target.written_by is WrittenBy.PIPELINE:
        return None
    if not all(is_local_path(p) for p in (source.path, target, quarantine)):
        return None
    KeyRing.from_errors(config.errors).sealing()
    try:
        src, tgt = open_table(source.path, "source"), open_table(target, "target")
        q = open_table(quarantine, "quarantine")
    except DeltaRsUnreadableError:
        return None
    if src is None or tgt is None:
        return None
    mark = ReadMark.from_json(tgt.metadata().configuration.get(MARK_PREFIX + config.pipeline))
    if mark is None or src.version() != mark.version:
        return None
    history: tuple[dict[str, Any], ...] = ()
    if tgt.version() > mark.target_version:
        history = tuple(h for h in tgt.history(tgt.version() - mark.target_version)
                        if int(h.get("version", -1)) > mark.target_version)
    facts = ReadFacts(
        source=source.location, source_id=str(src.metadata().id),
        column_mapping=src.metadata().configuration.get("delta.columnMapping.mode", "none"),
        stages=stages_fingerprint(build_stages(config.stages), config.redacted().get("target")),
        quarantine_id=str(q.metadata().id) if q is not None else None, target_history=history,
    )

    def open_retriable() -> bool:
        assert q is not None
        names = (PIPELINE, STATUS, RETRIABLE)
        rows = read_columns(q, names)
        if rows is None:
            return True  # cannot tell without Spark: as if there were (Spark then answers)
        return any(
            p == config.pipeline and s == QuarantineStatus.OPEN.value and r
            for p, s, r in zip(*(rows.column(c).to_pylist() for c in names), strict=True)
        )

    if whole_read_reason(mark, facts, open_retriable) is not None:
        return None
    return f"source: nothing new since version {mark.version} (answered from the Delta logs, without Spark)"
