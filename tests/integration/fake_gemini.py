"""A fake Gemini API on 127.0.0.1, for driving the real Gemini CLI headless.

`FakeGemini` records every request (method, path, JSON body) and answers
`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` the way the real API does: a
server-sent event stream of `GenerateContentResponse` chunks (`data: {...}` lines),
the last one with `finishReason` and `usageMetadata`; `:generateContent` gets the same
response as one JSON object, `:countTokens` a token count, anything else `{}`.

A test scripts the main conversation as a queue of turns (`text(...)` or
`call(name, args)`, a `functionCall` part); after a call, Gemini CLI's next request
carries the `functionResponse`, which `function_responses()` finds. Requests that are
not the main conversation (no tools offered: a routing or a summary call) get a plain
text answer and leave the script alone. When the script runs out, the main conversation
gets `DEFAULT_REPLY`.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_REPLY = "Done."
SIDE_REPLY = "Fake reply"
USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: text, or one function call."""

    text: str = ""
    call: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


def text(words: str) -> Turn:
    """A turn that answers with `words` and ends the conversation (finishReason STOP)."""
    return Turn(text=words)


def call(name: str, args: dict[str, Any]) -> Turn:
    """A turn that calls the function (tool) `name` with `args`."""
    return Turn(call=name, args=args)


@dataclass
class Recorded:
    """One request Gemini CLI sent."""

    method: str
    path: str
    body: Any
    # Whether this request was answered from the script (the main conversation).
    main: bool = False

    @property
    def is_generate(self) -> bool:
        path = self.path.split("?", 1)[0]
        return self.method == "POST" and (
            path.endswith(":streamGenerateContent") or path.endswith(":generateContent")
        )

    def contents(self) -> list[dict[str, Any]]:
        contents = self.body.get("contents") if isinstance(self.body, dict) else None
        return [content for content in contents or [] if isinstance(content, dict)]

    def parts(self) -> list[dict[str, Any]]:
        return [
            part
            for content in self.contents()
            for part in content.get("parts") or []
            if isinstance(part, dict)
        ]

    def texts(self) -> str:
        """Every text part of the conversation, joined by newlines."""
        return "\n".join(str(part["text"]) for part in self.parts() if "text" in part)

    def function_responses(self) -> list[dict[str, Any]]:
        """The `functionResponse` parts, in order ({name, response, ...})."""
        return [
            part["functionResponse"]
            for part in self.parts()
            if isinstance(part.get("functionResponse"), dict)
        ]

    def function_names(self) -> list[str]:
        """The names of the functions (tools) this request offers the model."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [
            str(declaration.get("name"))
            for tool in tools or []
            if isinstance(tool, dict)
            for declaration in tool.get("functionDeclarations") or []
            if isinstance(declaration, dict)
        ]


def is_main_conversation(body: Any) -> bool:
    """Whether a generate request is the session's main loop: it offers functions."""
    return isinstance(body, dict) and bool(body.get("tools"))


def response(turn: Turn, model: str) -> dict[str, Any]:
    """The `GenerateContentResponse` of one turn."""
    part: dict[str, Any] = (
        {"functionCall": {"name": turn.call, "args": turn.args}}
        if turn.call is not None
        else {"text": turn.text}
    )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": USAGE,
        "modelVersion": model,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing its keep-alive connection is not an error worth printing."""


class FakeGemini:
    """The fake API: `url` for GOOGLE_GEMINI_BASE_URL, `script()` to queue turns."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._turns: deque[Turn] = deque()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                record = Recorded(method=self.command, path=self.path, body=body)
                path = self.path.split("?", 1)[0]
                model = path.rsplit("/", 1)[-1].split(":", 1)[0]
                if record.is_generate:
                    record.main = is_main_conversation(body)
                    turn = fake._next_turn(record.main)
                    fake._record(record)
                    answer = response(turn, model)
                    if path.endswith(":streamGenerateContent"):
                        self._stream(answer)
                    else:
                        self._json(200, answer)
                    return
                fake._record(record)
                if path.endswith(":countTokens"):
                    self._json(200, {"totalTokens": 100})
                    return
                self._json(200, {})

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _stream(self, answer: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                self.wfile.write(f"data: {json.dumps(answer)}\r\n\r\n".encode())
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-gemini", daemon=True
        )
        self._thread.start()

    def _next_turn(self, main: bool) -> Turn:
        if not main:
            return text(SIDE_REPLY)
        with self._lock:
            return self._turns.popleft() if self._turns else text(DEFAULT_REPLY)

    def _record(self, record: Recorded) -> None:
        with self._lock:
            self.requests.append(record)

    def script(self, *turns: Turn) -> None:
        """Forget what was recorded and queue `turns` for the main conversation."""
        with self._lock:
            self.requests.clear()
            self._turns = deque(turns)

    def remaining(self) -> int:
        """Scripted turns not yet answered."""
        with self._lock:
            return len(self._turns)

    def recorded(self) -> list[Recorded]:
        """A copy of every request so far."""
        with self._lock:
            return list(self.requests)

    def main_requests(self) -> list[Recorded]:
        """The generate requests of the main conversation, in order."""
        return [request for request in self.recorded() if request.is_generate and request.main]

    def close(self) -> None:
        """Stop serving and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeGemini:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
