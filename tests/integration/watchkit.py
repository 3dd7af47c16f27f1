"""Helpers of the watcher tests: a loopback proxy that plays the network, and watcher
processes.

`Proxy` forwards every request to a real server and counts it. On demand it answers the
next N requests itself with a 503 or 429 (with `Retry-After`), holds PUTs for a while
(a slow network), or refuses the events stream (a proxy that drops it). It never
answers for the server in any other way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from sync_server.config import Settings, sqlite_url
from tests.integration.users import User
from tests.liveserver import LiveServer, run_live_server

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class ProxyControl:
    """What the proxy does to the next requests, and what it saw."""

    fail_next: int = 0
    fail_status: int = 503
    retry_after: str = "1"
    hold_puts: float = 0.0
    block_events: bool = False
    # What a refused events stream answers: 503 (the stream is down) or 404 (a server
    # that has none).
    events_status: int = 503
    requests: list[tuple[str, str]] = field(default_factory=list)
    # (method, path with its query, body bytes answered) of each forwarded request.
    answered: list[tuple[str, str, int]] = field(default_factory=list)
    # Upstream responses being forwarded now (an events stream stays here for long).
    streaming: set[httpx.Response] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, *, since: int = 0, method: str | None = None) -> int:
        """Requests seen after the first `since` (of `method`, when given)."""
        with self.lock:
            seen = self.requests[since:]
        return sum(1 for seen_method, _ in seen if method is None or seen_method == method)

    def mark(self) -> int:
        """The number of requests so far, to count from."""
        with self.lock:
            return len(self.requests)


class Proxy:
    """An HTTP/1.0 forwarding proxy on 127.0.0.1 in front of `upstream`."""

    def __init__(self, upstream: str) -> None:
        self.control = ProxyControl()
        control = self.control
        client = httpx.Client(base_url=upstream, timeout=60.0)
        self._client = client

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                with control.lock:
                    control.requests.append((self.command, path))
                    failing = control.fail_next > 0
                    if failing:
                        control.fail_next -= 1
                if failing:
                    self._answer(
                        control.fail_status,
                        b'{"error": {"type": "unavailable", "message": "proxy", "details": {}}}',
                        {"Retry-After": control.retry_after},
                    )
                    return
                if path.endswith("/events") and control.block_events:
                    refusal = b'{"error": {"type": "refused", "message": "proxy", "details": {}}}'
                    self._answer(control.events_status, refusal, {"Retry-After": "1"})
                    return
                if self.command == "PUT" and control.hold_puts:
                    time.sleep(control.hold_puts)
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "host"
                }
                request = client.build_request(
                    self.command, self.path, headers=headers, content=body
                )
                try:
                    response = client.send(request, stream=True)
                except httpx.TransportError:
                    self._answer(502, b"{}", {})
                    return
                with control.lock:
                    control.streaming.add(response)
                try:
                    self.send_response(response.status_code)
                    for name, value in response.headers.items():
                        if name.lower() not in _HOP_BY_HOP:
                            self.send_header(name, value)
                    self.end_headers()
                    sent = 0
                    for chunk in response.iter_raw():
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        sent += len(chunk)
                    with control.lock:
                        control.answered.append((self.command, self.path, sent))
                except (OSError, httpx.HTTPError, RuntimeError):
                    pass  # the client went away (a watcher closing its stream), or close()
                finally:
                    with control.lock:
                        control.streaming.discard(response)
                    with contextlib.suppress(Exception):
                        response.close()

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="test-proxy", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and wait for the serving thread. Upstream streams still being
        forwarded are cut, so the server sees them end (and stops without waiting)."""
        self._server.shutdown()
        self._server.server_close()
        with self.control.lock:
            streaming = list(self.control.streaming)
        for response in streaming:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(5)
        self._client.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll `predicate` until it is true or `timeout` passes; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def memsync_command() -> list[str]:
    """The `memsync` console script of this environment."""
    return [str(Path(sys.executable).with_name("memsync"))]


class WatchProcess:
    """`memsync watch ...` in its own process; its stderr (the log) kept in a file."""

    def __init__(
        self, env: dict[str, str], cwd: Path, *args: str, command: list[str] | None = None
    ) -> None:
        """`command` is the `memsync` to run; None: this environment's."""
        self.log_path = cwd / f"watch-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [*(command or memsync_command()), "watch", *args],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def log(self) -> str:
        """What the watcher logged so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def terminate(
        self, timeout: float = 10.0, signum: signal.Signals = signal.SIGTERM
    ) -> tuple[int, float]:
        """SIGTERM (or `signum`); (exit code, seconds it took to exit)."""
        started = time.monotonic()
        self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(5)
            self._log.close()
        return code, time.monotonic() - started

    def kill(self) -> None:
        """Make sure it is gone (for teardown)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        self._log.close()


@contextmanager
def watch_server(folder: Path, port: int = 0, **settings: Any) -> Iterator[LiveServer]:
    """A live server on SQLite in `folder` that notices a revoked token at once (on
    `port`, when given: the same folder and port again is a restarted server)."""
    config = Settings(
        database_url=sqlite_url(folder / "memsync.sqlite3"), token_cache_seconds=0, **settings
    )
    with run_live_server(config, port) as server:
        yield server


def server_entries(live: LiveServer, repo: str = "acme/app") -> dict[str, str]:
    """What the server holds for `repo` ({} before anything was written)."""
    with live.client(live.token()) as client:
        response = client.get("/v1/team_memory", params={"repo": repo})
    if response.status_code == 404:
        return {}
    entries: dict[str, str] = response.json()["content"]["entries"]
    return entries


def watch_state(user: User) -> dict[str, Any] | None:
    """The watcher's state file of the user's (only) repo, or None."""
    found = sorted((user.home / ".state" / "memsync").glob("*/watch.json"))
    return json.loads(found[0].read_text()) if found else None
