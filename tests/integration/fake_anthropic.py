"""A fake Anthropic Messages API on 127.0.0.1, for driving the real Claude Code CLI.

`FakeAnthropic` records every request (method, path, headers, JSON body) and answers
`POST /v1/messages` the way the real API does: a server-sent event stream (message_start,
content_block_start, content_block_delta with text_delta or input_json_delta,
content_block_stop, message_delta with the stop reason and usage, message_stop) when the
request asks for `stream`, one JSON message otherwise. `POST /v1/messages/count_tokens`
gets a token count; any other path a harmless `{}`.

A test scripts the main conversation as a queue of turns (`text(...)` or
`tool_use(name, input)`); after a tool_use, Claude Code's next request carries the
tool_result, which `tool_results()` finds. Requests that are not the main conversation
(a small model asked for a title or a summary, a quota probe: no tools offered) get a
plain text answer and leave the script alone. When the script runs out, the main
conversation gets `DEFAULT_REPLY`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.integration.fake_model import FakeHandler, ScriptedFake

DEFAULT_REPLY = "Done."
SIDE_REPLY = "Fake reply"


@dataclass(frozen=True)
class Turn:
    """One scripted assistant turn: text, or one tool call (with optional text before)."""

    text: str = ""
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)


def text(words: str) -> Turn:
    """A turn that answers with `words` and ends the conversation (end_turn)."""
    return Turn(text=words)


def tool_use(name: str, tool_input: dict[str, Any], *, before: str = "") -> Turn:
    """A turn that calls tool `name` with `tool_input` (stop_reason tool_use)."""
    return Turn(text=before, tool=name, input=tool_input)


@dataclass
class Recorded:
    """One request Claude Code sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # Whether this request was answered from the script (the main conversation).
    main: bool = False

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?", 1)[0] == "/v1/messages"

    def system_text(self) -> str:
        """The system prompt, its blocks joined by newlines."""
        return _text_of(self.body.get("system", "")) if isinstance(self.body, dict) else ""

    def messages_text(self) -> str:
        """Every text of every message (tool inputs and results included)."""
        if not isinstance(self.body, dict):
            return ""
        return "\n".join(_text_of(message.get("content", "")) for message in _messages(self))

    def all_text(self) -> str:
        """The system prompt and the messages."""
        return f"{self.system_text()}\n{self.messages_text()}"

    def hook_outputs(self, event: str = "SessionStart") -> list[str]:
        """What hooks of `event` gave the model, each with the text after it.

        Claude Code 2.1 sends a hook's plain stdout in a `system` message as
        "SessionStart:startup hook success: <stdout>", and a JSON `additionalContext`
        as "SessionStart hook additional context: <text>" (over 10,000 characters,
        either is a 2 KB preview in `<persisted-output>`). The same message goes on with
        other reminders, so each found text starts with the hook's output.
        """
        pattern = re.compile(rf"{re.escape(event)}(?::\w+ hook success| hook additional context): ")
        found: list[str] = []
        for message in _messages(self):
            if message.get("role") == "system":
                words = _text_of(message.get("content", ""))
                found.extend(words[match.end() :] for match in pattern.finditer(words))
        return found

    def tool_results(self) -> list[ToolResult]:
        """The tool_result blocks of the messages, in order."""
        found: list[ToolResult] = []
        for message in _messages(self):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(
                        ToolResult(
                            tool_use_id=str(block.get("tool_use_id", "")),
                            text=_text_of(block.get("content", "")),
                            is_error=bool(block.get("is_error", False)),
                        )
                    )
        return found

    def tool_names(self) -> list[str]:
        """The names of the tools this request offers the model."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        return [str(tool.get("name")) for tool in tools or [] if isinstance(tool, dict)]


@dataclass(frozen=True)
class ToolResult:
    """A tool_result Claude Code sent back: the id of the call, its text, is_error."""

    tool_use_id: str
    text: str
    is_error: bool


def _messages(request: Recorded) -> list[dict[str, Any]]:
    messages = request.body.get("messages") if isinstance(request.body, dict) else None
    return [message for message in messages or [] if isinstance(message, dict)]


def _text_of(content: Any) -> str:
    """The text in a content value: a string, or a list of blocks (nested results too)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            if block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input", {})))
            if block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content", "")))
    return "\n".join(parts)


def is_main_conversation(body: Any) -> bool:
    """Whether a /v1/messages body is the session's main loop: it offers tools.

    Claude Code's side calls (a title, a summary, a quota probe) offer none.
    """
    return isinstance(body, dict) and bool(body.get("tools"))


class FakeAnthropic(ScriptedFake[Turn, Recorded]):
    """The fake API: `url` for ANTHROPIC_BASE_URL, `script()` to queue turns."""

    def __init__(self) -> None:
        super().__init__(default=text(DEFAULT_REPLY), side=text(SIDE_REPLY))
        fake = self

        class Handler(FakeHandler):
            def _handle(self) -> None:
                body = self.read_body()
                record = Recorded(
                    method=self.command,
                    path=self.path,
                    headers=self.lower_headers(),
                    body=body,
                )
                path = self.path.split("?", 1)[0]
                if self.command == "POST" and path == "/v1/messages":
                    record.main = is_main_conversation(body)
                    turn = fake.next_turn(record.main)
                    fake.record(record)
                    self._message(body if isinstance(body, dict) else {}, turn)
                    return
                fake.record(record)
                if self.command == "POST" and path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 100})
                    return
                self._json(200, {})

            def _json(self, status: int, payload: Any) -> None:
                self.send_json(status, payload, {"request-id": fake.new_id("req")})

            def _message(self, body: dict[str, Any], turn: Turn) -> None:
                model = str(body.get("model", "claude-sonnet-4-5"))
                message_id = fake.new_id("msg")
                blocks: list[dict[str, Any]] = []
                if turn.text:
                    blocks.append({"type": "text", "text": turn.text})
                if turn.tool is not None:
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": fake.new_id("toolu"),
                            "name": turn.tool,
                            "input": turn.input,
                        }
                    )
                stop_reason = "tool_use" if turn.tool is not None else "end_turn"
                usage = {"input_tokens": 100, "output_tokens": 10}
                if not body.get("stream"):
                    self._json(
                        200,
                        {
                            "id": message_id,
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": blocks,
                            "stop_reason": stop_reason,
                            "stop_sequence": None,
                            "usage": usage,
                        },
                    )
                    return
                self.start_events({"request-id": fake.new_id("req")})
                self._event(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": message_id,
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {"input_tokens": 100, "output_tokens": 1},
                        },
                    },
                )
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        start: dict[str, Any] = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    else:
                        start = {**block, "input": {}}
                        delta = {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        }
                    self._event(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": start},
                    )
                    self._event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                    self._event(
                        "content_block_stop", {"type": "content_block_stop", "index": index}
                    )
                self._event(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                        "usage": {"output_tokens": 10},
                    },
                )
                self._event("message_stop", {"type": "message_stop"})

            def _event(self, name: str, payload: dict[str, Any]) -> None:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self.serve(Handler, "fake-anthropic")

    def main_requests(self) -> list[Recorded]:
        """The /v1/messages requests of the main conversation, in order."""
        return [request for request in self.recorded() if request.is_messages and request.main]

    def tool_results(self) -> list[ToolResult]:
        """The tool_results of the last main request (it carries the whole conversation)."""
        main = self.main_requests()
        return main[-1].tool_results() if main else []

    def first_system(self) -> str:
        """The system prompt of the first main request."""
        main = self.main_requests()
        return main[0].system_text() if main else ""

    def contains(self, needle: str) -> bool:
        """Whether any /v1/messages request carries `needle` in its system or messages."""
        return any(
            needle in request.all_text() for request in self.recorded() if request.is_messages
        )
