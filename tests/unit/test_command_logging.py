"""The JVM's log level a command starts Spark with: Spark's ERROR lines only with ``--verbose`` (issue 52, G).

Spark logs a failed task and an aborted job at ERROR with their Java stacks, above the one
line the command ends with; a command without ``--verbose`` starts its JVM at FATAL. The cases
run in one fresh interpreter: :func:`configure_logging` sets the process's logging and environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from quarantine.spark.session import LOG_LEVEL_ENV

#: Per case (verbose, the level the user set or None): the level configure_logging leaves.
_CASES = """
import json, os, sys
from quarantine.command_logging import configure_logging
name, out = sys.argv[1], []
for verbose, given in json.loads(sys.argv[2]):
    os.environ.pop(name, None)
    if given is not None:
        os.environ[name] = given
    configure_logging(verbose)
    out.append(os.environ[name])
print(json.dumps(out))
"""


def test_a_command_starts_the_jvm_at_fatal_unless_verbose() -> None:
    cases = [(False, None), (True, None), (False, "ERROR")]
    env = {k: v for k, v in os.environ.items() if k != LOG_LEVEL_ENV}
    ran = subprocess.run([sys.executable, "-c", _CASES, LOG_LEVEL_ENV, json.dumps(cases)], capture_output=True,
                         text=True, env=env, check=True, timeout=120)
    # quiet: Spark's ERROR lines (Java stacks) off the terminal; --verbose: its WARN lines; a level set stands
    assert json.loads(ran.stdout) == ["FATAL", "WARN", "ERROR"]


_BREACHES = """
import logging
from quarantine.command_logging import HOLDS, configure_logging
from quarantine.errorhandling.breach import BREACH_ATTR, Breach, BreachAction
configure_logging(False)
log = logging.getLogger("quarantine.expectations")
breach = Breach("expect_x:amount", BreachAction.WARN, "found 3 unexpected of 9 values")
log.warning("expectation breach [warn] a stream's: shown as it happens", extra={BREACH_ATTR: breach})
HOLDS.breaches = True  # what a batch run sets: its summary lists each breach
log.warning("expectation breach [warn] a batch's: the summary's line only", extra={BREACH_ATTR: breach})
log.warning("another warning of the batch: shown")
"""


def test_a_batch_runs_breach_lines_are_left_to_its_summary_and_a_streams_are_shown() -> None:
    """Issue 54, point 5: a batch run printed each breach twice, as a WARNING line and in its summary."""
    ran = subprocess.run([sys.executable, "-c", _BREACHES], capture_output=True, text=True, check=True, timeout=120)
    assert "a stream's: shown as it happens" in ran.stderr, ran.stderr
    assert "the summary's line only" not in ran.stderr, ran.stderr
    assert "another warning of the batch: shown" in ran.stderr, ran.stderr
