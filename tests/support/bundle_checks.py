"""Checks of a Databricks asset bundle, each over a bundle root, each returning its problems.

Every check takes the folder holding ``databricks.yml`` and returns a list of
problems, one sentence each, naming the file and the thing that is wrong (an empty
list: no problem). ``tests/integration/test_bundle.py`` runs them on the repository
and on deliberately broken copies of it, so a check that cannot fail is found out.
Nothing here starts Spark or talks to a workspace.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "ENV_REFERENCE",
    "FAKE_CLUSTER_ENVIRONMENT",
    "Bundle",
    "dashboard_definition",
    "dashboard_problems",
    "dataset_sql",
    "inline_secret_problems",
    "model_problems",
    "path_problems",
    "schema_problems",
    "substitute",
    "target_variables",
    "user_code_problems",
    "variable_problems",
    "wheel_parameter_problems",
]

#: ``${var.name}``: a bundle variable.
VAR = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_]*)\}")
#: ``{{job.parameters.name}}``: a job parameter (a Databricks dynamic value reference).
JOB_PARAMETER = re.compile(r"\{\{\s*job\.parameters\.([A-Za-z0-9_.-]+)\s*\}\}")
#: A reference that puts no secret in the text: a Databricks secret, an environment variable.
REFERENCE = re.compile(
    r"\{\{secrets/(?:\$\{var\.[A-Za-z0-9_]+\}|[^/{}\s]+)/[^/{}\s]+\}\}|\$\{env:[A-Za-z_][A-Za-z0-9_]*\}"
)
#: A key whose value is a credential (a scope's *name* is not one).
SECRET_KEY = re.compile(r"password|passwd|secret|token|credential|jaas|api[_.-]?key", re.IGNORECASE)
#: ``password="…"`` / ``username=…`` inside a JAAS line or any other text.
CREDENTIAL_ASSIGNMENT = re.compile(r"\b(password|username)\s*=\s*([\"']?)([^\"';\s]*)\2", re.IGNORECASE)

#: ``${env:NAME}`` in a config (read when it is loaded).
ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")

#: What the Kafka job cluster's environment holds (secret references resolved), for tests loading configs.
FAKE_CLUSTER_ENVIRONMENT = {
    "KAFKA_BOOTSTRAP_SERVERS": "broker-1:9093",
    "KAFKA_SASL_USERNAME": "bundle-check",
    "KAFKA_SASL_PASSWORD": "bundle-check-not-a-secret",
}


@dataclass(frozen=True)
class Bundle:
    """A bundle as written: the root file, the resource files it includes and their jobs."""

    root: Path
    config: Mapping[str, Any]
    resource_files: tuple[Path, ...]

    @classmethod
    def load(cls, root: Path) -> Bundle:
        """Read ``root/databricks.yml`` and the files its ``include`` globs match."""
        config = _load(root / "databricks.yml")
        files: list[Path] = []
        for pattern in config.get("include", []):
            files.extend(sorted(root.glob(pattern)))
        return cls(root, config, tuple(files))

    @property
    def files(self) -> tuple[Path, ...]:
        """``databricks.yml`` and every included file."""
        return (self.root / "databricks.yml", *self.resource_files)

    def resources(self, kind: str) -> dict[str, tuple[Path, dict[str, Any]]]:
        """Every resource of ``kind`` (``jobs``, ``pipelines``, ``dashboards``) by its key, with
        the file that defines it; a key defined in two files is an error."""
        found: dict[str, tuple[Path, dict[str, Any]]] = {}
        for f in self.resource_files:
            for name, resource in (_load(f).get("resources") or {}).get(kind, {}).items():
                if name in found:
                    raise ValueError(f"{kind} {name} is defined in {found[name][0].name} and {f.name}")
                found[name] = (f, resource)
        return found

    def jobs(self) -> dict[str, tuple[Path, dict[str, Any]]]:
        """Every job by its key, with the file that defines it."""
        return self.resources("jobs")

    def pipelines(self) -> dict[str, tuple[Path, dict[str, Any]]]:
        """Every (Lakeflow declarative) pipeline by its key, with the file that defines it."""
        return self.resources("pipelines")

    def dashboards(self) -> dict[str, tuple[Path, dict[str, Any]]]:
        """Every dashboard by its key, with the file that defines it."""
        return self.resources("dashboards")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a YAML mapping")
    return data


def _strings(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a YAML tree, with its dotted location (keys included as their own path)."""
    if isinstance(node, str):
        yield where, node
    elif isinstance(node, Mapping):
        for k, v in node.items():
            yield from _strings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{where}[{i}]")


# --------------------------------------------------------------------------- schema and models


def schema_problems(root: Path, schema: Path) -> list[str]:
    """Each bundle file against the Databricks CLI's bundle JSON schema (draft-07)."""
    import jsonschema
    from jsonschema.exceptions import best_match

    text = schema.read_text(encoding="utf-8")
    # the CLI's \p{L} / \p{N} classes, spelled for Python's re
    text = text.replace(r"[\\p{L}\\p{N}]", r"[^\\W_]").replace(r"\\p{L}", r"[^\\W\\d_]")
    if r"\\p{" in text:
        raise ValueError("the schema uses a Unicode class this check does not translate")
    validator = jsonschema.Draft7Validator(json.loads(text))
    problems = []
    for path in Bundle.load(root).files:
        error = best_match(validator.iter_errors(_load(path)))
        if error is not None:
            problems.append(f"{path.name}: {error.json_path}: {error.message[:500]}")
    return problems


def model_problems(root: Path) -> list[str]:
    """Each job, pipeline and dashboard against the strict typed models ``databricks.bundles.jobs.Job``,
    ``databricks.bundles.pipelines.Pipeline`` and ``databricks.bundles.dashboards.Dashboard``
    (unknown fields are errors)."""
    from databricks.bundles.dashboards import Dashboard
    from databricks.bundles.jobs import Job
    from databricks.bundles.pipelines import Pipeline

    problems = []
    for name, (path, pipe) in Bundle.load(root).pipelines().items():
        try:
            Pipeline.from_dict(pipe)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            problems.append(f"{path.name}: pipeline {name}: {exc}")
    for name, (path, dash) in Bundle.load(root).dashboards().items():
        try:
            Dashboard.from_dict(dash)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            problems.append(f"{path.name}: dashboard {name}: {exc}")
    for name, (path, job) in Bundle.load(root).jobs().items():
        try:
            model = Job.from_dict(job)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            problems.append(f"{path.name}: job {name}: {exc}")
            continue
        if not model.tasks:
            problems.append(f"{path.name}: job {name} has no tasks")
    return problems


# --------------------------------------------------------------------------- variables


def target_variables(root: Path, target: str) -> dict[str, str]:
    """The variables' values in ``target``: declared defaults, then the target's own."""
    config = Bundle.load(root).config
    values = {k: str(v["default"]) for k, v in config.get("variables", {}).items() if "default" in v}
    values.update({k: str(v) for k, v in config["targets"][target].get("variables", {}).items()})
    return values


def variable_problems(root: Path) -> list[str]:
    """Every ``${var.x}`` is declared, and every variable without a default (or a lookup) is set by every target."""
    bundle = Bundle.load(root)
    declared = set(bundle.config.get("variables", {}))
    problems = []
    for path in bundle.files:
        for name in sorted(set(VAR.findall(path.read_text(encoding="utf-8"))) - declared):
            problems.append(f"{path.name}: ${{var.{name}}} is used but not declared under variables")
    required = {
        k for k, v in bundle.config.get("variables", {}).items() if "default" not in v and "lookup" not in v
    }
    for target, settings in bundle.config.get("targets", {}).items():
        for name in sorted(required - set((settings or {}).get("variables", {}))):
            problems.append(f"databricks.yml: target {target} does not set variable {name} (it has no default)")
    return problems


# --------------------------------------------------------------------------- secrets


def inline_secret_problems(root: Path) -> list[str]:
    """No credential written in the bundle or in ``conf/``: only secret or environment references.

    A value under a secret-looking key (``password``, ``token``, ``sasl.jaas.config``…)
    must be nothing but references (``{{secrets/<scope>/<key>}}``, ``${env:NAME}``);
    in a JAAS line or any other text (a ``--set`` parameter), ``username=`` and
    ``password=`` must be given a reference.
    """
    files = [*Bundle.load(root).files, *sorted((root / "conf").glob("*.yml"))]
    problems = []
    for path in files:
        for where, value in _strings(_load(path)):
            key = where.rsplit(".", 1)[-1] if "." in where else where
            bare = REFERENCE.sub("", value)
            for match in CREDENTIAL_ASSIGNMENT.finditer(bare):
                if match.group(3):
                    what = match.group(1).lower()
                    problems.append(f"{path.name}: {where}: an inline {what} (use a secret reference)")
            if (
                SECRET_KEY.search(key)
                and not key.lower().endswith("scope")
                and "jaas" not in key.lower()
                and bare.strip()
            ):
                problems.append(f"{path.name}: {where}: an inline secret value (use a secret reference)")
    return problems


# --------------------------------------------------------------------------- paths


def path_problems(root: Path) -> list[str]:
    """Every file a job names exists: notebooks (relative to their resource file) and workspace files."""
    bundle = Bundle.load(root)
    problems = []
    for pattern in bundle.config.get("include", []):
        if not list(root.glob(pattern)):
            problems.append(f"databricks.yml: include {pattern} matches no file")
    for name, (path, job) in bundle.jobs().items():
        for task in job.get("tasks", []):
            notebook = (task.get("notebook_task") or {}).get("notebook_path")
            if notebook is not None:
                resolved = (path.parent / notebook).resolve()
                if not resolved.is_file():
                    task_key = task["task_key"]
                    problems.append(f"{path.name}: job {name} task {task_key}: notebook {notebook} does not exist")
                elif not resolved.read_text(encoding="utf-8").startswith("# Databricks notebook source\n"):
                    problems.append(f"{path.name}: job {name}: {notebook} is not a Databricks source notebook")
        for target in bundle.config.get("targets", {}):
            variables = target_variables(root, target)
            for where, value in _strings(job):
                if "${workspace.file_path}/" not in value:
                    continue
                text = substitute(value, root, target, variables, {})
                for candidate in re.findall(r"(/\S+)", text):
                    if candidate.startswith(str(root)) and not Path(candidate).exists():
                        rel = Path(candidate).relative_to(root)
                        problems.append(f"{path.name}: job {name} {where} (target {target}): {rel} does not exist")
    for name, (path, pipe) in bundle.pipelines().items():
        named = [lib["file"]["path"] for lib in pipe.get("libraries", []) if "file" in lib]
        named += [pipe["root_path"]] if "root_path" in pipe else []
        for rel in named:
            if not (path.parent / rel).exists():
                problems.append(f"{path.name}: pipeline {name}: {rel} does not exist")
    return sorted(set(problems))


# --------------------------------------------------------------------------- dashboards


def dashboard_definition(path: Path, dash: Mapping[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The ``.lvdash.json`` a dashboard resource's ``file_path`` names (relative to its file), parsed."""
    file = (path.parent / str(dash.get("file_path", ""))).resolve()
    data = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{file}: expected a JSON object")
    return file, data


def dataset_sql(dataset: Mapping[str, Any]) -> str:
    """A Lakeview dataset's SQL (``queryLines`` joined, or ``query``)."""
    lines = dataset.get("queryLines")
    return "".join(lines) if isinstance(lines, list) else str(dataset.get("query", ""))


def dashboard_problems(root: Path) -> list[str]:
    """Every dashboard resource names a ``.lvdash.json`` that exists and holds together.

    Its datasets have unique names and SQL; every widget query reads a dataset that
    exists; every field a widget's encodings name is a field of its queries (what
    Lakeview shows as an empty chart otherwise). Whether the SQL runs is for a test
    with tables (``tests/integration/test_dashboard.py``).
    """
    problems = []
    for name, (path, dash) in Bundle.load(root).dashboards().items():
        where = f"{path.name}: dashboard {name}"
        for key in ("display_name", "warehouse_id", "file_path"):
            if not dash.get(key):
                problems.append(f"{where}: no {key}")
        if not dash.get("file_path"):
            continue
        try:
            file, data = dashboard_definition(path, dash)
        except FileNotFoundError:
            problems.append(f"{where}: {dash['file_path']} does not exist")
            continue
        except ValueError as exc:
            problems.append(f"{where}: {dash['file_path']} is not a dashboard definition: {exc}")
            continue
        if not file.name.endswith(".lvdash.json"):
            problems.append(f"{where}: {dash['file_path']} does not end in .lvdash.json")
        names = [d.get("name") for d in data.get("datasets", [])]
        if not names or len(set(names)) != len(names):
            problems.append(f"{where}: dataset names {names} are missing or repeated")
        for d in data.get("datasets", []):
            if not dataset_sql(d).strip():
                problems.append(f"{where}: dataset {d.get('name')} has no SQL")
        pages = data.get("pages") or []
        if not pages:
            problems.append(f"{where}: no pages")
        for page in pages:
            for item in page.get("layout", []):
                widget = item.get("widget", {})
                fields: set[str] = set()
                queries = {q.get("name") for q in widget.get("queries", [])}
                for q in widget.get("queries", []):
                    dataset = q.get("query", {}).get("datasetName")
                    if dataset not in names:
                        problems.append(f"{where}: widget {widget.get('name')} reads dataset {dataset}, not defined")
                    fields |= {f.get("name") for f in q.get("query", {}).get("fields", [])}
                for channel, enc in (widget.get("spec", {}).get("encodings") or {}).items():
                    for e in enc if isinstance(enc, list) else [enc]:
                        if not isinstance(e, Mapping) or "fieldName" not in e:
                            continue
                        if e["fieldName"] not in fields:
                            problems.append(
                                f"{where}: widget {widget.get('name')} {channel} shows {e['fieldName']}, "
                                "not a field of its queries"
                            )
                        if "queryName" in e and e["queryName"] not in queries:
                            problems.append(f"{where}: widget {widget.get('name')} names query {e['queryName']}")
    return problems


# --------------------------------------------------------------------------- wheel task parameters


def substitute(
    text: str, root: Path, target: str, variables: Mapping[str, str], parameters: Mapping[str, str]
) -> str:
    """``text`` as a run of ``target`` sees it: variables, the synced files' root, job parameters."""
    text = text.replace("${workspace.file_path}", str(root)).replace("${bundle.target}", target)
    text = text.replace("${bundle.name}", "quarantine")
    text = VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), text)
    return JOB_PARAMETER.sub(lambda m: parameters.get(m.group(1), m.group(0)), text)


def _cluster_environment_of(job: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, str]:
    """The environment variables of the task's job cluster (secret references stand in for their values)."""
    for cluster in job.get("job_clusters", []):
        if cluster.get("job_cluster_key") == task.get("job_cluster_key"):
            return {k: str(v) for k, v in (cluster.get("new_cluster", {}).get("spark_env_vars") or {}).items()}
    return {}


@contextmanager
def _only_environment(names: set[str], env: Mapping[str, str]) -> Iterator[None]:
    """``names`` set as in ``env`` and unset when ``env`` lacks them, as on the job's cluster."""
    saved = {k: os.environ.get(k) for k in names}
    for k in names:
        if k in env:
            os.environ[k] = env[k]
        else:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _is_catalog_name(name: str | None) -> bool:
    return name is not None and "/" not in name and name.count(".") == 2


def wheel_parameter_problems(root: Path, target: str) -> list[str]:
    """Each wheel task's parameters, as ``target`` runs them, parse and load into a valid config.

    Variables, ``${workspace.file_path}`` (the repository) and job parameters' defaults
    are substituted. Every ``${env:NAME}`` the config reads must be set by the task's job
    cluster (``spark_env_vars``; a secret reference stands in for its value). Tables must
    be Unity Catalog names, checkpoints under ``checkpoint_root``.
    """
    from quarantine.cli import _parser
    from quarantine.commands.options import overrides
    from quarantine.config import load_config
    from quarantine.errors import ConfigError

    bundle = Bundle.load(root)
    variables = target_variables(root, target)
    problems = []
    for name, (path, job) in bundle.jobs().items():
        parameters = {
            p["name"]: substitute(str(p.get("default", "")), root, target, variables, {})
            for p in job.get("parameters", [])
        }
        for task in job.get("tasks", []):
            wheel = task.get("python_wheel_task")
            if wheel is None:
                continue
            where = f"{path.name}: job {name} task {task['task_key']} (target {target})"
            argv = [substitute(str(p), root, target, variables, parameters) for p in wheel.get("parameters", [])]
            unresolved = [a for a in argv if "${" in a.replace("${env:", "") or "{{" in a]
            if unresolved:
                problems.append(f"{where}: unresolved references in {unresolved}")
                continue
            try:
                args = _parser().parse_args(argv)
            except SystemExit:
                problems.append(f"{where}: the quarantine CLI rejects {argv}")
                continue
            if args.command == "init-demo":
                if not _is_catalog_name(args.table):
                    problems.append(f"{where}: init-demo --table {args.table} is not catalog.schema.table")
                continue
            conf_text = Path(args.conf).read_text(encoding="utf-8") if Path(args.conf).is_file() else ""
            names = set(ENV_REFERENCE.findall(conf_text + " ".join(argv)))
            cluster_env = {
                k: substitute(v, root, target, variables, parameters)
                for k, v in _cluster_environment_of(job, task).items()
            }
            try:
                with _only_environment(names, cluster_env):
                    config = load_config(args.conf, overrides(args.set))
            except ConfigError as exc:
                problems.append(f"{where}: {exc}")
                continue
            if getattr(args, "pipeline_guard", None) and args.pipeline_guard != config.pipeline:
                problems.append(f"{where}: --pipeline {args.pipeline_guard} but the config is {config.pipeline}")
            tables = {
                "target.table": config.target.table,
                "errors.deadletterqueue.table.name": config.errors.dlq_table_name,
                "metrics.table": config.metrics.table,
            }
            if config.source.format.value != "kafka":
                tables["source.table"] = config.source.table
            for key, table in tables.items():
                if not _is_catalog_name(table):
                    problems.append(f"{where}: {key} is {table!r}, not a Unity Catalog catalog.schema.table")
            checkpoint = config.target.checkpoint
            if checkpoint is not None and not checkpoint.startswith(variables["checkpoint_root"].rstrip("/") + "/"):
                problems.append(f"{where}: target.checkpoint {checkpoint} is not under checkpoint_root")
    return problems


# --------------------------------------------------------------------------- a user's own code


#: ``declare("…")`` in a declarative pipeline's source file: the config it declares.
_DECLARE = re.compile(r"""\bdeclare\(\s*["']([^"']+)["']""")


def _wheel_modules(wheel: Path) -> set[str]:
    """The top-level packages and modules a wheel installs."""
    with zipfile.ZipFile(wheel) as whl:
        tops = {name.split("/", 1)[0] for name in whl.namelist()}
    return {t.removesuffix(".py") for t in tops if not t.endswith((".dist-info", ".data"))}


def _installed(resource: Path, entries: list[Any], where: str, problems: list[str]) -> dict[str, set[str]]:
    """The wheels ``entries`` name (paths or globs relative to ``resource``'s folder, as the bundle
    reads them) by file name, each with what it installs; a glob no built wheel matches is a problem."""
    wheels: dict[str, set[str]] = {}
    for entry in entries:
        if not str(entry).endswith(".whl"):
            continue  # a PyPI requirement: what it installs is not known here
        found = sorted(resource.parent.glob(str(entry)))
        if not found:
            problems.append(f"{where}: {entry} matches no built wheel (build the bundle's artifacts first)")
        wheels |= {w.name: _wheel_modules(w) for w in found}
    return wheels


def _stage_problems(config: Any, conf: Path, wheels: Mapping[str, set[str]], where: str) -> list[str]:
    """Each python stage of ``config`` whose module is neither beside it (its ``path`` option, the
    config's folder by default: files the bundle syncs) nor in one of ``wheels``."""
    problems = []
    for spec in config.stages:
        if spec.type != "python":
            continue
        top = str(spec.options["function"]).split(":", 1)[0].split(".", 1)[0]
        folder = Path(spec.options.get("path") or conf.parent)
        if (folder / f"{top}.py").is_file() or (folder / top).is_dir():
            continue
        if any(top in modules for modules in wheels.values()):
            continue
        shipped = ", ".join(sorted(wheels)) or "none"
        problems.append(f"{where}: stage {spec.name}'s module {top} is neither beside {conf.name} (in {folder}) "
                        f"nor in a wheel it installs ({shipped})")
    return problems


def user_code_problems(root: Path, target: str) -> list[str]:
    """Every python stage's module reaches where its task or pipeline runs, as ``target`` deploys it.

    A wheel task's config (its ``--conf`` and ``--set``) and a pipeline's (``declare("…")`` in its
    source files, from its ``root_path``, with its ``quarantine.set.*`` settings) are loaded; each
    python stage's module must be beside the config (the bundle syncs it) or in a built wheel the
    task installs (``libraries: - whl:``, or its serverless environment's ``dependencies``) or
    the pipeline does (``environment.dependencies``). Run after the artifacts are built.
    """
    from quarantine.cli import _parser
    from quarantine.commands.options import overrides
    from quarantine.config import load_config
    from quarantine.declarative import pipeline_overrides

    bundle = Bundle.load(root)
    variables = target_variables(root, target)
    problems: list[str] = []
    for name, (path, job) in bundle.jobs().items():
        environments = {e["environment_key"]: e.get("spec", {}) for e in job.get("environments", [])}
        for task in job.get("tasks", []):
            wheel = task.get("python_wheel_task")
            if wheel is None:
                continue
            where = f"{path.name}: job {name} task {task['task_key']} (target {target})"
            argv = [substitute(str(p), root, target, variables, {}) for p in wheel.get("parameters", [])]
            args = _parser().parse_args(argv)
            if getattr(args, "conf", None) is None:
                continue
            entries = [lib["whl"] for lib in task.get("libraries", []) if "whl" in lib]
            entries += list(environments.get(task.get("environment_key"), {}).get("dependencies", []))
            wheels = _installed(path, entries, where, problems)
            config = load_config(args.conf, overrides(args.set))
            problems += _stage_problems(config, Path(args.conf), wheels, where)
    for name, (path, pipe) in bundle.pipelines().items():
        where = f"{path.name}: pipeline {name} (target {target})"
        wheels = _installed(path, list(pipe.get("environment", {}).get("dependencies", [])), where, problems)
        configured = pipe.get("configuration", {})
        settings = {k: substitute(str(v), root, target, variables, {}) for k, v in configured.items()}
        pipeline_root = path.parent / pipe.get("root_path", ".")
        for lib in pipe.get("libraries", []):
            source = (path.parent / lib.get("file", {}).get("path", "")).read_text(encoding="utf-8")
            for declared in _DECLARE.findall(source):
                conf = (pipeline_root / declared).resolve()
                config = load_config(conf, pipeline_overrides(settings))
                problems += _stage_problems(config, conf, wheels, where)
    return problems
