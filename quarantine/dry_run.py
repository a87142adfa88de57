"""``replay --dry-run``'s and ``discard --dry-run``'s lines, whichever engine counted them.

A replay's dry run prints two parts: the selection (:class:`ReplaySelection`: the open rows
``--where`` selects, by their quarantined stage and error class: one read on either engine,
:func:`quarantine.ops.reads.replay_selection`),
then the outcomes through the current stages (:class:`~quarantine.runners.replay.Preview`),
which run on Spark. A discard's dry run is the same selection and nothing more
(:meth:`ReplaySelection.discard_lines`): the rows a discard would close. Both draw their
groups with :func:`group_lines`. This module imports no engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from quarantine.display import gist

__all__ = ["EXAMPLE_WIDTH", "SHOWN_GROUPS", "ErrorGroup", "ReplaySelection", "group_lines", "largest_first"]

#: How many (stage, error class) groups a rendered preview lists; the rest are summed up in one line.
SHOWN_GROUPS = 8
#: At most this many characters of a group's example message (the value it found kept: :func:`gist`).
EXAMPLE_WIDTH = 100


@dataclass(frozen=True)
class ErrorGroup:
    """Records with the same failing stage and error class, with one example message.

    Attributes:
        stage: the failing stage.
        error_class: the error class.
        records: how many records.
        example: one of their messages (the smallest, so the same one each time).
    """

    stage: str | None
    error_class: str | None
    records: int
    example: str | None


def largest_first(groups: Iterable[ErrorGroup]) -> tuple[ErrorGroup, ...]:
    """``groups`` by records, most first; ties by stage, then error class (None as ``"None"``)."""
    return tuple(sorted(groups, key=lambda g: (-g.records, str(g.stage), str(g.error_class))))


def group_lines(groups: tuple[ErrorGroup, ...]) -> list[str]:
    """One line per group (at most :data:`SHOWN_GROUPS`; the rest summed in one more line)."""
    lines = []
    for g in groups[:SHOWN_GROUPS]:
        example = gist(g.example.splitlines()[0], EXAMPLE_WIDTH) if g.example else ""
        lines.append(f"  {g.records:>10,}  {g.stage} / {g.error_class}: {example}")
    rest = groups[SHOWN_GROUPS:]
    if rest:
        lines.append(f"  {sum(g.records for g in rest):>10,}  in {len(rest)} more (stage, error class) group(s)")
    return lines


@dataclass(frozen=True)
class ReplaySelection:
    """The open rows a replay (or a discard) would take now, by their quarantined failure; nothing was written.

    Attributes:
        selected: the pipeline's open rows the predicate selects.
        groups: those rows by their current stage and error class, largest first (:func:`largest_first`).
    """

    selected: int
    groups: tuple[ErrorGroup, ...]

    def render(self) -> str:
        """The dry run's first lines: the count, then the largest groups."""
        head = f"replay --dry-run (nothing written): {self.selected:,} open record(s) selected"
        return "\n".join([head + (":" if self.groups else ""), *group_lines(self.groups)])

    def discard_lines(self) -> str:
        """``discard --dry-run``'s answer: the count a discard would close, then the largest groups."""
        head = f"discard --dry-run (nothing written): {self.selected:,} open record(s) would be discarded"
        return "\n".join([head + (":" if self.groups else ""), *group_lines(self.groups)])
