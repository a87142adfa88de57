"""The avro stage's writer schemas from a registry: listed when the stage is built, listed again
by :meth:`AvroDecode.refreshed`, and every registry failure at build time named by its key.

No Spark: building and refreshing the stage is driver-side Python. The registry is
:class:`tests.support.registry.RegistryStandIn`, a stand-in for the Confluent Schema
Registry REST API (not a registry).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quarantine.config import StageSpec, parse_config
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import ConfigError
from quarantine.stages import build_stage
from quarantine.stages.avro import AvroDecode
from quarantine.stages.schema_registry import RegistrySource
from quarantine.stages.schema_sources import RegistryUnreachableError
from tests.helpers import logged
from tests.support.registry import Failure, RegistryStandIn, registry_stand_in

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "string"}]}
V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"}, {"name": "note", "type": ["null", "string"], "default": None}]}
V3 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double", "default": 0.0}]}
PASSWORD = "Registry-pw-0451"


@pytest.fixture
def stand_in() -> Iterator[RegistryStandIn]:
    with registry_stand_in() as s:
        s.register("orders-value", V1)
        s.register("orders-value", V2)
        yield s



def _stage(url: str, **schemas: Any) -> AvroDecode:
    stage = build_stage(StageSpec("order", "avro", None, {"schemas": {"url": url, "subject": "orders-value",
                                                                        **schemas}}, 1))
    assert isinstance(stage, AvroDecode)
    return stage


def _fast() -> RetryPolicy:
    return RetryPolicy(timeout_ms=500, initial_backoff_ms=10, max_delay_ms=20, jitter=0.0)


def test_the_stage_is_built_from_every_version_of_the_subject(stand_in: RegistryStandIn) -> None:
    stage = _stage(stand_in.url)
    assert [sid for sid, _ in stage.writers] == [1, 2] and json.loads(stage.reader) == V2  # the latest version
    assert stage.listed == {("orders-value", 1), ("orders-value", 2)}
    assert stage.source == f"subject orders-value at {stand_in.url}"
    assert stage.refreshes() == {"UnknownSchemaId"}
    assert [r.path for r in stand_in.requests] == [
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/1", "/subjects/orders-value/versions/2",
    ]


def test_the_default_reader_is_the_first_subjects_latest_version_not_the_highest_id(
    stand_in: RegistryStandIn,
) -> None:
    assert stand_in.register("returns-value", V3) == 3
    assert stand_in.register("orders-value", V1) == 1  # registered already: no new version
    stage = build_stage(StageSpec("order", "avro", None, {"schemas": {
        "url": stand_in.url, "subjects": ["orders-value", "returns-value"]}}, 1))
    assert isinstance(stage, AvroDecode) and [sid for sid, _ in stage.writers] == [1, 2, 3]
    assert json.loads(stage.reader) == V2  # orders-value v2, though id 3 is higher


def test_a_folder_stage_is_never_refreshed(tmp_path: Path) -> None:
    (tmp_path / "1.avsc").write_text(json.dumps(V1))
    stage = build_stage(StageSpec("order", "avro", None, {"schemas": str(tmp_path)}, 0))
    assert stage.refreshes() == frozenset() and stage.refreshed() is None


def test_refreshed_reads_only_the_new_versions_and_keeps_the_reader(stand_in: RegistryStandIn) -> None:
    stage = _stage(stand_in.url)
    assert stage.refreshed(_fast()) is None  # nothing new: one listing, no version read
    assert [r.path for r in stand_in.requests][-1] == "/subjects/orders-value/versions"
    stand_in.register("orders-value", V3)
    stand_in.requests.clear()
    fresh = stage.refreshed(_fast())
    assert fresh is not None and [sid for sid, _ in fresh.writers] == [1, 2, 3]
    assert fresh.reader == stage.reader and fresh.listed == stage.listed | {("orders-value", 3)}
    assert [r.path for r in stand_in.requests] == [
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/3",
    ]
    assert stage.writers != fresh.writers  # the stage itself is not changed (frozen)


def test_a_new_version_that_is_not_avro_is_listed_once_and_left_out(
    stand_in: RegistryStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _stage(stand_in.url)
    stand_in.register("orders-value", 'syntax = "proto3"; message Order {}', schema_type="PROTOBUF")
    with caplog.at_level(logging.WARNING, logger="quarantine"):
        fresh = stage.refreshed()
    assert fresh is not None and [sid for sid, _ in fresh.writers] == [1, 2]
    assert ("orders-value", 3) in fresh.listed and fresh.refreshed() is None  # not read again
    assert "schema id 3 (orders-value v3) is left out: a PROTOBUF schema, not Avro" in logged(caplog)


def test_a_registry_down_at_a_refresh_is_retried_then_leaves_the_stage_as_it_is(
    stand_in: RegistryStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _stage(stand_in.url, user="bob", password=PASSWORD)
    stand_in.register("orders-value", V3)
    stand_in.fail_next = [Failure(500, 50001, "Error in the backend data store")] * 1000
    stand_in.requests.clear()
    with caplog.at_level(logging.WARNING, logger="quarantine"):
        assert stage.refreshed(_fast()) is None
    assert len(stand_in.requests) >= 2  # retried under the policy
    assert "could not list the writer schemas of subject orders-value" in logged(caplog)
    assert "stay in quarantine" in logged(caplog) and PASSWORD not in caplog.text
    stand_in.fail_next = [Failure(500, 50001)]  # one failure, then fine: the retry mends it
    fresh = stage.refreshed(_fast())
    assert fresh is not None and [sid for sid, _ in fresh.writers] == [1, 2, 3]


def test_the_stage_pickles_for_a_spark_connect_worker(stand_in: RegistryStandIn) -> None:
    from pyspark import cloudpickle

    stage = _stage(stand_in.url, user="bob", password=PASSWORD)
    again = cloudpickle.loads(cloudpickle.dumps(stage))  # type: ignore[no-untyped-call]
    assert again.registry == stage.registry and again.writers == stage.writers
    assert PASSWORD not in repr(stage) and PASSWORD not in repr(stage.registry)


# ------------------------------------------------------------------ failures when the stage is built

def test_an_unknown_subject_is_a_config_error_naming_the_key(stand_in: RegistryStandIn) -> None:
    with pytest.raises(ConfigError, match=r"stages\[1\]\.options\.schemas\.subject': got 'order-value'; expected a "
                       r"subject registered at http://127\.0\.0\.1:\d+ \(.*error code 40401"):
        build_stage(StageSpec("order", "avro", None, {"schemas": {"url": stand_in.url, "subject": "order-value"}}, 1))
    with pytest.raises(ConfigError, match=r"options\.schemas\.subjects'"):
        build_stage(StageSpec("order", "avro", None, {"schemas": {
            "url": stand_in.url, "subjects": ["orders-value", "gone"]}}, 1))


def test_refused_credentials_are_a_config_error_naming_the_user(stand_in: RegistryStandIn) -> None:
    stand_in.users = {"bob": PASSWORD}
    with pytest.raises(ConfigError, match=r"options\.schemas\.user': got 'bob'; expected credentials the registry "
                       r"accepts .*HTTP 401") as e:
        _stage(stand_in.url, user="bob", password="not-" + PASSWORD)
    assert PASSWORD not in str(e.value)
    assert [sid for sid, _ in _stage(stand_in.url, user="bob", password=PASSWORD).writers] == [1, 2]


def test_an_unreachable_registry_names_the_option_and_the_registry(stand_in: RegistryStandIn) -> None:
    stand_in.fail_next = [Failure(503, 50003, "Error while forwarding the request to the primary")]
    with pytest.raises(RegistryUnreachableError, match=r"^stages\[1\]\.options\.schemas: could not list the writer "
                       r"schemas of subject orders-value at http://.*: HTTP 503, error code 50003"):
        _stage(stand_in.url)


def test_subjects_without_an_avro_schema_or_both_subject_keys_are_refused(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-proto", 'syntax = "proto3"; message Order {}', schema_type="PROTOBUF")
    with pytest.raises(ConfigError, match=r"expected subjects holding at least one Avro schema \(orders-proto v1: a "
                       r"PROTOBUF schema, not Avro\)"):
        build_stage(StageSpec("order", "avro", None, {"schemas": {"url": stand_in.url, "subject": "orders-proto"}}))
    for both in ({"subject": "orders-value", "subjects": ["orders-value"]}, {}):
        with pytest.raises(ConfigError, match=r"options\.schemas\.subject'.*exactly one of subject"):
            build_stage(StageSpec("order", "avro", None, {"schemas": {"url": stand_in.url, **both}}))


def _config(schemas: Any) -> dict[str, Any]:
    return {
        "pipeline": "p", "source": {"format": "delta", "path": "/tmp/src"}, "target": {"table": "/tmp/target"},
        "errors": {"deadletterqueue.table.name": "/tmp/q"},
        "stages": [{"name": "order", "type": "avro", "options": {"schemas": schemas}}],
    }


def test_credentials_come_from_the_environment_and_are_configured_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SR_PASSWORD", PASSWORD)
    (tmp_path / "ca.pem").write_text("-")
    config = parse_config(_config({"url": "https://registry:8081", "subject": "orders-value", "user": "bob",
                                   "password": "${env:SR_PASSWORD}", "ca_file": "ca.pem"}), base_dir=tmp_path)
    options = config.stages[0].options["schemas"]
    assert options["password"] == PASSWORD and options["ca_file"] == str(tmp_path / "ca.pem")
    assert PASSWORD in config.secrets() and PASSWORD not in json.dumps(config.redacted())


def test_a_databricks_secret_reference_written_in_the_config_is_refused_saying_where_it_belongs() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(_config({"url": "https://registry:8081", "subject": "orders-value",
                              "password": "{{secrets/kafka/registry-password}}"}))
    assert e.value.key == "stages[0].options.schemas.password"
    assert "Databricks resolves {{secrets/<scope>/<key>}} in a cluster's environment variables" in str(e.value)
    assert "write ${env:NAME} here" in str(e.value)


@pytest.mark.parametrize(("schemas", "key", "allowed"), [
    ({"url": "registry:8081", "subject": "s"}, "stages[0].options.schemas.url", "an http(s)://host[:port] URL"),
    ({"url": "http://r", "subjet": "s"}, "stages[0].options.schemas.subjet", "did you mean 'subject'?"),
    ({"url": "http://r", "subjects": []}, "stages[0].options.schemas.subjects", "a non-empty list of subject"),
    ({"url": "http://r", "subject": "s", "timeout_s": 0}, "stages[0].options.schemas.timeout_s", "an integer ≥ 1"),
    (7, "stages[0].options.schemas", "a folder (a path), or a mapping of url, subject"),
])
def test_registry_options_are_checked_when_the_config_is_loaded(schemas: Any, key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(_config(schemas))
    assert e.value.key == key and allowed in e.value.allowed


def test_a_registry_source_is_described_without_credentials() -> None:
    source = RegistrySource("http://bob:pw@r:1", ("a",), user="bob", password=PASSWORD)
    assert source.describe() == "subject a at http://r:1"


def test_the_manuals_registry_example_builds_against_the_stand_in(
    stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/stages.md's registry block, as written (its ${env:…} from the environment), loads and builds."""
    import yaml

    from quarantine.config import load_config
    from quarantine.stages import build_stages
    from tests.support.readme import block

    stand_in.users = {"api-key": PASSWORD}
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", stand_in.url)
    monkeypatch.setenv("SCHEMA_REGISTRY_USER", "api-key")
    monkeypatch.setenv("SCHEMA_REGISTRY_PASSWORD", PASSWORD)
    (tmp_path / "order.avsc").write_text(json.dumps(V1))
    raw = _config("unused") | yaml.safe_load(block("avro-registry").body)
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    config = load_config(tmp_path / "p.yml")
    (stage,) = build_stages(config.stages)
    assert isinstance(stage, AvroDecode) and [sid for sid, _ in stage.writers] == [1, 2]
    assert json.loads(stage.reader) == V1 and stage.registry is not None
    assert (stage.registry.user, stage.registry.password) == ("api-key", PASSWORD)
    assert PASSWORD in config.secrets()


def test_a_kafka_stream_with_a_registry_stage_is_staged_per_micro_batch(stand_in: RegistryStandIn) -> None:
    """So that a stage the runner refreshed is what the next micro-batch runs (a stream staged once per
    query would run the stage it started with); a folder stage keeps the once-per-query staging."""
    from quarantine.batch.plan import Plan

    raw = _config({"url": stand_in.url, "subject": "orders-value"})
    raw["source"] = {"format": "kafka", "bootstrap.servers": "localhost:1", "topics": ["orders"]}
    raw["target"]["checkpoint"] = "/tmp/checkpoint"
    plan = Plan(parse_config(raw), None, [_stage(stand_in.url)])  # type: ignore[arg-type]  # no session needed
    assert plan.stage_stream(None) is None  # type: ignore[arg-type]
