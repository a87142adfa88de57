"""Long-lived child Spark drivers for tests that race real processes.

A concurrent-writers test needs two Spark drivers in two OS processes, as two jobs
are. Starting one costs a JVM (12 s on an idle 2-core machine, twice that beside
another test worker) and its first queries run on a cold JIT. A :class:`DriverPool`
starts its children once per test worker and reuses them, as a job cluster runs one
job after another: each child is a Python process with its own local Spark driver
(its own JVM, its own Delta log cache) that runs one *job* at a time — a Python
script with its own ``sys.argv``, stdout and stderr, as ``python -c SCRIPT ARGS``
would run it. Jobs sent to several children with :meth:`DriverPool.run_at_once` run
at the same time, in separate processes, so their Delta commits really race.

Between jobs a child clears Spark's cache; tables live in each test's own temp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CHILD_SPARK", "DriverPool", "Job", "JobResult"]

#: The child drivers' Spark: small, as several share two cores.
CHILD_SPARK: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    # test data is small: shuffles start at 2 partitions, not the library's 64 (quarantine.spark.session)
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
}

# The child: build the session once, then run jobs from stdin, one JSON line each.
_CHILD = r"""
import io, json, os, sys, traceback
from quarantine.spark.session import get_spark

spark = get_spark("child-driver", json.loads(sys.argv[1]))
spark.range(10).count()
print("READY", flush=True)
real_stdout, real_stderr, real_argv = sys.stdout, sys.stderr, sys.argv
for line in sys.stdin:
    job = json.loads(line)
    code = 0
    with open(job["stdout"], "w") as out, open(job["stderr"], "w") as err:
        sys.stdout, sys.stderr, sys.argv = out, err, ["-c", *job["argv"]]
        try:
            exec(compile(job["script"], "<job>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            sys.stdout, sys.stderr, sys.argv = real_stdout, real_stderr, real_argv
    try:
        spark.catalog.clearCache()
    except Exception:
        traceback.print_exc()
    with open(job["done"] + ".tmp", "w") as f:
        json.dump({"code": code}, f)
    os.replace(job["done"] + ".tmp", job["done"])
"""


@dataclass(frozen=True)
class Job:
    """A script for a child driver, as ``python -c script *argv`` would run it."""

    script: str
    argv: Sequence[str] = ()


@dataclass(frozen=True)
class JobResult:
    """How a job ended: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


class DriverPool:
    """Child Spark drivers, started on first use and kept until :meth:`close`.

    Args:
        workdir: where the children's logs and each job's output files go.
        spark_conf: the children's Spark settings (static ones hold for their life).
        cwd: the children's working directory (the repository, so ``tests`` imports).
    """

    def __init__(self, workdir: Path, spark_conf: Mapping[str, str], cwd: Path) -> None:
        self.workdir = workdir
        self.spark_conf = dict(spark_conf)
        self.cwd = cwd
        self._children: list[subprocess.Popen[str]] = []
        self._jobs = 0

    def _log(self, i: int) -> Path:
        return self.workdir / f"child{i}.log"

    def _start(self, n: int) -> None:
        env = {**os.environ, "QUARANTINE_SPARK_LOG_LEVEL": "ERROR", "PYTHONUNBUFFERED": "1"}
        while len(self._children) < n:
            i = len(self._children)
            log = self._log(i).open("a")
            self._children.append(subprocess.Popen(
                [sys.executable, "-c", _CHILD, json.dumps(self.spark_conf)],
                cwd=self.cwd, env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True,
            ))

    def _tail(self, i: int) -> str:
        text = self._log(i).read_text(errors="replace") if self._log(i).exists() else ""
        return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("at "))[-4000:]

    def run_at_once(self, jobs: Sequence[Job], *, timeout_s: float = 1500) -> list[JobResult]:
        """Run ``jobs[i]`` on child ``i``, all at the same time; their results, in order.

        Raises:
            AssertionError: a child died or a job outlived ``timeout_s`` (with the child's log).
        """
        self._start(len(jobs))
        pending: dict[int, Path] = {}
        files: dict[int, tuple[Path, Path]] = {}
        for i, job in enumerate(jobs):
            self._jobs += 1
            base = self.workdir / f"job{self._jobs}"
            files[i] = (base.with_suffix(".out"), base.with_suffix(".err"))
            pending[i] = base.with_suffix(".done")
            child = self._children[i]
            assert child.stdin is not None
            child.stdin.write(json.dumps({
                "script": job.script, "argv": [str(a) for a in job.argv],
                "stdout": str(files[i][0]), "stderr": str(files[i][1]), "done": str(pending[i]),
            }) + "\n")
            child.stdin.flush()
        deadline = time.monotonic() + timeout_s
        codes: dict[int, int] = {}
        while pending:
            for i, done in list(pending.items()):
                if done.exists():
                    codes[i] = int(json.loads(done.read_text())["code"])
                    del pending[i]
                elif self._children[i].poll() is not None:
                    raise AssertionError(
                        f"child driver {i} died (exit {self._children[i].returncode}):\n{self._tail(i)}"
                    )
            if pending and time.monotonic() > deadline:
                raise AssertionError(f"jobs {sorted(pending)} did not finish within {timeout_s:.0f} s")
            time.sleep(0.05)
        return [
            JobResult(codes[i], files[i][0].read_text(errors="replace"), files[i][1].read_text(errors="replace"))
            for i in range(len(jobs))
        ]

    def close(self) -> None:
        """Stop the children (end of input, then a kill if they linger)."""
        for child in self._children:
            if child.stdin is not None:
                child.stdin.close()
        for child in self._children:
            try:
                child.wait(60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(30)
        self._children.clear()
