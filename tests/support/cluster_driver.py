"""Several ``quarantine`` commands in one driver process: ``python -m tests.support.cluster_driver IN OUT``.

A pipeline's driver is a process with a Spark JVM of its own, and on a standalone cluster an
application whose executors the workers start, each a JVM of its own: tens of seconds per
driver on a small machine. Where the process boundary is not what a test is about, its
commands run here one after the other, each through :func:`quarantine.cli.main` as
``quarantine <argv>`` runs it: the first starts the session (its config's ``spark.conf``
points it at the cluster), the others get the same one (``get_spark`` reuses the active
session), so they share the driver's JVM and the application's executors.

``IN`` is a JSON file ``{"commands": [[name, argv], ...], "tables": ROOT}``; ``OUT`` gets, by
command name: its exit ``code``, what it printed (``stdout``), the ``error`` it raised (a
traceback, or None), its wall time (``seconds``), the session's ``master`` and ``app_id``
after it, and ``versions``: the last version of each Delta table under ``ROOT`` when it
ended (``{path: version}``), so a test can read a table as a command left it
(``versionAsOf``) after later commands changed it. A command that fails does not stop the next.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["delta_versions", "main"]


def delta_versions(root: Path) -> dict[str, int]:
    """The last committed version of each Delta table under ``root`` (its ``_delta_log``'s highest commit)."""
    out = {}
    for log in root.rglob("_delta_log"):
        commits = [int(p.stem) for p in log.glob("*.json") if p.stem.isdigit()]
        if commits:
            out[str(log.parent.resolve())] = max(commits)
    return out


def _run(argv: list[str]) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from quarantine.cli import main as quarantine

    printed, error, code, t0 = io.StringIO(), None, 1, time.monotonic()
    try:
        with contextlib.redirect_stdout(printed):
            code = quarantine(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # reported; the next command still runs
        error = traceback.format_exc()
    spark = SparkSession.getActiveSession()
    return {
        "code": code, "stdout": printed.getvalue(), "error": error, "seconds": round(time.monotonic() - t0, 1),
        "master": None if spark is None else spark.sparkContext.master,
        "app_id": None if spark is None else spark.sparkContext.applicationId,
    }


def main(argv: list[str]) -> int:
    """Run the commands of ``argv[0]`` (JSON), write their results to ``argv[1]``; 0 when every one ran."""
    plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    root = Path(plan["tables"])
    results = {}
    for name, command in plan["commands"]:
        print(f"--- {name}: quarantine {' '.join(command)}", file=sys.stderr, flush=True)
        results[name] = {**_run(command), "versions": delta_versions(root)}
        Path(argv[1]).write_text(json.dumps(results, indent=1), encoding="utf-8")  # what ran, should one hang
    return 0 if all(r["code"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
