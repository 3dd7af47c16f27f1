"""An outage behind a proxy: what the client takes for the server's answer, and how
often the watcher's push, pull and stream are tried while nothing real answers.

The pace runs on a simulated clock, so hundreds of five-minute outages cost
milliseconds and a rare jitter draw cannot hide. The answers are an httpx
`MockTransport` playing a proxy in front of a dead server, and one real loopback socket
that accepts and resets.
"""

from __future__ import annotations

import itertools
import random
import select
import socket
import struct
import threading
from collections.abc import Iterator

import httpx
import pytest

from sync_client.api import Api
from sync_client.errors import NetworkError, ServerError, TransientError
from sync_client.retries import retry_in_place, with_retries
from sync_client.watch.debounce import RetryPace

BASE, CAP, RAMP, STREAM_CAP = 1.0, 30.0, 60.0, 900.0
KINDS = ("push", "pull", "stream")


class Clock:
    """A clock the simulation moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate_outage(seed: int, length: float = 300.0) -> dict[str, list[float]]:
    """Every attempt of each kind over an outage where every attempt fails (a proxy
    resets or answers 502): the stream first, the push after the debounce, the pull at
    the poll interval; attempts take up to 2 s (a slow 502). Returns each kind's attempt
    times, from the outage's first failure (when the watcher can know of it)."""
    rng = random.Random(seed)
    random.seed(seed)  # the jitter `Backoff` draws
    clock = Clock()
    pace = RetryPace(BASE, CAP, RAMP, caps={"stream": STREAM_CAP}, clock=clock)
    due = {"stream": 0.0, "push": rng.uniform(0.0, 3.0), "pull": rng.uniform(0.0, 30.0)}
    attempts: dict[str, list[float]] = {kind: [] for kind in KINDS}
    while True:
        kind = min(due, key=lambda name: due[name])
        if due[kind] >= length:
            assert pace.since is not None
            return {
                name: [at - pace.since for at in times if at >= pace.since]
                for name, times in attempts.items()
            }
        attempts[kind].append(due[kind])
        clock.now = due[kind] + rng.uniform(0.0, 2.0)  # the attempt fails after a while
        retry_after = rng.choice([None, None, 1.0])  # some proxies send Retry-After: 1
        due[kind] = clock.now + pace.failed(pace.backoffs[kind], retry_after)


def test_after_the_first_minute_each_kind_is_tried_at_most_once_per_cap() -> None:
    for seed in range(400):
        attempts = simulate_outage(seed)
        for kind, times in attempts.items():
            late = [at for at in times if at >= RAMP]
            gaps = [b - a for a, b in itertools.pairwise(late)]
            assert all(gap >= CAP for gap in gaps), (seed, kind, times)
        every = sorted(at for times in attempts.values() for at in times)
        for start in range(int(RAMP), 300):
            in_window = [at for at in every if start <= at < start + CAP]
            assert len(in_window) <= 3, (seed, start, in_window)
        # The push was retried all along: a note waiting for the server is not given up.
        assert len(attempts["push"]) >= 8, (seed, attempts)


def test_a_kind_that_first_fails_late_in_an_outage_starts_at_the_cap() -> None:
    clock = Clock()
    pace = RetryPace(BASE, CAP, RAMP, caps={"stream": STREAM_CAP}, clock=clock)
    pace.failed(pace.backoffs["stream"])
    clock.now = 90.0
    for _ in range(50):
        assert CAP <= pace.failed(pace.backoffs["pull"]) <= CAP * 1.1


def test_only_an_answer_ends_an_outage_and_failures_never_shorten_the_wait() -> None:
    for seed in range(200):
        random.seed(seed)
        clock = Clock()
        pace = RetryPace(BASE, CAP, RAMP, caps={"stream": STREAM_CAP}, clock=clock)
        for _ in range(30):
            clock.now += 31.0
            for kind in KINDS:
                pace.failed(pace.backoffs[kind])
        assert pace.failing
        assert all(pace.failed(pace.backoffs[kind]) >= CAP for kind in KINDS)
        assert pace.answered()
        assert not pace.failing
        assert all(backoff.failures == 0 for backoff in pace.backoffs.values())
        assert pace.failed(pace.backoffs["push"]) <= BASE * 1.5


def test_a_stream_refused_while_pulls_answer_keeps_its_own_backoff() -> None:
    pace = RetryPace(BASE, CAP, RAMP, caps={"stream": STREAM_CAP})
    for _ in range(5):
        pace.failed(pace.backoffs["stream"])
    assert not pace.answered()
    assert pace.backoffs["stream"].failures == 5
    assert pace.answered(outage=True)
    assert pace.backoffs["stream"].failures == 0


def test_retry_in_place_bounds_the_attempts_of_with_retries() -> None:
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise ServerError("server error 502: Bad Gateway", status=502)

    with retry_in_place(1, 0.0), pytest.raises(ServerError):
        with_retries(failing, sleep=lambda _: None)
    assert len(calls) == 1
    with pytest.raises(ServerError):
        with_retries(failing, sleep=lambda _: None)
    assert len(calls) == 1 + 4


PROXY_PAGE = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_proxys_gateway_error_is_a_failure_not_an_answer(status: int) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=PROXY_PAGE, headers={"Content-Type": "text/html"})

    api = Api("http://memsync.test", "token", "acme/app", transport=httpx.MockTransport(handler))
    for call in (lambda: api.get(if_none_match="sha256:" + "0" * 64), api.hashes, api.health):
        with pytest.raises(ServerError) as caught:
            call()
        assert caught.value.status == status
    with pytest.raises(ServerError):
        api.events()


def caused_by(error: httpx.TransportError, cause: OSError) -> httpx.TransportError:
    """`error` raised from the socket's own `cause`, as httpx raises it."""
    error.__cause__ = cause
    return error


RESET = ConnectionResetError(104, "Connection reset by peer")


@pytest.mark.parametrize(
    "error",
    [
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        caused_by(httpx.ReadError("[Errno 104] Connection reset by peer"), RESET),
        caused_by(httpx.WriteError("[Errno 32] Broken pipe"), BrokenPipeError(32, "pipe")),
        # A reset that arrives while httpx still sets the socket up: it says "connect".
        caused_by(httpx.ConnectError("[Errno 104] Connection reset by peer"), RESET),
    ],
)
def test_a_connection_accepted_then_closed_is_a_failure_of_a_reachable_address(
    error: httpx.TransportError,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    api = Api("http://memsync.test", "token", "acme/app", transport=httpx.MockTransport(handler))
    with pytest.raises(NetworkError) as caught:
        api.get(if_none_match="sha256:" + "0" * 64)
    # Reachable: a TCP connect succeeds there, so only a request's answer can tell the
    # server's return.
    assert not caught.value.unreachable
    assert isinstance(caught.value, TransientError)


def test_a_refused_connection_is_an_unreachable_address() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")

    def handler(request: httpx.Request) -> httpx.Response:
        raise caused_by(httpx.ConnectError("[Errno 111] Connection refused"), refused)

    api = Api("http://memsync.test", "token", "acme/app", transport=httpx.MockTransport(handler))
    with pytest.raises(NetworkError) as caught:
        api.hashes()
    assert caught.value.unreachable


@pytest.fixture
def resetting_port() -> Iterator[str]:
    """A loopback port that accepts every connection and resets it at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            # Blocking, so the reset comes at once (select only lets the test end it).
            if not select.select([listener], [], [], 0.2)[0]:
                continue
            connection, _ = listener.accept()
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    listener.close()


def test_a_real_accept_then_reset_is_a_network_failure(resetting_port: str) -> None:
    with Api(resetting_port, "token", "acme/app") as api:
        for _ in range(20):
            with pytest.raises(NetworkError) as caught:
                api.get(if_none_match="sha256:" + "0" * 64)
            assert not caught.value.unreachable
        with pytest.raises(NetworkError):
            api.events()
