"""E2E fixtures: one real single-node Kafka broker (KRaft, loopback) for the session.

The broker is started from the Maven Central jars in ``.cache/jars/kafka`` by
:class:`tests.support.KafkaBroker`; its data lives in a pytest temp dir.
Tests that restart or kill it must leave it running (``broker.restart()``).
Topics are never auto-created: use ``new_topics`` for fresh, uniquely named ones.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


# ----------------------------------------------------------------------------- headless Chromium

CHROMIUM = "/usr/bin/chromium"
#: Flags that work on the CI machines (no sandbox in containers, no GPU, nothing phoning home).
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[tuple[Any, list[str]]]:
    """A page of a fresh headless Chromium profile, and a list collecting console errors,
    page errors and every request that is not for a ``file://`` URL (each one is aborted)."""
    assert shutil.which(CHROMIUM), f"{CHROMIUM} not found: run scripts/install_browser.sh (apt-get install -y chromium)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        def only_files(route: Any) -> None:
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                problems.append(f"network request: {route.request.url}")
                route.abort()

        page.route("**/*", only_files)
        try:
            yield page, problems
        finally:
            context.close()


def open_page(page: Any, path: Path) -> None:
    """Open a local file in ``page`` and wait until it has loaded."""
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function("() => document.readyState === 'complete'")
