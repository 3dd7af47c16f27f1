"""What the recording fake model APIs share (`fake_anthropic`, `fake_openai`,
`fake_gemini`): a threaded HTTP server on 127.0.0.1, a request handler that reads a JSON
body and answers JSON or opens a server-sent event stream, and the scripted turns and
recorded requests, behind one lock.

Each fake keeps what is its API's own: the turn and record types, which requests belong
to the main conversation, and the shape of an answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

TurnT = TypeVar("TurnT")
RecordT = TypeVar("RecordT")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing its keep-alive connection is not an error worth printing."""


class FakeHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, silent, with the reads and answers every fake makes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_body(self) -> Any:
        """The request's JSON body (None when empty; the text when it is not JSON)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def lower_headers(self) -> dict[str, str]:
        """The request's headers, names in lower case."""
        return {name.lower(): value for name, value in self.headers.items()}

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def start_events(self, headers: dict[str, str] | None = None) -> None:
        """A 200 opening a server-sent event stream; the connection closes after it."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True


class ScriptedFake(Generic[TurnT, RecordT]):
    """Scripted turns for the main conversation, `side` for any other request, and every
    request recorded; served on 127.0.0.1 by `serve`."""

    def __init__(self, *, default: TurnT, side: TurnT) -> None:
        self.requests: list[RecordT] = []
        self._turns: deque[TurnT] = deque()
        self._default = default
        self._side = side
        self._lock = threading.Lock()
        self._ids = 0
        self.url = ""

    def serve(self, handler: type[BaseHTTPRequestHandler], name: str, path: str = "") -> None:
        """Start answering with `handler` in a thread; `url` is the server's, plus `path`."""
        self._server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_fake{self._ids:06d}{time.monotonic_ns() % 1000000:06d}"

    def next_turn(self, main: bool) -> TurnT:
        """The next scripted turn of the main conversation (the default once none is
        left); the side reply for any other request."""
        if not main:
            return self._side
        with self._lock:
            return self._turns.popleft() if self._turns else self._default

    def record(self, record: RecordT) -> None:
        with self._lock:
            self.requests.append(record)

    def script(self, *turns: TurnT) -> None:
        """Forget what was recorded and queue `turns` for the main conversation."""
        with self._lock:
            self.requests.clear()
            self._turns = deque(turns)

    def remaining(self) -> int:
        """Scripted turns not yet answered."""
        with self._lock:
            return len(self._turns)

    def recorded(self) -> list[RecordT]:
        """A copy of every request so far."""
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        """Stop serving and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
