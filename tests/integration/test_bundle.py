"""The Databricks asset bundle: schema-valid, typed-model-valid, and runnable as written.

The checks live in ``tests/support/bundle_checks.py``; each takes a bundle root and
returns its problems. Here they run on the repository (no problem allowed) and on
deliberately broken copies of it (the problem must be found and named), so that a
check that cannot fail does not pass for one that works:

* every bundle file validates against the Databricks CLI's bundle JSON schema
  (``../shared/schemas/databricks-bundle.schema.json``, not copied into the repository: its
  licence; a user's checkout without it skips those three checks, CI fails without it), and
  every job loads into ``databricks.bundles.jobs.Job``;
* every ``${var.x}`` is declared, and every variable without a default is set by every target;
* no credential is written in the bundle or in ``conf/``: only ``{{secrets/<scope>/<key>}}``
  (resolved by Databricks in a cluster's environment variables) and ``${env:NAME}``;
* every notebook and workspace file a job names exists;
* every wheel task's parameters, as each target runs them, parse with the ``quarantine``
  CLI and load into a valid config on Unity Catalog tables;
* the Lakeview dashboard resource names a ``.lvdash.json`` that holds together (its
  datasets, widget queries and encodings); ``tests/integration/test_dashboard.py`` runs
  its SQL on the tables of a local run.

No Spark is started.
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.bundle_checks import (
    FAKE_CLUSTER_ENVIRONMENT,
    Bundle,
    dashboard_definition,
    dashboard_problems,
    dataset_sql,
    inline_secret_problems,
    model_problems,
    path_problems,
    schema_problems,
    substitute,
    target_variables,
    variable_problems,
    wheel_parameter_problems,
)
from tests.support.readme import block

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO.parent / "shared" / "schemas" / "databricks-bundle.schema.json"
TARGETS = ("dev", "prod")
JOBS = {"quarantine_orders", "quarantine_orders_kafka", "quarantine_replay", "quarantine_triage_replay",
        "quarantine_maintain", "orders_declarative_update"}


def _jobs(root: Path = REPO) -> dict[str, tuple[Path, dict[str, Any]]]:
    return Bundle.load(root).jobs()


def _needs_schema() -> None:
    """The bundle JSON schema is the Databricks CLI's, under the Databricks License, kept beside
    the checkout in ``../shared/schemas/`` and not copied into the repository (its README says
    so). A user's clone without it skips the three schema checks, saying why; CI (``CI`` set, as
    CI runs ``.ci/run``) has it beside the checkout, and fails if it does not: there the check
    runs, never skips. The typed-model check below needs no file and always runs."""
    if SCHEMA.is_file():
        return
    why = (f"{SCHEMA} is not beside this checkout: the Databricks CLI's bundle schema (Databricks "
           "License) is not copied into the repository; the typed-model checks ran instead")
    assert not os.environ.get("CI"), why
    pytest.skip(why)


# --------------------------------------------------------------------------- the repository's bundle


def test_root_includes_every_resource_file_and_declares_the_wheel_artifact() -> None:
    bundle = Bundle.load(REPO)
    assert bundle.config["bundle"]["name"] == "quarantine"
    assert {f.name for f in bundle.resource_files} == {p.name for p in (REPO / "bundles").glob("*.yml")}
    (artifact,) = bundle.config["artifacts"].values()
    assert artifact["type"] == "whl" and "wheel" in artifact["build"]
    assert set(_jobs()) == JOBS


def test_every_bundle_file_matches_the_databricks_bundle_schema() -> None:
    _needs_schema()
    assert schema_problems(REPO, SCHEMA) == []


def test_every_job_loads_into_the_strict_typed_model() -> None:
    from databricks.bundles.jobs import Job

    assert model_problems(REPO) == []
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict({**_jobs()["quarantine_orders"][1], "taskz": []})  # type: ignore[arg-type]


def test_every_variable_used_is_declared_and_set_in_every_target() -> None:
    assert variable_problems(REPO) == []
    declared = Bundle.load(REPO).config["variables"]
    assert {"catalog", "schema", "checkpoint_root", "kafka_bootstrap_servers", "secret_scope"} <= set(declared)
    assert target_variables(REPO, "dev")["catalog"] != target_variables(REPO, "prod")["catalog"]


def test_no_secret_is_written_in_the_bundle_or_the_configs() -> None:
    assert inline_secret_problems(REPO) == []


def test_every_path_a_job_names_exists() -> None:
    assert path_problems(REPO) == []


def test_every_job_notifies_the_targets_failure_variables_when_a_run_fails() -> None:
    """Issue 62: a failed job run is told to the emails and notification destinations (Slack, Teams,
    PagerDuty, a webhook) the target's bundle variables name; none by default."""
    for name, (path, job) in _jobs().items():
        assert job["email_notifications"] == {"on_failure": "${var.failure_emails}"}, (path.name, name)
        assert job["webhook_notifications"] == {"on_failure": "${var.failure_destinations}"}, (path.name, name)
    declared = Bundle.load(REPO).config["variables"]
    for variable in ("failure_emails", "failure_destinations", "alert_subscriptions"):
        assert declared[variable]["type"] == "complex" and declared[variable]["default"] == [], variable


def test_the_sql_alerts_over_the_metrics_and_quarantine_tables_are_bundle_resources() -> None:
    """Issue 62: stuck records and a topic's error rate as Databricks SQL alerts
    (tests/integration/test_bundle_alerts.py runs their queries on a local run's tables)."""
    alerts = Bundle.load(REPO).resources("alerts")
    assert set(alerts) == {"quarantine_stuck_records", "quarantine_error_rate"}
    assert {path.name for path, _ in alerts.values()} == {"quarantine_alerts.yml"}
    _needs_schema()
    assert schema_problems(REPO, SCHEMA) == []


def test_the_dashboard_shows_the_reports_figures_over_the_targets_schema() -> None:
    from quarantine.ops.report_page import FIGURES

    assert dashboard_problems(REPO) == []
    (name,) = Bundle.load(REPO).dashboards()
    path, dash = Bundle.load(REPO).dashboards()[name]
    assert (dash["dataset_catalog"], dash["dataset_schema"]) == ("${var.catalog}", "${var.schema}")
    assert dash["warehouse_id"] == "${var.warehouse_id}"
    assert "lookup" in Bundle.load(REPO).config["variables"]["warehouse_id"]
    _, definition = dashboard_definition(path, dash)
    assert [d["name"] for d in definition["datasets"]] == [fig for fig, _ in FIGURES]
    charts = {q["query"]["datasetName"] for item in definition["pages"][0]["layout"]
              for q in item["widget"].get("queries", []) if q["name"] == "main_query"}
    assert charts == {fig for fig, _ in FIGURES}, "one chart per figure"
    # the tables it reads are the ones the jobs write (the file is not variable-substituted)
    tables = set(re.findall(r"\bFROM\s+([A-Za-z_]\w*)", " ".join(dataset_sql(d) for d in definition["datasets"])))
    quarantine_table = target_variables(REPO, "prod")["quarantine_table"]
    assert tables == {quarantine_table, "quarantine_metrics"}
    jobs_text = " ".join(f.read_text(encoding="utf-8") for f in Bundle.load(REPO).resource_files)
    assert "metrics.table=${var.catalog}.${var.schema}.quarantine_metrics" in jobs_text
    assert "deadletterqueue.table.name=${var.catalog}.${var.schema}.${var.quarantine_table}" in jobs_text


@pytest.mark.parametrize("target", TARGETS)
def test_wheel_parameters_parse_into_configs_on_unity_catalog_tables(target: str) -> None:
    assert wheel_parameter_problems(REPO, target) == []


def test_targets_dev_is_development_and_default_prod_is_production_with_root_path_and_permissions() -> None:
    targets = Bundle.load(REPO).config["targets"]
    assert set(targets) == set(TARGETS)
    assert targets["dev"]["mode"] == "development" and targets["dev"]["default"] is True
    prod = targets["prod"]
    assert prod["mode"] == "production"
    assert prod["workspace"]["root_path"].startswith("/Workspace/")
    levels = {p["level"] for p in prod["permissions"]}
    assert {"CAN_MANAGE", "CAN_VIEW"} <= levels


def test_the_batch_job_creates_its_source_table_first_with_the_wheel_entry_point() -> None:
    _, job = _jobs()["quarantine_orders"]
    tasks = {t["task_key"]: t for t in job["tasks"]}
    assert tasks["run_pipeline"]["depends_on"] == [{"task_key": "create_source"}]
    setup = tasks["create_source"]["python_wheel_task"]["parameters"]
    assert setup[:2] == ["init-demo", "--table"] and "--if-missing" in setup
    run = tasks["run_pipeline"]["python_wheel_task"]["parameters"]
    assert f"source.table={setup[2]}" in run, "the pipeline must read the table the setup task creates"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["quarantine"] == "quarantine.cli:console"  # exits non-zero on failure
    for name, (_, each) in _jobs().items():
        for task in each["tasks"]:
            wheel = task.get("python_wheel_task")
            if wheel:
                assert wheel["package_name"] == project["name"] == "spark-quarantine", name
                assert wheel["entry_point"] == "quarantine", name
                if "environment_key" in task:  # serverless: the wheel is its environment's dependency
                    (env,) = [e for e in each["environments"] if e["environment_key"] == task["environment_key"]]
                    assert any(d.endswith(".whl") for d in env["spec"]["dependencies"]), name
                else:
                    assert any(lib.get("whl", "").endswith(".whl") for lib in task["libraries"]), name


def test_the_kafka_job_runs_continuously_with_credentials_from_the_secret_scope() -> None:
    _, job = _jobs()["quarantine_orders_kafka"]
    assert job["continuous"]["pause_status"] == "UNPAUSED" and "schedule" not in job
    (task,) = job["tasks"]  # continuous jobs: no task dependencies, no task retry policy
    assert "max_retries" not in task and "depends_on" not in task
    (cluster,) = job["job_clusters"]
    env = cluster["new_cluster"]["spark_env_vars"]
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "${var.kafka_bootstrap_servers}"
    assert env["KAFKA_SASL_USERNAME"] == "{{secrets/${var.secret_scope}/kafka-username}}"
    assert env["KAFKA_SASL_PASSWORD"] == "{{secrets/${var.secret_scope}/kafka-password}}"
    params = task["python_wheel_task"]["parameters"]
    assert "${workspace.file_path}/conf/${bundle.target}.yml" in params
    assert not any("{{secrets/" in p for p in params), "task parameters do not resolve secret references"


@pytest.mark.parametrize("target", TARGETS)
def test_the_target_s_config_names_the_tables_the_kafka_job_sets(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """conf/<target>.yml is usable on its own (a notebook, a CLI on a cluster): its tables
    are the ones the bundle's variables give the job."""
    from quarantine.commands.options import overrides
    from quarantine.config import TriggerKind, load_config

    for k, v in FAKE_CLUSTER_ENVIRONMENT.items():
        monkeypatch.setenv(k, v)
    _, job = _jobs()["quarantine_orders_kafka"]
    variables = target_variables(REPO, target)
    params = [substitute(p, REPO, target, variables, {}) for p in job["tasks"][0]["python_wheel_task"]["parameters"]]
    sets = overrides([params[i + 1] for i, p in enumerate(params) if p == "--set"])
    config = load_config(REPO / "conf" / f"{target}.yml")
    assert config.target.table == sets["target.table"]
    assert config.target.checkpoint == sets["target.checkpoint"]
    assert config.errors.dlq_table_name == sets["errors.deadletterqueue.table.name"]
    assert config.metrics.table == sets["metrics.table"]
    assert config.trigger.kind is TriggerKind.PROCESSING_TIME
    assert config.source.bootstrap_servers == FAKE_CLUSTER_ENVIRONMENT["KAFKA_BOOTSTRAP_SERVERS"]
    assert FAKE_CLUSTER_ENVIRONMENT["KAFKA_SASL_PASSWORD"] in config.source.options["kafka.sasl.jaas.config"]


def test_local_dev_and_prod_configs_are_one_pipeline() -> None:
    raws = {n: yaml.safe_load((REPO / "conf" / f"{n}.yml").read_text()) for n in ("local", "dev", "prod")}
    assert len({r["pipeline"] for r in raws.values()}) == 1
    assert raws["local"]["stages"] == raws["dev"]["stages"] == raws["prod"]["stages"]


def test_the_replay_job_takes_pipeline_and_predicate() -> None:
    _, job = _jobs()["quarantine_replay"]
    params = {p["name"]: p["default"] for p in job["parameters"]}
    assert {"pipeline", "predicate"} <= set(params)
    (task,) = job["tasks"]
    argv = task["python_wheel_task"]["parameters"]
    assert argv[0] == "replay"
    assert argv[argv.index("--pipeline") + 1] == "{{job.parameters.pipeline}}"
    assert argv[argv.index("--where") + 1] == "{{job.parameters.predicate}}"


def test_the_maintain_job_runs_daily_on_one_pipeline() -> None:
    _, job = _jobs()["quarantine_maintain"]
    assert job["schedule"]["quartz_cron_expression"] == "0 30 3 * * ?"  # every day, 03:30
    assert job["schedule"]["timezone_id"] == "UTC" and job["schedule"]["pause_status"] == "UNPAUSED"
    assert {p["name"] for p in job["parameters"]} == {"pipeline", "conf"}
    (task,) = job["tasks"]
    assert task["python_wheel_task"]["parameters"][:5] == [
        "maintain", "--conf", "{{job.parameters.conf}}", "--pipeline", "{{job.parameters.pipeline}}"
    ]


def test_notebook_tasks_point_at_existing_source_notebooks() -> None:
    _, job = _jobs()["quarantine_triage_replay"]
    notebooks = [t["notebook_task"]["notebook_path"] for t in job["tasks"] if "notebook_task" in t]
    assert {Path(n).name for n in notebooks} == {"triage.py", "replay.py"}
    replay = next(t for t in job["tasks"] if t["task_key"] == "replay")
    assert replay["depends_on"] == [{"task_key": "triage"}]
    params = {p["name"] for p in job["parameters"]}
    assert {"catalog", "schema", "quarantine_table", "pipeline", "conf", "apply"} <= params


def test_every_job_cluster_lets_the_jit_compile_huge_generated_methods() -> None:
    from quarantine.spark.session import JVM_OPTIONS

    for name, (_, job) in _jobs().items():
        for cluster in job.get("job_clusters", []):
            conf = cluster["new_cluster"].get("spark_conf", {})
            for side in ("driver", "executor"):
                options = str(conf.get(f"spark.{side}.extraJavaOptions", "")).split()
                assert set(JVM_OPTIONS) <= set(options), f"job {name}: {side} JVM options {options}"


def test_every_job_cluster_builds_columns_without_sending_each_call_site_to_the_jvm() -> None:
    # the driver's Python builds a batch's plan: PySpark's DataFrame debugging makes each
    # Column call about eight Py4J round trips (quarantine/spark/session.py: LOCAL_DEFAULTS)
    for name, (_, job) in _jobs().items():
        for cluster in job.get("job_clusters", []):
            conf = cluster["new_cluster"].get("spark_conf", {})
            assert str(conf.get("spark.python.sql.dataFrameDebugging.enabled")).lower() == "false", f"job {name}"


# --------------------------------------------------------------------------- broken copies


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The bundle's files (root, resources, configs, notebooks, pipelines) in a scratch folder."""
    shutil.copy2(REPO / "databricks.yml", tmp_path / "databricks.yml")
    for folder in ("bundles", "conf", "notebooks", "dashboards", "pipelines"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name}: {old!r} not found (the test's break no longer applies)"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_copy_itself_has_no_problem(copy: Path) -> None:
    assert variable_problems(copy) == inline_secret_problems(copy) == path_problems(copy) == []
    assert dashboard_problems(copy) == []
    assert wheel_parameter_problems(copy, "dev") == []


def test_a_missing_notebook_is_found(copy: Path) -> None:
    (copy / "notebooks" / "triage.py").unlink()
    (problem,) = path_problems(copy)
    assert "quarantine_triage.yml" in problem and "triage.py does not exist" in problem


def test_a_missing_config_file_is_found(copy: Path) -> None:
    (copy / "conf" / "prod.yml").unlink()
    problems = path_problems(copy)
    assert problems and all("conf/prod.yml does not exist" in p and "target prod" in p for p in problems)
    assert any("quarantine_orders_kafka" in p for p in problems)


def test_an_undeclared_variable_is_found(copy: Path) -> None:
    _edit(copy / "bundles" / "orders_kafka.yml", "${var.quarantine_table}", "${var.quarantine_tabel}")
    (problem,) = variable_problems(copy)
    assert "orders_kafka.yml" in problem and "${var.quarantine_tabel}" in problem and "not declared" in problem


def test_a_target_missing_a_required_variable_is_found(copy: Path) -> None:
    _edit(copy / "databricks.yml", "      kafka_bootstrap_servers: kafka.example.internal:9093\n", "")
    (problem,) = variable_problems(copy)
    assert "target prod" in problem and "kafka_bootstrap_servers" in problem


def test_an_inline_password_in_a_config_is_found(copy: Path) -> None:
    _edit(copy / "conf" / "dev.yml", "${env:KAFKA_SASL_PASSWORD}", "hunter2")
    (problem,) = inline_secret_problems(copy)
    assert "dev.yml" in problem and "kafka.sasl.jaas.config" in problem and "password" in problem
    assert "hunter2" not in problem, "the report must not repeat the secret"


def test_an_inline_secret_in_a_job_cluster_is_found(copy: Path) -> None:
    _edit(copy / "bundles" / "orders_kafka.yml", '"{{secrets/${var.secret_scope}/kafka-password}}"', "hunter2")
    (problem,) = inline_secret_problems(copy)
    assert "orders_kafka.yml" in problem and "KAFKA_SASL_PASSWORD" in problem


def test_an_inline_secret_in_a_task_parameter_is_found(copy: Path) -> None:
    _edit(
        copy / "bundles" / "orders_kafka.yml",
        "              - metrics.table=",
        "              - 'source.options={\"kafka.sasl.jaas.config\": \"x required username=\\\"u\\\" "
        "password=\\\"hunter2\\\";\"}'\n              - --set\n              - metrics.table=",
    )
    problems = inline_secret_problems(copy)
    assert problems and all("orders_kafka.yml" in p and "parameters" in p for p in problems)


def test_a_wheel_parameter_the_cli_rejects_is_found(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_replay.yml", "              - --where\n", "              - --wehre\n")
    (problem,) = wheel_parameter_problems(copy, "dev")
    assert "quarantine_replay" in problem and "rejects" in problem


def test_a_job_cluster_missing_an_environment_variable_its_config_reads_is_found(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_replay.yml",
          '              KAFKA_SASL_PASSWORD: "{{secrets/${var.secret_scope}/kafka-password}}"\n', "")
    (problem,) = wheel_parameter_problems(copy, "prod")
    assert "quarantine_replay" in problem and "KAFKA_SASL_PASSWORD" in problem


def test_a_table_that_is_not_a_unity_catalog_name_is_found(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_orders.yml", "metrics.table=${var.catalog}.${var.schema}.quarantine_metrics",
          "metrics.table=/tmp/metrics")
    problems = wheel_parameter_problems(copy, "prod")
    assert problems and all("metrics.table" in p and "Unity Catalog" in p for p in problems)


def test_a_misspelt_task_field_fails_the_schema_and_the_model(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_orders.yml", "package_name: spark-quarantine", "pakage_name: spark-quarantine")
    assert any("pakage_name" in p for p in model_problems(copy))
    _needs_schema()
    (problem,) = schema_problems(copy, SCHEMA)
    assert "quarantine_orders.yml" in problem and "pakage_name" in problem


def test_a_sql_alert_without_its_evaluation_fails_the_schema(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_alerts.yml", "      evaluation:\n        source:\n          name: stuck\n",
          "      evaluaton:\n        source:\n          name: stuck\n")
    _needs_schema()
    (problem,) = schema_problems(copy, SCHEMA)
    assert "quarantine_alerts.yml" in problem and "resources.alerts.quarantine_stuck_records" in problem


def test_a_job_notification_to_a_literal_address_list_of_the_wrong_shape_fails_the_model(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_maintain.yml", "        on_failure: ${var.failure_emails}\n",
          "        on_failur: ${var.failure_emails}\n")
    (problem,) = model_problems(copy)
    assert "quarantine_maintain" in problem and "on_failur" in problem


def test_a_missing_dashboard_file_is_found(copy: Path) -> None:
    (copy / "dashboards" / "quarantine.lvdash.json").unlink()
    (problem,) = dashboard_problems(copy)
    assert "quarantine_dashboard.yml" in problem and "quarantine.lvdash.json does not exist" in problem


def test_a_widget_reading_an_undefined_dataset_or_showing_an_unqueried_field_is_found(copy: Path) -> None:
    file = copy / "dashboards" / "quarantine.lvdash.json"
    _edit(file, '"datasetName": "partitions"', '"datasetName": "partition"')
    _edit(file, '"fieldName": "error_class"', '"fieldName": "error_klass"')
    problems = dashboard_problems(copy)
    assert len(problems) == 2, problems
    assert any("reads dataset partition," in p for p in problems)
    assert any("shows error_klass, not a field of its queries" in p for p in problems)


def test_a_misspelt_dashboard_field_fails_the_schema_and_the_model(copy: Path) -> None:
    _edit(copy / "bundles" / "quarantine_dashboard.yml", "dataset_schema:", "dataset_shema:")
    assert any("dataset_shema" in p and "dashboard quarantine_dashboard" in p for p in model_problems(copy))
    _needs_schema()
    (problem,) = schema_problems(copy, SCHEMA)
    assert "quarantine_dashboard.yml" in problem and "dataset_shema" in problem


# --------------------------------------------------------------------------- the README's Databricks commands


def _readme_databricks_block() -> str:
    commands = block("databricks")
    assert any(c[:3] == ["databricks", "bundle", "deploy"] for c in commands.commands("databricks"))
    return commands.body


def test_the_readmes_databricks_commands_name_what_the_bundle_defines() -> None:
    """The deploy commands cannot run here (no workspace, no Databricks CLI); what they
    name can be checked: every job run exists, every --var and --params key is declared,
    and the secrets created are the scope and keys the job clusters read."""
    text = _readme_databricks_block()
    root = yaml.safe_load((REPO / "databricks.yml").read_text(encoding="utf-8"))
    jobs = _jobs()
    runs = re.findall(r"databricks bundle run\s+-t (\w+) (\w+)", text)
    assert runs and {job for _, job in runs} <= set(jobs), runs  # each job it runs exists
    assert {t for t, _ in runs} <= set(root["targets"])
    for name in re.findall(r"--var (\w+)=", text):
        assert name in root["variables"], name
    for job, params in re.findall(r"bundle run\s+-t \w+ (\w+) --params \"([^\"]+)\"", text):
        declared = {p["name"] for p in jobs[job][1].get("parameters", [])}
        assert {kv.split("=", 1)[0] for kv in params.split(",")} <= declared, (job, params)
    scope = re.search(r"create-scope (\S+)", text)
    assert scope and scope.group(1) == root["variables"]["secret_scope"]["default"]
    put = set(re.findall(r"put-secret (\S+) (\S+)", text))
    referenced = {
        (scope.group(1), key)
        for f in Bundle.load(REPO).files
        for key in re.findall(r"\{\{secrets/\$\{var\.secret_scope\}/([\w-]+)\}\}", f.read_text(encoding="utf-8"))
    }
    assert referenced and put == referenced, (put, referenced)


# --------------------------------------------------------------------------- the declarative pipeline


def test_the_declarative_pipeline_loads_its_config_with_its_overrides_on_unity_catalog_tables() -> None:
    """bundles/orders_declarative.yml: its ``quarantine.set.*`` settings, as each target sets
    them, are overrides of pipelines/orders/orders.yml that load, and that a pipeline can declare."""
    from quarantine.batch.plan import Plan
    from quarantine.config import load_config
    from quarantine.declarative import check_declarable, pipeline_overrides
    from quarantine.stages import build_stages

    bundle = Bundle.load(REPO)
    ((path, pipe),) = bundle.pipelines().values()
    for lib in pipe["libraries"]:
        source = (path.parent / lib["file"]["path"]).read_text(encoding="utf-8")
        assert 'declare("orders.yml")' in source
    for target in bundle.config["targets"]:
        variables = target_variables(REPO, target)
        settings = {k: substitute(str(v), REPO, target, variables, {}) for k, v in pipe["configuration"].items()}
        config = load_config(REPO / pipe["root_path"].removeprefix("../") / "orders.yml", pipeline_overrides(settings))
        assert config.source.path is None and config.source.table == (
            f"{variables['catalog']}.{variables['schema']}.{variables['source_table']}")
        names = check_declarable(Plan(config=config, spark=None, stages=build_stages(config.stages)))  # type: ignore[arg-type]
        assert names.target.endswith(".orders_declarative") and names.quarantine.endswith("_quarantine"), target
        # the job's metrics task writes the pipeline's metrics table from the pipeline's own tables
        _, job = bundle.jobs()["orders_declarative_update"]
        tasks = {t["task_key"]: t for t in job["tasks"]}
        assert tasks["update"]["pipeline_task"]["pipeline_id"] == "${resources.pipelines.orders_declarative.id}"
        assert tasks["metrics"]["depends_on"] == [{"task_key": "update"}]
        params = [substitute(str(p), REPO, target, variables, {})
                  for p in tasks["metrics"]["python_wheel_task"]["parameters"]]
        assert params[:2] == ["metrics", "--conf"] and params[2].endswith("pipelines/orders/orders.yml")
        sets = dict(p.split("=", 1) for p in params[4::2])
        for key in ("source.table", "target.table", "errors.deadletterqueue.table.name", "metrics.table"):
            assert sets[key] == settings[f"quarantine.set.{key}"], (target, key)  # the pipeline's tables
        assert sets["source.path"] == settings["quarantine.set.source.path"] == "null"


def test_a_missing_pipeline_source_file_is_found(copy: Path) -> None:
    (copy / "pipelines" / "orders" / "transformations" / "orders.py").unlink()
    (problem,) = path_problems(copy)
    assert "orders_declarative.yml" in problem and "transformations/orders.py does not exist" in problem
