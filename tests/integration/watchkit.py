"""Helpers of the watcher tests: a loopback proxy that plays the network, and watcher
processes.

`Proxy` forwards every request to a real server and counts it. On demand it answers the
next N requests itself with a 503 or 429 (with `Retry-After`), holds PUTs for a while
(a slow network), or refuses the events stream (a proxy that drops it). It never
answers for the server in any other way.
"""

from __future__ import annotations

import contextlib
import gzip
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
    # (method, path with its query, request body, gunzipped) of each request: what the
    # client sent on the wire.
    sent: list[tuple[str, str, bytes]] = field(default_factory=list)
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
                plain = body
                if body and self.headers.get("Content-Encoding") == "gzip":
                    plain = gzip.decompress(body)
                with control.lock:
                    control.requests.append((self.command, path))
                    control.sent.append((self.command, self.path, plain))
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


# What an HTTP request line asks for, as the kinds of a watcher's attempts.
def _kind_of(request_line: bytes) -> str:
    """`push`, `pull` or `stream` for a watcher's request line (a push reads the hashes
    view, then PUTs); `other` for anything else (`/healthz`)."""
    method, _, rest = request_line.partition(b" ")
    target = rest.split(b" ", 1)[0]
    if target.startswith(b"/v1/team_memory/events"):
        return "stream"
    if method == b"PUT" or b"view=hashes" in target:
        return "push"
    if target.startswith(b"/v1/team_memory"):
        return "pull"
    return "other"


_PROXY_PAGE = b"<html><body><h1>%d</h1>no upstream</body></html>\n"


class OutageProxy:
    """A TCP proxy on 127.0.0.1 in front of a real server: what a Docker published
    port or a TCP load balancer does while the server behind it is down.

    `mode` says what it does with each new connection:

        up     forward the bytes both ways (the server answers)
        reset  accept, then reset at once without reading (RST)
        close  accept, then close at once without a byte (FIN)
        502    read the request head, answer 502 (or 503, 504) with an HTML page, close

    Leaving `up` cuts every connection being forwarded (an events stream too). Every
    accepted connection is an attempt: `attempts` holds (monotonic time, kind), the
    kind read from the request line where one was read (`?` for a reset or a close).
    """

    def __init__(self, upstream: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(upstream)
        assert parts.hostname is not None
        assert parts.port is not None
        self._upstream = (parts.hostname, parts.port)
        self.mode = "up"
        self.attempts: list[tuple[float, str]] = []
        # When the first connection after the last switch to `up` was forwarded.
        self.first_forwarded: float | None = None
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, name="outage-proxy", daemon=True)
        self._thread.start()

    def set_mode(self, mode: str) -> None:
        """Switch modes; leaving `up` cuts what is being forwarded."""
        assert mode in ("up", "reset", "close", "502", "503", "504"), mode
        with self._lock:
            self.mode = mode
            self.first_forwarded = None
            cut = list(self._open) if mode != "up" else []
            self._open.difference_update(cut)
        for connection in cut:
            _reset(connection, wake=True)

    def seen(self, start: float, end: float) -> list[tuple[float, str]]:
        """The attempts accepted in [start, end): (monotonic time, kind)."""
        with self._lock:
            return [(at, kind) for at, kind in self.attempts if start <= at < end]

    def count(self, start: float, end: float, kind: str | None = None) -> int:
        """Attempts accepted in [start, end) (of `kind`, when given)."""
        return sum(1 for _, seen in self.seen(start, end) if kind in (None, seen))

    def close(self) -> None:
        """Stop accepting and cut every open connection."""
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        with self._lock:
            cut, self._open = list(self._open), set()
        for connection in cut:
            _reset(connection, wake=True)

    def _accept(self) -> None:
        import select

        while not self._stop.is_set():
            # A blocking listener (its connections block too, as a server's do); select
            # only lets `close()` end the loop.
            if not select.select([self._listener], [], [], 0.2)[0]:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            at = time.monotonic()
            with self._lock:
                mode = self.mode
                if mode in ("reset", "close"):
                    self.attempts.append((at, "?"))
            if mode == "reset":  # at once, on this thread: often before the client's
                _reset(client)  # socket is even set up
            elif mode == "close":
                client.close()
            else:
                threading.Thread(target=self._serve, args=(client, mode, at), daemon=True).start()

    def _serve(self, client: socket.socket, mode: str, at: float) -> None:
        client.settimeout(5.0)
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n" not in head and len(head) < 65536:
                chunk = client.recv(65536)
                if not chunk:
                    break
                head += chunk
        with self._lock:
            self.attempts.append((at, _kind_of(head.split(b"\r\n", 1)[0])))
        if mode != "up":
            status = int(mode)
            body = _PROXY_PAGE % status
            answer = (
                f"HTTP/1.1 {status} Proxy Error\r\nContent-Type: text/html\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode() + body
            with contextlib.suppress(OSError):
                client.sendall(answer)
            client.close()
            return
        try:
            upstream = socket.create_connection(self._upstream, timeout=5.0)
        except OSError:
            _reset(client)
            return
        with self._lock:
            if self.first_forwarded is None:
                self.first_forwarded = at
            self._open.update((client, upstream))
        client.settimeout(None)
        upstream.settimeout(None)
        with contextlib.suppress(OSError):
            upstream.sendall(head)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join(60)
        with self._lock:
            self._open.difference_update((client, upstream))
        client.close()
        upstream.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until `source` ends; then end `sink`'s writing side."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _reset(connection: socket.socket, *, wake: bool = False) -> None:
    """Close with a TCP reset (linger 0), as a proxy with nothing behind it does;
    `wake` first wakes a thread reading it (a pump), sending nothing."""
    import struct

    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if wake:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RD)
    connection.close()
