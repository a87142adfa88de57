"""The wheel as a user gets it: built, installed into a fresh venv, the demo run outside the repository.

The venv has no access to this repository or its venv (no ``--system-site-packages``,
no ``PYTHONPATH``, a working directory under the pytest temp dir) and a jar cache of
its own, so the session's Delta and Kafka jars really come from Maven Central through
:mod:`quarantine.spark.jars`. Dependencies come from PyPI through pip's cache.

The same demo processes carry the quiet-output check (issue 37, section 3, the README's
"Nothing else: Spark's, MLflow's and Great Expectations' own lines are off unless
``--verbose``"): ``init-demo``, ``run`` and then ``maintain``, each without ``--verbose``
and without ``QUARANTINE_SPARK_LOG_LEVEL`` (as a user runs them), print the project's own
lines only (:func:`tests.support.quiet.assert_only_the_projects_own_lines`). It had a test
of its own, which started the same demo (the Makefile's ``make demo`` commands: the same
CLI and the same config, ``tests/unit/test_demo_config.py``) a second time from the work tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

from tests.support.quiet import assert_only_the_projects_own_lines, foreign_lines
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
DIST = PYPROJECT["name"]
VERSION = PYPROJECT["version"]
#: Environment variables a child keeps: nothing that points at this repository or its venv.
_KEEP = {"HOME", "JAVA_HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}


_MLFLOW_RUNS = """
from mlflow.tracking import MlflowClient
client = MlflowClient("sqlite:///{cwd}/mlflow.db")
[run] = client.search_runs([client.get_experiment_by_name("quarantine-demo").experiment_id])
print(run.data.tags["pipeline"], run.data.tags["status"], int(run.data.metrics["records_quarantined"]))
"""


def _timed(label: str, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    print(f"[wheel e2e] {label}: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, f"{label} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of what it is made of (no stale ``build/`` of the work tree)."""
    src = tmp_path_factory.mktemp("wheel-src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "quarantine", src / "quarantine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    _timed("build the wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)])
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its ``local`` extra installed from PyPI (through pip's cache)."""
    # the README's install line, with the built wheel in place of the (unpublished) distribution
    local, databricks = block("install").commands("pip")
    assert block("install-docs").commands("pip") == [local, databricks]  # Getting started says the same
    (requirement,) = [a for a in local[2:] if not a.startswith("-")]
    assert requirement == f"{DIST}[local]" and databricks == ["pip", "install", DIST], (local, databricks)
    root = tmp_path_factory.mktemp("venv")
    _timed("create the venv", [sys.executable, "-m", "venv", str(root)], env=_clean_env())
    _timed(
        "pip install the wheel[local]",
        [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         requirement.replace(DIST, str(wheel))],
        env=_clean_env(),
    )
    return root


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEEP or k.lower().endswith("_proxy") or k.startswith("PIP_")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    java = shutil.which("java")
    if java and "JAVA_HOME" not in env:
        env["PATH"] = f"{Path(java).resolve().parent}:{env['PATH']}"
    return {**env, **extra}


def test_the_wheel_holds_the_library_its_data_and_metadata_only(wheel: Path) -> None:
    assert wheel.name.startswith(f"{DIST.replace('-', '_')}-{VERSION}-py3-none-any")
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"{DIST.replace('-', '_')}-{VERSION}.dist-info"

    assert {n.split("/")[0] for n in names} == {"quarantine", info}  # no tests/, scripts/, conf/, benchmarks/
    assert {
        "quarantine/py.typed",
        "quarantine/jars.toml",
        "quarantine/demo/conf/orders_demo.yml",
        "quarantine/demo/conf/expectations/orders.json",
    } <= names
    # the SQL library and the views' queries, every file of them
    sql = {str(p.relative_to(REPO).as_posix()) for p in (REPO / "quarantine" / "sql").rglob("*.sql")}
    assert sql and sql <= names
    assert not [n for n in names if "kafka_broker" in n or "/support/" in n]
    metadata = Parser().parsestr(zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode())
    assert metadata["Name"] == DIST
    core = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert any(r.startswith("mlflow-skinny") for r in core)
    assert not any(r.split()[0].rstrip("<>=!~,") in {"mlflow", "pyspark", "delta-spark"} for r in core)
    local = [r for r in metadata.get_all("Requires-Dist") if 'extra == "local"' in r]
    assert any(r.startswith("pyspark") for r in local) and any(r.startswith("delta-spark") for r in local)
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert "quarantine = quarantine.cli:console" in entry_points


@pytest.mark.timeout(1800)
def test_the_installed_wheel_runs_the_demo_outside_the_repository_printing_only_its_own_lines(
    venv: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The README's demo from the installed wheel: it works, and it prints the project's lines only."""
    work = tmp_path / "work"
    work.mkdir()
    jars = tmp_path / "jar-cache"
    # as a user runs it: no QUARANTINE_SPARK_LOG_LEVEL (the test session sets it; _clean_env drops it)
    env = _clean_env(QUARANTINE_JAR_CACHE=str(jars))
    bin_ = venv / "bin"

    probe = f"import importlib.metadata as m, quarantine; print(quarantine.__file__, m.version({DIST!r}))"
    where = _timed("import from the venv", [str(bin_ / "python"), "-c", probe], env=env, cwd=work).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == VERSION

    # the README's two commands, as written, in a folder outside the repository
    init_argv, run_argv, inspect_argv = block("install-demo").commands()
    demo = work / init_argv[init_argv.index("--out") + 1]
    assert init_argv[:2] == ["quarantine", "init-demo"] and run_argv[:2] == ["quarantine", "run"]
    assert inspect_argv[:2] == ["quarantine", "inspect"]
    init = _timed("quarantine init-demo", [str(bin_ / "quarantine"), *init_argv[1:]], env=env, cwd=work)
    assert "wrote 10,000 order events" in init.stdout
    run = _timed("quarantine run", [str(bin_ / "quarantine"), *run_argv[1:]], env=env, cwd=work)
    counts = re.finditer(r"^  (records in|ok -> target|quarantined) +([\d,]+)$", run.stdout, re.MULTILINE)
    summary = {m[1]: int(m[2].replace(",", "")) for m in counts}
    assert "status succeeded" in run.stdout and summary["records in"] == 10_000, run.stdout
    _assert_the_readme_shows_this_summary(run.stdout)
    looked = _timed("quarantine inspect", [str(bin_ / "quarantine"), *inspect_argv[1:]], env=env, cwd=work)
    shown = {s for s in ("decode", "parse_order", "convert", "check_order", "expect_order") if s in looked.stdout}
    assert shown, looked.stdout  # the newest failures, by stage

    # upkeep, then the quiet output of init-demo, run and maintain (open rows are kept: the tables below hold)
    conf = run_argv[run_argv.index("--conf") + 1]
    kept = _timed("quarantine maintain", [str(bin_ / "quarantine"), "maintain", "--conf", conf], env=env, cwd=work)
    assert_only_the_projects_own_lines([init, run, kept], run, conf)
    assert foreign_lines(looked) == []

    from quarantine.spark.jars import spark_jar_dir, spark_jars

    folder = spark_jar_dir().relative_to(os.environ["QUARANTINE_JAR_CACHE"])  # spark-<pyspark version>
    resolved = sorted(p.relative_to(jars) for p in jars.rglob("*") if p.is_file())
    assert resolved == sorted(folder / j.file_name for j in spark_jars())  # downloaded by the installed package

    # the config's MLflow URI is sqlite:///mlflow.db: the folder the command ran in
    tracked = _timed("read the MLflow run back", [str(bin_ / "python"), "-c", _MLFLOW_RUNS.format(cwd=work)], env=env)
    assert tracked.stdout.split() == ["orders_demo", "succeeded", str(summary["quarantined"])]

    _run_the_quickstart(bin_ / "python", env, work)

    spark: Any = request.getfixturevalue("spark")  # only now: the two JVMs never run at once
    source = spark.read.format("delta").load(str(demo / "source"))
    target = spark.read.format("delta").load(str(demo / "orders"))
    quarantine = spark.read.format("delta").load(str(demo / "quarantine"))
    coordinates = ["topic", "partition", "offset"]
    ok, bad = target.count(), quarantine.count()
    assert ok + bad == source.count() == 10_000
    assert (ok, bad) == (summary["ok -> target"], summary["quarantined"]) and 0 < bad < 1_000
    stages = {r.stage for r in quarantine.select("stage").distinct().collect()}
    assert stages == {"decode", "parse_order", "convert", "check_order", "expect_order"}
    landed = target.select(
        *[target[f"_source_{c}"].alias(c) for c in coordinates]
    ).unionByName(quarantine.select(*coordinates))
    assert landed.distinct().count() == 10_000
    assert landed.exceptAll(source.select(*coordinates)).count() == 0  # every record once, none invented


def _run_the_quickstart(python: Path, env: dict[str, str], work: Path) -> None:
    """Getting started's quickstart from the wheel-only venv, in the folder of the README's demo
    (the same ``init-demo`` command, already run): no ``conf/`` of a checkout (issue 54, point 4).
    After the README's run it is a re-run with nothing new: it runs no batch, and the summary says
    so; the error-context lines stay off a script's output (Python's default logging)."""
    (init,) = block("quickstart-demo").commands()
    assert init == block("install-demo").commands()[0], "the quickstart's demo is the README's"
    script = work / "quickstart.py"  # the page's two blocks, as a notebook's cells run one after the other
    script.write_text(block("quickstart").body + "\n" + block("quickstart-stages").body
                      + "\nprint('stages:', [s.name for s in pipe.stages])\n", encoding="utf-8")
    done = _timed("the quickstart (python)", [str(python), str(script)], env=env, cwd=work)
    out = done.stdout
    assert "pipeline orders_demo" in out and "|offset|" in out.replace(" ", ""), out
    assert re.search(r"^  source: nothing new since version 0$", out, re.MULTILINE), out
    assert re.search(r"^  records in +0$", out, re.MULTILINE), out
    assert "stages: ['decode', 'parse_order']" in out, out
    assert "error context" not in done.stderr, done.stderr[-3000:]


def _assert_the_readme_shows_this_summary(out: str) -> None:
    """The README's "The run prints its summary" block is this run's summary, line for line:
    a "…" there stands for what it leaves out (the run id, a folder, GX's details)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = re.search(r"The run prints its summary:\n\n```\n(.*?)```", readme, re.S)
    assert shown, "README: the summary block after 'The run prints its summary:'"
    expected = shown.group(1).splitlines()
    start = out.index("pipeline orders_demo")
    printed = out[start:].splitlines()[: len(expected)]
    for want, got in zip(expected, printed, strict=True):
        pattern = ".*?".join(re.escape(part) for part in want.split("…"))
        assert re.fullmatch(pattern, got), f"README shows {want!r}, the run printed {got!r}"
