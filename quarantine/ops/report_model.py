"""A pipeline's report data: the figures' rows, whichever engine read them.

:class:`ReportData` is what the report page (:mod:`quarantine.ops.report_page`) draws and
``quarantine report`` summarises; :func:`quarantine.ops.reads.report_data` fills it, each
figure one read written once for both engines. This module imports neither engine.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from quarantine.columns import QuarantineStatus, RunKind
from quarantine.config import PipelineConfig

__all__ = [
    "HOURLY_SPAN",
    "LATEST",
    "STATUSES",
    "TOP_ERROR_CLASSES",
    "ReportData",
    "Rows",
    "counted_target",
    "time_unit",
]

#: How many error classes the ``error_classes`` figure shows.
TOP_ERROR_CLASSES = 10
#: The newest runs (breaches) and resolutions (replays) a figure shows.
LATEST = 200
#: Past this span of ``first_seen_at``, ``over_time`` buckets by the day instead of the hour.
HOURLY_SPAN = dt.timedelta(days=3)
#: Every status, in the order the summary lists them.
STATUSES = tuple(s.value for s in QuarantineStatus)

Rows = list[tuple[Any, ...]]


def time_unit(first: dt.datetime | None, last: dt.datetime | None) -> str:
    """``hour`` for a span of ``first_seen_at`` up to three days (or none), else ``day``."""
    if first is None or last is None or last - first <= HOURLY_SPAN:
        return "hour"
    return "day"


@dataclass(frozen=True)
class ReportData:
    """The collected aggregates of one report (small: a few hundred rows at most).

    Each figure's rows are plain tuples in the column order of its read
    (``quarantine/sql/reads/``), instants naive UTC wall clocks; ``missing`` says,
    per figure id, why it has no source at all (no quarantine table yet, no metrics
    table configured). ``records_in`` is the reads: the source records the pipeline's runs
    read (``records-in`` of runs of kind ``run``: a replay's selection is not counted again,
    a re-run's open records are); None without a metrics table. ``in_target`` is the
    target's rows (None: not counted, as with ``since``); with the quarantine rows not
    ``replayed`` they are the pipeline's records, each once (:attr:`records`).
    ``resolution_runs`` is the replays and discards that ran, by kind, whether or not they
    closed a record.
    """

    pipeline: str
    generated_at: dt.datetime
    quarantine_table: str
    metrics_table: str | None
    since: dt.datetime | None = None
    unit: str = "hour"
    over_time: Rows = field(default_factory=list)
    error_classes: Rows = field(default_factory=list)
    partitions: Rows = field(default_factory=list)
    statuses: Rows = field(default_factory=list)
    breaches: Rows = field(default_factory=list)
    replays: Rows = field(default_factory=list)
    resolution_runs: Rows = field(default_factory=list)
    records_in: int | None = None
    in_target: int | None = None
    missing: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        """Records in ``status``."""
        return sum(int(n) for s, n in self.statuses if s == status)

    @property
    def held(self) -> int:
        """The quarantine rows not replayed (open or discarded): records the target does not hold."""
        return sum(int(n) for s, n in self.statuses if s != QuarantineStatus.REPLAYED.value)

    @property
    def records(self) -> int | None:
        """The pipeline's records, each once: the target's rows and the quarantine rows not replayed
        (every record a run settled is in exactly one of them); None when the target was not counted."""
        return None if self.in_target is None else self.in_target + self.held

    def summary_lines(self) -> list[str]:
        """The few lines ``quarantine report`` prints."""
        total = sum(int(n) for _, n in self.statuses)
        since = f" since {self.since.isoformat()}" if self.since else ""
        lines = [f"pipeline {self.pipeline}: {total:,} quarantined record(s){since}"]
        if self.records is not None:
            lines.append(f"  records                {self.records:,}   ({self.in_target:,} in the target, "
                         f"{self.held:,} in quarantine: open or discarded)")
        if self.records_in is not None:
            lines.append(f"  reads                  {self.records_in:,}   (the source records the runs read: "
                         "a re-run reads the open records again)")
        lines.extend(f"  {s:<22} {self.count(s):,}" for s in STATUSES)
        limits = sum(int(r[2]) for r in self.breaches if r[3] is None)
        expectations = sum(int(r[2]) for r in self.breaches if r[3] is not None)
        runs = len({r[0] for r in self.breaches})
        lines.append(f"  breaches               {limits + expectations:,} in {runs:,} run(s): "
                     f"error limits {limits:,}, expectations {expectations:,}")
        if "breaches" in self.missing:  # no metrics table: the runs are not known, what they closed is above
            lines.append("  replays and discards   not counted (no metrics table)")
        else:
            ran = {str(kind): int(n) for kind, n in self.resolution_runs}
            replays, discards = ran.get(RunKind.REPLAY, 0), ran.get(RunKind.DISCARD, 0)
            said = f"{replays + discards:,} run(s): replay {replays:,}, discard {discards:,}"
            lines.append(f"  replays and discards   {said}")
        return lines


def counted_target(config: PipelineConfig) -> str | None:
    """The target whose rows :attr:`ReportData.records` counts: ``target.table``, unless other
    pipelines' rows may be in it too (``target.shared``), which a count cannot tell apart."""
    return None if config.target.shared else config.target.table
