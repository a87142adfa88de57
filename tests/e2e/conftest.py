"""E2E fixtures: one real single-node Kafka broker (KRaft, loopback) for the session.

The broker is started from the Maven Central jars in ``.cache/jars/kafka`` by
:class:`tests.support.KafkaBroker`; its data lives in a pytest temp dir.
Tests that restart or kill it must leave it running (``broker.restart()``).
Topics are never auto-created: use ``new_topics`` for fresh, uniquely named ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from tests.support import KafkaBroker, create_topics

_counter = itertools.count()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def new_topics(kafka_broker: KafkaBroker) -> Callable[..., list[str]]:
    """Create fresh topics: ``new_topics("a", "b", partitions=2)`` → their unique names."""

    def make(*bases: str, partitions: int = 1) -> list[str]:
        n = next(_counter)
        names = [f"{b}-{n}" for b in bases]
        create_topics(kafka_broker.bootstrap, dict.fromkeys(names, partitions))
        return names

    return make
