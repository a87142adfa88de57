"""The streaming runner's pure parts: reader options, triggers, the Spark bug signature.

(No broker needed; kept next to the Kafka e2e tests they configure.)
"""

from __future__ import annotations

import pytest

from quarantine.config import SourceConfig, TriggerConfig, parse_config
from quarantine.errors import SourceError
from quarantine.runners.streaming import is_kafka_metrics_npe, kafka_options, trigger_options
from tests.support import kafka_pipeline_conf


def test_kafka_options_map_config_keys_to_spark_names_and_pass_options_through() -> None:
    src = SourceConfig.from_mapping({
        "format": "kafka", "bootstrap.servers": "b1:9092,b2:9092", "topics": ["a", "b"],
        "starting.offsets": "latest", "include.headers": False, "max.offsets.per.trigger": 500,
        "options": {"kafka.security.protocol": "SSL", "startingOffsets": "earliest"},
    })
    assert kafka_options(src) == {
        "kafka.bootstrap.servers": "b1:9092,b2:9092",
        "subscribe": "a,b",
        "startingOffsets": "earliest",  # source.options win
        "includeHeaders": "false",
        "maxOffsetsPerTrigger": "500",
        "kafka.security.protocol": "SSL",
    }


def test_kafka_options_subscribe_to_a_pattern() -> None:
    cfg = parse_config(kafka_pipeline_conf("h:1", "/tmp/x", topic_pattern="orders-.*"))
    opts = kafka_options(cfg.source)
    assert opts["subscribePattern"] == "orders-.*" and "subscribe" not in opts
    assert opts["includeHeaders"] == "true" and "maxOffsetsPerTrigger" not in opts


def test_kafka_options_refuse_a_delta_source() -> None:
    src = SourceConfig.from_mapping({"format": "delta", "path": "/data/src", "streaming": True})
    with pytest.raises(SourceError, match="delta"):
        kafka_options(src)


def test_triggers() -> None:
    assert trigger_options(TriggerConfig.from_value("available_now")) == {"availableNow": True}
    assert trigger_options(TriggerConfig.from_value({"processing_time": "5 seconds"})) == {
        "processingTime": "5 seconds"
    }


def test_only_the_spark_kafka_metrics_npe_is_recognised() -> None:
    npe = (
        '[STREAM_FAILED] Query [id = x] terminated with exception: Cannot invoke '
        '"scala.collection.IterableOps.map(scala.Function1)" because the return value of '
        '"scala.Option.get()" is null SQLSTATE: XXKST'
    )
    assert is_kafka_metrics_npe(npe)
    assert not is_kafka_metrics_npe("[STREAM_FAILED] Timeout expired while fetching topic metadata")
