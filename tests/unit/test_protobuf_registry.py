"""The protobuf stage's writer schemas from a registry: ``.proto`` versions compiled to descriptor sets
when the stage is built, compiled again by :meth:`ProtobufDecode.refreshed` for new versions.

No Spark: building and refreshing the stage is driver-side Python. The registry is
:class:`tests.support.registry.RegistryStandIn`, a stand-in for the Confluent Schema Registry
REST API (not a registry); the compiler is the ``protoc`` of ``grpcio-tools``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from quarantine.config import StageSpec, parse_config
from quarantine.errorhandling.retry import RetryPolicy
from quarantine.errors import ConfigError, MissingDependencyError
from quarantine.stages import build_stage
from quarantine.stages.protobuf import ProtobufDecode
from quarantine.stages.protobuf.registry import ProtoCompileError, compile_version, protobuf_versions
from quarantine.stages.schema_registry import RegistrySchemas, SchemaReference, SubjectVersion
from tests.helpers import logged
from tests.support.registry import Failure, RegistryStandIn, registry_stand_in

MONEY = """syntax = "proto3";
package shop;
message Money { string currency = 1; double amount = 2; }
"""
ORDER = """syntax = "proto3";
package shop;
import "shop/money.proto";
import "google/protobuf/timestamp.proto";
message Order { string order_id = 1; shop.Money total = 2; google.protobuf.Timestamp created_at = 3; }
"""
ORDER_V2 = ORDER.replace("created_at = 3;", "created_at = 3; string note = 4;")
MONEY_REF = {"name": "shop/money.proto", "subject": "shop-money", "version": 1}
AVRO = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "string"}]}


@pytest.fixture
def stand_in() -> Iterator[RegistryStandIn]:
    with registry_stand_in() as s:
        s.register("shop-money", MONEY, schema_type="PROTOBUF")  # id 1
        s.register("orders-value", ORDER, schema_type="PROTOBUF", references=[MONEY_REF])  # id 2
        yield s



def _stage(url: str, **schemas: Any) -> ProtobufDecode:
    stage = build_stage(StageSpec("order", "protobuf", None, {"schemas": {"url": url, "subject": "orders-value",
                                                                            **schemas}}, 1))
    assert isinstance(stage, ProtobufDecode)
    return stage


def _files(data: bytes) -> list[str]:
    return [f.name for f in descriptor_pb2.FileDescriptorSet.FromString(data).file]


def _fast() -> RetryPolicy:
    return RetryPolicy(timeout_ms=500, initial_backoff_ms=10, max_delay_ms=20, jitter=0.0)


# ------------------------------------------------------------------ compiling one version

def test_a_version_compiles_with_its_reference_and_a_well_known_import_its_own_file_last(
    stand_in: RegistryStandIn,
) -> None:
    client = RegistrySchemas(stand_in.url)
    version = client.version("orders-value", 1)
    assert version.schema_type == "PROTOBUF"
    assert version.references == (SchemaReference("shop/money.proto", "shop-money", 1),)
    data = compile_version(version, client)
    files = _files(data)
    assert set(files[:-1]) == {"shop/money.proto", "google/protobuf/timestamp.proto"}
    assert files[-1] == "orders-value.v1.proto"
    last = descriptor_pb2.FileDescriptorSet.FromString(data).file[-1]
    assert [m.name for m in last.message_type] == ["Order"]
    assert "/subjects/shop-money/versions/1" in [r.path for r in stand_in.requests]


def test_a_schema_that_does_not_compile_says_what_protoc_said() -> None:
    broken = SubjectVersion("orders-value", 3, 9, 'syntax = "proto3";\nmessage Order { Nope x = 1; }\n', "PROTOBUF")
    with pytest.raises(ProtoCompileError, match=r'orders-value\.v3\.proto:2:17: "Nope" is not defined'):
        compile_version(broken, RegistrySchemas("http://127.0.0.1:1"))  # no reference: no request


def test_a_reference_name_outside_the_folder_is_refused() -> None:
    version = SubjectVersion("o", 1, 1, MONEY, "PROTOBUF", (SchemaReference("../evil.proto", "x", 1),))

    class Client:
        def version(self, subject: str, number: int) -> SubjectVersion:
            return SubjectVersion(subject, number, 5, MONEY, "PROTOBUF")

    with pytest.raises(ProtoCompileError, match="not a relative import path"):
        compile_version(version, Client())  # type: ignore[arg-type]


def test_versions_that_are_not_protobuf_are_left_out_saying_why() -> None:
    proto = SubjectVersion("s", 1, 1, MONEY, "PROTOBUF")
    avro = SubjectVersion("s", 2, 2, "{}")
    kept, skipped = protobuf_versions([proto, avro, SubjectVersion("s", 3, 3, "{}", "JSON")])
    assert kept == [proto]
    assert [(v.version, why) for v, why in skipped] == [(2, "a AVRO schema, not Protobuf"),
                                                        (3, "a JSON schema, not Protobuf")]


# ------------------------------------------------------------------ the stage

def test_the_stage_is_built_from_the_subjects_protobuf_versions_compiled(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-value", ORDER_V2, schema_type="PROTOBUF", references=[MONEY_REF])  # id 3
    stage = _stage(stand_in.url)
    assert [sid for sid, _ in stage.sets] == [2, 3] and all(isinstance(d, bytes) for _, d in stage.sets)
    assert stage.reader == "shop.Order" and "note" in stage.result_type.fieldNames()  # the latest version
    assert stage.listed == {("orders-value", 1), ("orders-value", 2)}
    assert stage.source == f"subject orders-value at {stand_in.url}"
    assert stage.refreshes() == {"UnknownSchemaId"}


def test_a_folder_stage_is_never_refreshed(tmp_path: Path) -> None:
    from tests.support.protobuf import compile_proto

    desc = compile_proto(tmp_path / "protos", "money", MONEY)
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "1.desc").write_bytes(desc.read_bytes())
    stage = build_stage(StageSpec("order", "protobuf", None, {"schemas": str(tmp_path / "schemas")}, 0))
    assert stage.refreshes() == frozenset() and stage.refreshed() is None


def test_refreshed_compiles_only_the_new_versions_and_keeps_the_reader(stand_in: RegistryStandIn) -> None:
    stage = _stage(stand_in.url)
    assert stage.refreshed(_fast()) is None  # nothing new: one listing, nothing compiled
    stand_in.register("orders-value", ORDER_V2, schema_type="PROTOBUF", references=[MONEY_REF])
    stand_in.requests.clear()
    fresh = stage.refreshed(_fast())
    assert fresh is not None and [sid for sid, _ in fresh.sets] == [2, 3]
    assert fresh.reader == stage.reader and fresh.result_type == stage.result_type
    assert fresh.listed == stage.listed | {("orders-value", 2)}
    assert [r.path for r in stand_in.requests] == [
        "/subjects/orders-value/versions", "/subjects/orders-value/versions/2", "/subjects/shop-money/versions/1",
    ]


def test_a_new_version_that_does_not_compile_is_logged_and_left_out_at_a_refresh(
    stand_in: RegistryStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _stage(stand_in.url)
    stand_in.register("orders-value", 'syntax = "proto3";\nmessage Order { Nope x = 1; }\n', schema_type="PROTOBUF")
    stand_in.register("orders-value", AVRO)
    with caplog.at_level(logging.WARNING, logger="quarantine"):
        fresh = stage.refreshed(_fast())
    assert fresh is not None and fresh.sets == stage.sets
    assert {("orders-value", 2), ("orders-value", 3)} <= fresh.listed and fresh.refreshed() is None
    assert "schema id 3 (orders-value v2) is left out: it does not compile (protoc: orders-value.v2.proto:2:17: " \
           '"Nope" is not defined' in logged(caplog)
    assert "schema id 4 (orders-value v3) is left out: a AVRO schema, not Protobuf" in logged(caplog)


def test_a_registry_down_at_a_refresh_is_retried_then_leaves_the_stage_as_it_is(
    stand_in: RegistryStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _stage(stand_in.url)
    stand_in.register("orders-value", ORDER_V2, schema_type="PROTOBUF", references=[MONEY_REF])
    stand_in.fail_next = [Failure(500, 50001, "Error in the backend data store")] * 1000
    stand_in.requests.clear()
    with caplog.at_level(logging.WARNING, logger="quarantine"):
        assert stage.refreshed(_fast()) is None
    assert len(stand_in.requests) >= 2
    assert "could not list the writer schemas of subject orders-value" in logged(caplog)
    stand_in.fail_next = [Failure(500, 50001)]
    fresh = stage.refreshed(_fast())
    assert fresh is not None and [sid for sid, _ in fresh.sets] == [2, 3]


def test_the_stage_pickles_with_its_sets_as_bytes(stand_in: RegistryStandIn) -> None:
    from pyspark import cloudpickle

    stage = _stage(stand_in.url)
    again = cloudpickle.loads(cloudpickle.dumps(stage))  # type: ignore[no-untyped-call]
    assert again.registry == stage.registry and again.sets == stage.sets


# ------------------------------------------------------------------ failures when the stage is built

def test_a_version_that_does_not_compile_is_a_config_error_naming_subject_version_and_protoc(
    stand_in: RegistryStandIn,
) -> None:
    stand_in.register("orders-value", 'syntax = "proto3";\nmessage Order { Nope x = 1; }\n', schema_type="PROTOBUF")
    with pytest.raises(ConfigError) as e:
        _stage(stand_in.url)
    assert e.value.key == "stages[1].options.schemas"
    assert "orders-value v2" in str(e.value) and '"Nope" is not defined' in str(e.value)


def test_subjects_without_a_protobuf_schema_are_refused(stand_in: RegistryStandIn) -> None:
    stand_in.register("orders-avro", AVRO)
    with pytest.raises(ConfigError, match=r"expected subjects holding at least one Protobuf schema \(orders-avro v1: "
                       r"a AVRO schema, not Protobuf\)"):
        build_stage(StageSpec("order", "protobuf", None, {"schemas": {"url": stand_in.url, "subject": "orders-avro"}}))


def test_an_unknown_subject_is_a_config_error_naming_the_key(stand_in: RegistryStandIn) -> None:
    with pytest.raises(ConfigError, match=r"stages\[1\]\.options\.schemas\.subject': got 'order-value'"):
        _stage(stand_in.url, subject="order-value")


def test_without_grpcio_tools_a_registry_names_the_protobuf_extra(
    stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "grpc_tools", None)
    with pytest.raises(MissingDependencyError, match=r"grpcio-tools.*pip install 'spark-quarantine\[protobuf\]'"):
        _stage(stand_in.url)


# ------------------------------------------------------------------ the options, when the config is loaded

def _config(schemas: Any) -> dict[str, Any]:
    return {
        "pipeline": "p", "source": {"format": "delta", "path": "/tmp/src"}, "target": {"table": "/tmp/target"},
        "errors": {"deadletterqueue.table.name": "/tmp/q"},
        "stages": [{"name": "order", "type": "protobuf", "options": {"schemas": schemas, "message": "shop.Order"}}],
    }


def test_the_registry_mapping_is_accepted_with_credentials_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SR_PASSWORD", "Registry-pw-0451")
    config = parse_config(_config({"url": "https://registry:8081", "subject": "orders-value", "user": "bob",
                                   "password": "${env:SR_PASSWORD}"}))
    assert config.stages[0].options["schemas"]["password"] == "Registry-pw-0451"
    assert "Registry-pw-0451" in config.secrets()


def test_a_databricks_secret_reference_written_in_the_config_is_refused_as_for_avro() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(_config({"url": "https://registry:8081", "subject": "orders-value",
                              "password": "{{secrets/kafka/registry-password}}"}))
    assert e.value.key == "stages[0].options.schemas.password"
    assert "write ${env:NAME} here" in str(e.value)


def test_a_bad_registry_mapping_is_named_by_its_key() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(_config({"url": "http://r", "subjet": "s"}))
    assert e.value.key == "stages[0].options.schemas.subjet" and "did you mean 'subject'?" in e.value.allowed


def test_the_manuals_registry_example_builds_against_the_stand_in(
    stand_in: RegistryStandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/stages.md's protobuf registry block, as written (its ${env:…} from the environment), loads and builds."""
    import yaml

    from quarantine.config import load_config
    from quarantine.stages import build_stages
    from tests.support.readme import block

    stand_in.users = {"api-key": "Registry-pw-0451"}
    monkeypatch.setenv("SCHEMA_REGISTRY_URL", stand_in.url)
    monkeypatch.setenv("SCHEMA_REGISTRY_USER", "api-key")
    monkeypatch.setenv("SCHEMA_REGISTRY_PASSWORD", "Registry-pw-0451")
    raw = _config("unused") | yaml.safe_load(block("protobuf-registry").body)
    (tmp_path / "p.yml").write_text(yaml.safe_dump(raw))
    config = load_config(tmp_path / "p.yml")
    (stage,) = build_stages(config.stages)
    assert isinstance(stage, ProtobufDecode) and [sid for sid, _ in stage.sets] == [2]
    assert stage.reader == "shop.Order" and stage.registry is not None
    assert "Registry-pw-0451" in config.secrets()


def test_a_new_version_whose_import_is_not_registered_is_left_out_at_a_refresh(
    stand_in: RegistryStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    stage = _stage(stand_in.url)
    gone = {"name": "shop/gone.proto", "subject": "shop-gone", "version": 1}
    stand_in.register("orders-value", ORDER_V2, schema_type="PROTOBUF", references=[MONEY_REF, gone])
    with caplog.at_level(logging.WARNING, logger="quarantine"):
        fresh = stage.refreshed(_fast())
    assert fresh is not None and fresh.sets == stage.sets and ("orders-value", 2) in fresh.listed
    assert "(orders-value v2) is left out: a file it imports could not be read" in logged(caplog)
    assert "error code 40401" in logged(caplog)
