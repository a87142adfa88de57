"""A ``quarantine`` command without ``--verbose`` prints the project's own lines only (issue 37, section 3).

The README promises it of its demo commands ("Nothing else: Spark's, MLflow's and Great
Expectations' own lines are off unless ``--verbose``"). :func:`assert_only_the_projects_own_lines`
holds a set of finished command processes to it: every line of their stdout and stderr is
counted, and each must be the command's own output (stdout) or a line of a ``quarantine.*``
logger (stderr); Spark's start-up lines, MLflow's, Great Expectations' and Delta's are not,
and the demo's per-record error-context lines (``errors.log.enable``) are summarised.

``tests/e2e/test_wheel_install.py`` applies it to the README's demo as a user runs it (the
installed wheel, outside the repository, no ``QUARANTINE_SPARK_LOG_LEVEL``): the run that
proves the wheel works proves this too, so the demo is not started twice for the two checks.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

__all__ = ["FOREIGN", "OWN_LOG_LINE", "assert_only_the_projects_own_lines", "foreign_lines"]

#: A line of a ``quarantine.*`` logger in the CLI's format (``quarantine.cli``).
OWN_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:INFO|WARNING|ERROR) quarantine(?:\.\w+)*: ")
#: Lines the issue counted that are not the project's: the JVM's, Spark's (log4j), MLflow's,
#: Great Expectations', Delta's VACUUM, another logger's.
FOREIGN = re.compile(
    r"^WARNING: Using incubator modules|^Using Spark's default log4j profile|^Setting default log level"
    r"|^To adjust logging level|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:WARN|INFO|ERROR) |^Deleted \d+ files"
    r"|Creating initial MLflow database tables|Updating database tables|Created temporary directory"
    r"|^\d{4}[-/]\d\d[-/]\d\d \d\d:\d\d:\d\d,?\d* (?:DEBUG|INFO|WARNING|ERROR) (?!quarantine\b)"
)

#: The project's lines whose number follows elapsed time or a cold jar cache.
_TIMED = re.compile(r" quarantine\.progress: | quarantine\.spark\.jars: downloading ")

#: At most this many lines (besides :data:`_TIMED`'s) from ``init-demo``, ``run`` and ``maintain`` together (issue 37).
MOST_LINES = 40


def foreign_lines(*procs: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of ``procs`` that are not the project's: on stdout, a :data:`FOREIGN` line;
    on stderr, any line that is not :data:`OWN_LOG_LINE`."""
    out = [line for p in procs for line in p.stdout.splitlines()]
    err = [line for p in procs for line in p.stderr.splitlines()]
    return [line for line in out if FOREIGN.search(line)] + [line for line in err if not OWN_LOG_LINE.match(line)]


def assert_only_the_projects_own_lines(
    runs: Sequence[subprocess.CompletedProcess[str]], ran: subprocess.CompletedProcess[str], conf: str
) -> None:
    """The demo's commands without ``--verbose`` print the project's own lines only.

    Args:
        runs: the finished processes of ``init-demo``, ``run`` and ``maintain`` (each exit 0).
        ran: the ``run`` among them (its summary of the error-context lines).
        conf: the ``--conf`` the run was given (the ``quarantine inspect`` line it suggests).
    """
    assert ran in runs
    out = [line for p in runs for line in p.stdout.splitlines()]
    err = [line for p in runs for line in p.stderr.splitlines()]
    foreign = foreign_lines(*runs)
    print(f"{len(out) + len(err)} lines: {len(out)} on stdout, {len(err)} on stderr, {len(foreign)} not the project's")
    assert foreign == []
    # the per-record error-context lines are summarised: how many, by stage and class, where to look
    assert not [line for line in err if "error context [" in line]
    assert re.search(r"^error context: \d+ of \d+ failed records logged on quarantine\.errors", ran.stdout, re.M), \
        ran.stdout
    assert f"quarantine inspect --conf {conf}" in ran.stdout
    # each expectation breach once, in the summary; not also as a WARNING line above it (issue 54)
    assert re.search(r"^  breach \[warn\] ", ran.stdout, re.M), ran.stdout
    assert not [line for line in err if "expectation breach [" in line], ran.stderr
    # quarantine.progress logs a line per 15 s of a batch run, and the jars' first download one:
    # their number follows the machine's speed and cache, not the command's verbosity, so the cap
    # counts the other lines (a run at load 10 printed 39 lines in all, 34 on a quiet machine)
    rest = out + [line for line in err if not _TIMED.search(line)]
    assert len(rest) <= MOST_LINES, "\n".join(rest)
