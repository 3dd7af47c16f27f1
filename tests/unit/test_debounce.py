"""The watcher's debouncer and backoff, and the events-stream parser: pure timing and
parsing, on real threads and real clocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sync_client.events_stream import CommitEvent, parse_events
from sync_client.watch.debounce import Backoff, Debouncer


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    """Every test ends with exactly the threads it started with."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 2
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()


class Calls:
    """Records each callback's hints and time; can block inside a call."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, set[str]]] = []
        self.inside = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.lock = threading.Lock()

    def __call__(self, hints: set[str]) -> None:
        self.inside.set()
        self.release.wait(5)
        with self.lock:
            self.calls.append((time.monotonic(), hints))

    def wait_for(self, count: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.calls) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(self.calls) >= count, self.calls


def test_a_burst_of_triggers_is_one_call_after_the_last() -> None:
    calls = Calls()
    debouncer = Debouncer(0.2, calls)
    try:
        for index in range(50):
            debouncer.trigger(f"k{index % 5}")
            time.sleep(0.005)
        last = time.monotonic()
        calls.wait_for(1)
        time.sleep(0.4)
        assert len(calls.calls) == 1
        when, hints = calls.calls[0]
        assert when - last >= 0.19
        assert hints == {"k0", "k1", "k2", "k3", "k4"}
    finally:
        assert debouncer.stop()


def test_a_trigger_during_the_callback_schedules_one_more() -> None:
    calls = Calls()
    debouncer = Debouncer(0.05, calls)
    try:
        calls.release.clear()
        debouncer.trigger("first")
        assert calls.inside.wait(2)
        # The callback runs outside the lock: triggering now neither blocks nor is lost.
        started = time.monotonic()
        debouncer.trigger("during")
        assert time.monotonic() - started < 0.05
        calls.release.set()
        calls.wait_for(2)
        assert [hints for _, hints in calls.calls] == [{"first"}, {"during"}]
    finally:
        assert debouncer.stop()


def test_never_two_calls_at_once() -> None:
    running = 0
    overlaps = 0
    count = 0
    guard = threading.Lock()

    def callback(_hints: set[str]) -> None:
        nonlocal running, overlaps, count
        with guard:
            running += 1
            overlaps += running > 1
        time.sleep(0.02)
        with guard:
            running -= 1
            count += 1

    debouncer = Debouncer(0.0, callback)
    try:
        for _ in range(40):
            debouncer.trigger("x")
            time.sleep(0.003)
        time.sleep(0.2)
    finally:
        assert debouncer.stop()
    assert count >= 2
    assert overlaps == 0


def test_stop_flushes_a_pending_call_at_once_then_nothing_fires() -> None:
    calls = Calls()
    debouncer = Debouncer(30.0, calls)
    debouncer.trigger("pending")
    started = time.monotonic()
    assert debouncer.stop(flush=True, timeout=2)
    assert time.monotonic() - started < 1
    assert [hints for _, hints in calls.calls] == [{"pending"}]
    debouncer.trigger("after stop")
    time.sleep(0.1)
    assert len(calls.calls) == 1


def test_stop_without_flush_drops_the_pending_call() -> None:
    calls = Calls()
    debouncer = Debouncer(0.1, calls)
    debouncer.trigger("pending")
    assert debouncer.stop(flush=False)
    time.sleep(0.2)
    assert calls.calls == []


def test_hold_until_delays_calls_and_zero_lifts_it() -> None:
    calls = Calls()
    debouncer = Debouncer(0.0, calls)
    try:
        debouncer.hold_until(time.monotonic() + 0.3)
        started = time.monotonic()
        debouncer.trigger("held")
        debouncer.flush()  # a flush does not break a hold
        calls.wait_for(1)
        assert calls.calls[0][0] - started >= 0.28
        debouncer.hold_until(time.monotonic() + 60)
        debouncer.trigger("again")
        time.sleep(0.1)
        assert len(calls.calls) == 1
        debouncer.hold_until(0)
        calls.wait_for(2)
    finally:
        assert debouncer.stop()


def test_flush_runs_a_pending_call_before_its_deadline() -> None:
    calls = Calls()
    debouncer = Debouncer(30.0, calls)
    try:
        debouncer.trigger("x")
        debouncer.flush()
        calls.wait_for(1, timeout=1)
    finally:
        assert debouncer.stop()


def test_backoff_grows_with_jitter_honours_retry_after_and_resets() -> None:
    backoff = Backoff(base=1.0, cap=60.0)
    delays = [backoff.next_delay() for _ in range(6)]
    for attempt, delay in enumerate(delays):
        assert 0.5 * 2**attempt <= delay <= max(66.0, 1.5 * 2**attempt)
    assert backoff.next_delay() <= 66.0
    backoff.reset()
    assert backoff.next_delay(retry_after=7.0) >= 7.0
    backoff.reset()
    assert backoff.next_delay() <= 1.5


def test_after_the_first_minute_of_failures_attempts_are_a_cap_apart() -> None:
    """A server that stays down is asked at most once per `cap` seconds once a minute
    of failures has passed, whatever the jitter drew."""
    for _ in range(200):
        backoff = Backoff(base=1.0, cap=30.0)
        elapsed = 0.0
        while elapsed < 600.0:
            delay = backoff.next_delay()
            if elapsed >= 60.0:
                assert 30.0 <= delay <= 33.0
            elapsed += delay


def test_parse_events_reads_commit_events_and_skips_the_rest() -> None:
    lines = [
        ": keep-alive",
        "",
        "id: 3",
        "event: commit",
        'data: {"version": 3, "checksum": "sha256:aa"}',
        "",
        ": keep-alive",
        "",
        "event: commit",
        "data: not json",
        "",
        "event: other",
        'data: {"version": 9, "checksum": "sha256:zz"}',
        "",
        "id: 4",
        "event:commit",
        'data:{"version": 4,',
        'data: "checksum": "sha256:bb"}',
        "",
        'data: {"version": true, "checksum": "sha256:cc"}',
        "",
        'data: {"version": 5, "checksum": "sha256:dd"}',
    ]
    assert list(parse_events(iter(lines))) == [
        CommitEvent(3, "sha256:aa"),
        CommitEvent(4, "sha256:bb"),
    ]
