"""A run's listeners: each on its own thread, in order, delivered before a batch returns."""

from __future__ import annotations

import threading
from typing import Any

from quarantine.listeners.events import Listeners


class Recorder:
    """Records the events it gets and the thread it got them on."""

    def __init__(self, name: str, log: list[tuple[str, str]], *, hold: threading.Event | None = None) -> None:
        self.name = name
        self.log = log
        self.threads: set[int] = set()
        self.hold = hold

    def _record(self, event: str) -> None:
        self.threads.add(threading.get_ident())
        if self.hold is not None and event == "start":
            assert self.hold.wait(10), "never released"
        self.log.append((self.name, event))

    def on_run_start(self, run: Any) -> None:
        self._record("start")

    def on_batch(self, report: Any) -> None:
        self._record(f"batch {report}")

    def on_run_end(self, run: Any, status: Any, error: Any) -> None:
        self._record("end")


def test_each_listener_sees_its_events_in_order_from_one_thread_of_its_own() -> None:
    log: list[tuple[str, str]] = []
    a, b = Recorder("a", log), Recorder("b", log)
    listeners = Listeners([a, b])
    listeners.start("on_run_start", "run")
    for i in range(3):
        assert listeners.call("on_batch", i) == []
    assert listeners.call("on_run_end", "run", "succeeded", None) == []
    listeners.close()
    for name in ("a", "b"):
        assert [e for n, e in log if n == name] == ["start", "batch 0", "batch 1", "batch 2", "end"]
    assert len(a.threads) == 1 and len(b.threads) == 1
    assert a.threads != b.threads and threading.get_ident() not in a.threads | b.threads


def test_the_run_start_does_not_wait_and_the_first_batch_waits_for_it() -> None:
    log: list[tuple[str, str]] = []
    release = threading.Event()
    slow = Recorder("slow", log, hold=release)
    listeners = Listeners([slow])
    listeners.start("on_run_start", "run")  # returns while the listener is still busy
    assert log == []
    release.set()
    listeners.call("on_batch", 0)  # returns only once the start and the batch were handled
    assert log == [("slow", "start"), ("slow", "batch 0")]
    listeners.close()


def test_listeners_handle_one_event_at_the_same_time() -> None:
    # each listener waits for the other inside on_batch: only concurrent delivery gets past
    barrier = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    class Meeting:
        def __init__(self, name: str) -> None:
            self.name = name

        def on_batch(self, report: Any) -> None:
            barrier.wait()
            seen.append(self.name)

    listeners = Listeners([Meeting("metrics"), Meeting("mlflow")])
    assert listeners.call("on_batch", 0) == []
    assert sorted(seen) == ["metrics", "mlflow"]
    listeners.close()


def test_a_listener_that_raises_is_reported_and_the_others_still_get_the_event() -> None:
    log: list[tuple[str, str]] = []

    class Broken:
        def on_run_start(self, run: Any) -> None:
            raise RuntimeError("metrics table unreachable")

        def on_batch(self, report: Any) -> None:
            raise RuntimeError("still unreachable")

    listeners = Listeners([Broken(), Recorder("ok", log)])
    listeners.start("on_run_start", "run")
    problems = listeners.call("on_batch", 0)
    # the start's failure is reported with the first call that waits for it
    assert [str(p) for p in problems] == ["metrics table unreachable", "still unreachable"]
    assert log == [("ok", "start"), ("ok", "batch 0")]
    listeners.close()


def test_no_listeners_start_no_threads() -> None:
    before = threading.active_count()
    listeners = Listeners([])
    listeners.start("on_run_start", "run")
    assert listeners.call("on_batch", 0) == []
    assert threading.active_count() == before
    listeners.close()
