"""``${env:NAME}`` in a config value: Kafka Connect's EnvVarConfigProvider syntax (KIP-887).

Issue 12: Kafka credentials come from a Databricks secret scope, never inline. Databricks
resolves ``{{secrets/<scope>/<key>}}`` in a job cluster's environment variables and Spark
conf, not in task parameters; the Kafka job puts the secrets into environment variables
and the config names them as ``${env:NAME}``, read when the config is loaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from quarantine.config import load_config, parse_config
from quarantine.errors import ConfigError

JAAS = (
    'kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required '
    'username="${env:QT_KAFKA_USER}" password="${env:QT_KAFKA_PASSWORD}";'
)


def _raw(options: dict[str, str]) -> dict[str, object]:
    return {
        "pipeline": "orders",
        "source": {"format": "kafka", "bootstrap.servers": "${env:QT_BOOTSTRAP}", "topics": ["orders"],
                   "options": options},
        "target": {"table": "main.ops.orders", "checkpoint": "/Volumes/main/ops/checkpoints/orders"},
        "errors": {"deadletterqueue.table.name": "main.ops.quarantine"},
        "stages": [{"name": "decode", "type": "decode_utf8"}],
    }


@pytest.fixture
def kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_KAFKA_USER", "svc-orders")
    monkeypatch.setenv("QT_KAFKA_PASSWORD", "env-S3cret-77")
    monkeypatch.setenv("QT_BOOTSTRAP", "broker-1:9093,broker-2:9093")


@pytest.mark.usefixtures("kafka_env")
def test_env_references_are_replaced_inside_strings_when_the_config_is_loaded() -> None:
    config = parse_config(_raw({"kafka.sasl.jaas.config": JAAS, "kafka.security.protocol": "SASL_SSL"}))
    jaas = config.source.options["kafka.sasl.jaas.config"]
    assert 'username="svc-orders" password="env-S3cret-77";' in jaas
    assert config.source.bootstrap_servers == "broker-1:9093,broker-2:9093"
    assert config.source.options["kafka.security.protocol"] == "SASL_SSL"


@pytest.mark.usefixtures("kafka_env")
def test_a_secret_read_from_the_environment_is_redacted_and_scrubbed_like_an_inline_one() -> None:
    config = parse_config(_raw({"kafka.sasl.jaas.config": JAAS}))
    assert "env-S3cret-77" in config.secrets()
    assert "env-S3cret-77" not in str(config.redacted())


@pytest.mark.usefixtures("kafka_env")
def test_env_references_work_in_files_and_in_set_overrides(tmp_path: Path) -> None:
    conf = tmp_path / "kafka.yml"
    conf.write_text(yaml.safe_dump(_raw({})), encoding="utf-8")
    config = load_config(conf, {"source.options": {"kafka.sasl.jaas.config": JAAS}})
    assert "svc-orders" in config.source.options["kafka.sasl.jaas.config"]


def test_an_unset_variable_is_a_config_error_naming_the_key_and_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("QT_KAFKA_PASSWORD", raising=False)
    monkeypatch.setenv("QT_KAFKA_USER", "u")
    monkeypatch.setenv("QT_BOOTSTRAP", "b:9092")
    with pytest.raises(ConfigError) as info:
        parse_config(_raw({"kafka.sasl.jaas.config": JAAS}))
    message = str(info.value)
    assert "source.options.kafka.sasl.jaas.config" in message
    assert "QT_KAFKA_PASSWORD" in message


def test_text_without_a_reference_is_unchanged_including_other_dollar_forms() -> None:
    raw = _raw({"kafka.client.id": "a $b ${c} ${env:} {{secrets/s/k}}"})
    raw["source"]["bootstrap.servers"] = "b:9092"  # type: ignore[index]
    config = parse_config(raw)
    assert config.source.options["kafka.client.id"] == "a $b ${c} ${env:} {{secrets/s/k}}"
