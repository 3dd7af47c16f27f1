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
from dataclasses import dataclass, field
from typing import Any

from tests.integration.fake_model import FakeHandler, ScriptedFake

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


class FakeGemini(ScriptedFake[Turn, Recorded]):
    """The fake API: `url` for GOOGLE_GEMINI_BASE_URL, `script()` to queue turns."""

    def __init__(self) -> None:
        super().__init__(default=text(DEFAULT_REPLY), side=text(SIDE_REPLY))
        fake = self

        class Handler(FakeHandler):
            def _handle(self) -> None:
                body = self.read_body()
                record = Recorded(method=self.command, path=self.path, body=body)
                path = self.path.split("?", 1)[0]
                model = path.rsplit("/", 1)[-1].split(":", 1)[0]
                if record.is_generate:
                    record.main = is_main_conversation(body)
                    turn = fake.next_turn(record.main)
                    fake.record(record)
                    answer = response(turn, model)
                    if path.endswith(":streamGenerateContent"):
                        self._stream(answer)
                    else:
                        self.send_json(200, answer)
                    return
                fake.record(record)
                if path.endswith(":countTokens"):
                    self.send_json(200, {"totalTokens": 100})
                    return
                self.send_json(200, {})

            def _stream(self, answer: dict[str, Any]) -> None:
                self.start_events()
                self.wfile.write(f"data: {json.dumps(answer)}\r\n\r\n".encode())
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self.serve(Handler, "fake-gemini")

    def main_requests(self) -> list[Recorded]:
        """The generate requests of the main conversation, in order."""
        return [request for request in self.recorded() if request.is_generate and request.main]
