"""``fail_on:``: a run that ends non-zero on a condition over its own metrics, its data written.

For schedulers that page on a failed job: a run whose records were all handled (good rows in
the target, failures in quarantine, every write committed) still ends as failed when

* ``open_records``: the pipeline's open quarantine rows, after the run's writes, are more than N;
* ``error_rate_percent``: a topic's quarantined records are more than x % of the run's
  records of that topic (topics with fewer than ``error_rate_min_records`` are not judged).

How this differs from the tolerance limits (``errors.tolerance.limit``, ``…rate.limit``): a
tolerance limit stops the batch that crosses it *before its target write* (its failures are
quarantined, its good rows wait for a re-run) and counts errors the run saw; a condition is
judged *after* the batch's writes committed, over what the run and the quarantine table hold,
and only says the run failed (:class:`~quarantine.errors.ConditionFailedError`, exit code 4).
A re-run of the same source writes nothing twice and fails again while the condition holds.

The evaluation is pure (:func:`conditions_held`): the run reads the open rows' count and hands
in its metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import ConfigDict, Field

from quarantine.values.section import Section
from quarantine.values.types import Check, integer, number

_PERCENT = number(0, 100)
#: A percentage in [0, 100], or nothing (not set).
OPTIONAL_PERCENT = Check(
    lambda value: None if value is None else _PERCENT.fn(value),
    {"type": ["number", "null"], "minimum": 0, "maximum": 100},
)

__all__ = ["FailOnConfig", "TopicRate", "conditions_held", "topic_rates"]


class FailOnConfig(Section):
    """Conditions that end a run non-zero after its writes (exit code 4); none set: never."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"open_records": 10_000, "error_rate_percent": 20, "error_rate_min_records": 1000},
    ]})
    _key = "fail_on"

    open_records: Annotated[int | None, integer(0, optional=True)] = Field(default=None, examples=[10_000])
    """Fail the run when more than this many of the pipeline's quarantine rows are open after its writes."""
    error_rate_percent: Annotated[float | None, OPTIONAL_PERCENT] = Field(default=None, examples=[20])
    """Fail the run when a topic's quarantined records are more than this share of the run's records of it."""
    error_rate_min_records: Annotated[int, integer(1)] = Field(default=100, examples=[1000])
    """A topic with fewer records in the run is not judged by error_rate_percent."""

    @property
    def any(self) -> bool:
        """Whether a condition is set."""
        return self.open_records is not None or self.error_rate_percent is not None


@dataclass(frozen=True)
class TopicRate:
    """One topic's share of quarantined records among its records in.

    Attributes:
        topic: the source topic.
        records_in: its records in.
        quarantined: of them, those quarantined.
    """

    topic: str
    records_in: int
    quarantined: int

    @property
    def percent(self) -> float:
        """``quarantined / records_in`` in percent (0 without records)."""
        return 100.0 * self.quarantined / self.records_in if self.records_in else 0.0


def topic_rates(
    records: Mapping[str, float], quarantined: Mapping[str, float], *, min_records: int = 1
) -> tuple[TopicRate, ...]:
    """Each topic with at least ``min_records`` records in, its error rate; the highest rate first.

    Args:
        records: records in, per topic (the ``records-in`` metric's topic cells).
        quarantined: records quarantined, per topic (``records-quarantined``'s).
        min_records: topics with fewer records in are left out.
    """
    rates = [
        TopicRate(topic, int(n), int(quarantined.get(topic, 0)))
        for topic, n in records.items()
        if n >= min_records
    ]
    return tuple(sorted(rates, key=lambda r: (-r.percent, r.topic)))


def conditions_held(
    config: FailOnConfig,
    records: Mapping[str, float],
    quarantined: Mapping[str, float],
    open_records: int | None,
) -> list[str]:
    """The conditions a run meets, each said in one sentence naming its key (pure).

    Args:
        config: the ``fail_on:`` section.
        records: the run's records in so far, per topic.
        quarantined: the run's records quarantined so far, per topic.
        open_records: the pipeline's open quarantine rows, or None when not counted.
    """
    held: list[str] = []
    if config.open_records is not None and open_records is not None and open_records > config.open_records:
        held.append(
            f"fail_on.open_records: {open_records:,} records are open in quarantine, more than {config.open_records:,}"
        )
    if config.error_rate_percent is not None:
        for rate in topic_rates(records, quarantined, min_records=config.error_rate_min_records):
            if rate.percent > config.error_rate_percent:
                held.append(
                    f"fail_on.error_rate_percent: topic {rate.topic} quarantined {rate.quarantined:,} of "
                    f"{rate.records_in:,} records ({rate.percent:.1f}%), more than {config.error_rate_percent:g}%"
                )
    return held
