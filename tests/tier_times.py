"""Where the suite's time goes, by tier: the seconds its tests took (set-up, call and
tear-down, as pytest's reports time them), printed at the end of every run.

The sums are test seconds, not wall time: on two workers the wall time is about half
the sum when both are busy. A fixture's set-up (a broker, a Connect server, the session)
is charged to the first test that asks for it, which is where ``--durations`` shows it too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

__all__ = ["ModuleTime", "TierTimes"]


@dataclass
class ModuleTime:
    """One test module's share: its tier (its first test's), tests, test seconds and set-up seconds."""

    tier: str
    tests: int = 0
    seconds: float = 0.0
    set_up: float = 0.0


@dataclass
class TierTimes:
    """Adds up each finished test report's seconds under its tier marker (one of ``tiers``)."""

    tiers: tuple[str, ...]
    started: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    set_up: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    modules: dict[str, ModuleTime] = field(default_factory=dict)

    def add(self, report: pytest.TestReport) -> None:
        """One phase's report (``setup``, ``call`` or ``teardown``) of one test."""
        tier = next((t for t in self.tiers if t in report.keywords), "other")
        self.seconds[tier] += report.duration
        if report.when == "setup":
            self.set_up[tier] += report.duration
        module = self.modules.setdefault(report.nodeid.split("::", 1)[0], ModuleTime(tier))
        module.seconds += report.duration
        if report.when == "setup":
            module.set_up += report.duration
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.tests[tier] += 1
            module.tests += 1

    def lines(self) -> list[str]:
        """One line per tier that ran, then the run's wall time."""
        out = [
            f"{tier:>6}: {self.tests[tier]:5d} tests, {self.seconds[tier]:8.1f} s "
            f"({self.set_up[tier]:.1f} s of it set-up)"
            for tier in (*self.tiers, "other") if self.tests.get(tier) or self.seconds.get(tier)
        ]
        wall = time.monotonic() - self.started
        out.append(f"  wall: {int(wall // 60)}:{int(wall % 60):02d} for {sum(self.seconds.values()):.1f} test seconds")
        return out

    def module_lines(self, top: int = 25) -> list[str]:
        """The ``top`` modules by test seconds, one line each (where a tier's time goes: what a
        cut has to aim at): seconds, tier, tests, set-up seconds, path."""
        ranked = sorted(self.modules.items(), key=lambda kv: -kv[1].seconds)[:top]
        return [
            f"{m.seconds:8.1f} s {m.tier:>5} {m.tests:4d} tests ({m.set_up:.1f} s set-up)  {path}" for path, m in ranked
        ]
