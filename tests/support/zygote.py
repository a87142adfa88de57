"""A zygote for CLI commands run as processes: one process imports the CLI once, then forks a
child per command.

Why: a test that must run a command in a process of its own (no Spark session of the test
worker, no state of an earlier command) paid the interpreter's start and the CLI's imports
each time: ~0.7 s a command, most of ``make test-fast``'s subprocess tests (issue 50). A forked
child starts from the zygote's state right after its imports: nothing has run yet, no JVM
exists (the zygote never starts one), and the command's state dies with the child. What a
fresh interpreter would add is only the imports themselves, which the tests that count
imported modules (``test_cli_startup``, ``test_jvm_free_imports``) still start fresh processes
for.

The child takes the test's environment and working folder, its standard output and error go
to files the test reads, and after the command it checks that no JVM gateway was started,
as the one-process runs did. One zygote per test process (each xdist worker), started on
first use and stopped at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["run_cli"]

REPO = Path(__file__).resolve().parents[2]

#: The zygote: imports the CLI, then per request (one JSON line on stdin) forks a child that runs
#: ``quarantine.cli.main(argv)`` with fds 1 and 2 on the request's files, and answers its exit code.
_ZYGOTE = r"""
import json, os, sys, traceback
from pyspark import SparkContext
from quarantine.cli import main

for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            try:
                code = main(req["argv"])
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
            if SparkContext._gateway is not None or SparkContext._active_spark_context is not None:
                print("the command started a JVM", file=sys.stderr)
                code = 3
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code or 0)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""

_zygote: subprocess.Popen[str] | None = None


def _started() -> subprocess.Popen[str]:
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        _zygote = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            start_new_session=True,  # its own process group: a timeout stops the zygote and its child
        )
        atexit.register(_stop, _zygote)
    return _zygote


def _stop(zygote: subprocess.Popen[str]) -> None:
    if zygote.poll() is None:
        os.killpg(zygote.pid, signal.SIGKILL)
        zygote.wait()


def run_cli(argv: list[str], *, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``quarantine *argv`` in a child forked from the zygote: its exit code, output and error.

    The child runs with this process's environment (``PYTHONPATH`` set to the repository) and
    working folder (or ``cwd``). Exit code 3 with "the command started a JVM" on its standard
    error: the command started a JVM gateway.

    Raises:
        TimeoutError: the command did not end within ``timeout`` seconds (the zygote and the
            command are stopped; the next call starts a new zygote).
    """
    zygote = _started()
    assert zygote.stdin is not None and zygote.stdout is not None
    with tempfile.TemporaryDirectory(prefix="zygote-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        request = {
            "argv": argv, "cwd": str(cwd or Path.cwd()), "stdout": str(out), "stderr": str(err),
            "env": {**os.environ, "PYTHONPATH": str(REPO)},
        }
        zygote.stdin.write(json.dumps(request) + "\n")
        zygote.stdin.flush()
        if not select.select([zygote.stdout], [], [], timeout)[0]:
            _stop(zygote)
            raise TimeoutError(f"quarantine {' '.join(argv)} did not end within {timeout} s")
        answer = zygote.stdout.readline()
        if not answer:
            raise RuntimeError(f"the zygote exited ({zygote.poll()}) running quarantine {' '.join(argv)}")
        code = int(json.loads(answer)["code"])
        return subprocess.CompletedProcess(
            ["quarantine", *argv], code, out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
        )
