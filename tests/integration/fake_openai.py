"""A fake OpenAI Responses API on 127.0.0.1, for driving the real Codex CLI.

`FakeOpenAI` records every request (method, path, headers, JSON body) and answers
`POST .../responses` the way the real API streams: server-sent events
`response.created`, one `response.output_item.done` per output item (an assistant
`message` with `output_text`, or a `function_call` with its `call_id`, name and JSON
arguments), then `response.completed` with the usage. `GET .../models` gets an empty
list; any other path a harmless `{}`.

A test scripts the conversation as a queue of turns (`text(...)` or `call(name, args)`);
after a function call, Codex's next request carries a `function_call_output` item with
the tool's result, which `tool_outputs()` finds. Requests that offer no tools (a title
or a summary) get a plain text answer and leave the script alone. When the script runs
out, the conversation gets `DEFAULT_REPLY`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.integration.fake_model import FakeHandler, ScriptedFake

DEFAULT_REPLY = "Done."
SIDE_REPLY = "Fake reply"


@dataclass(frozen=True)
class Turn:
    """One scripted assistant turn: text, or one function call."""

    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


def text(words: str) -> Turn:
    """A turn that answers with `words` and ends the turn."""
    return Turn(text=words)


def call(name: str, arguments: dict[str, Any]) -> Turn:
    """A turn that calls the tool `name` (as Codex names it in `tools`) with `arguments`."""
    return Turn(tool=name, arguments=arguments)


@dataclass
class Recorded:
    """One request Codex sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # Whether this request was answered from the script (it offered tools).
    main: bool = False

    @property
    def is_responses(self) -> bool:
        return self.method == "POST" and self.path.split("?", 1)[0].endswith("/responses")

    def items(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        items = body.get("input")
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    def input_texts(self) -> list[str]:
        """The text of each input message, in order (a hook's context is one)."""
        return [_text_of(item.get("content")) for item in self.items() if "content" in item]

    def all_text(self) -> str:
        """The instructions and every text of every input item (tool outputs included)."""
        body = self.body if isinstance(self.body, dict) else {}
        parts = [str(body.get("instructions") or "")]
        for item in self.items():
            parts.append(_text_of(item.get("content")))
            if item.get("type") == "function_call_output":
                parts.append(_text_of(item.get("output")))
        return "\n".join(parts)

    def tool_names(self) -> list[str]:
        """The names of the tools offered (a namespace's tools as `namespace.tool`)."""
        body = self.body if isinstance(self.body, dict) else {}
        names: list[str] = []
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("name"):
                names.append(str(tool["name"]))
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    names.append(f"{tool.get('name')}.{inner['name']}")
        return names

    def tool_outputs(self) -> list[str]:
        """The text of every `function_call_output` item, in order."""
        return [
            _text_of(item.get("output"))
            for item in self.items()
            if item.get("type") in ("function_call_output", "custom_tool_call_output")
        ]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or "")
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    return ""


class FakeOpenAI(ScriptedFake[Turn, Recorded]):
    """The fake API: `url` (ending in /v1) for a model provider's `base_url`."""

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
                if record.is_responses:
                    record.main = isinstance(body, dict) and bool(body.get("tools"))
                    turn = fake.next_turn(record.main)
                    fake.record(record)
                    self._stream(body if isinstance(body, dict) else {}, turn)
                    return
                fake.record(record)
                if path.endswith("/models"):
                    self.send_json(200, {"object": "list", "data": [], "models": []})
                    return
                self.send_json(200, {})

            def _stream(self, body: dict[str, Any], turn: Turn) -> None:
                response_id = fake.new_id("resp")
                if turn.tool is not None:
                    # A namespace's tool ("mcp__memsync.write_note") is called by its
                    # own name, with the namespace beside it.
                    namespace, _, name = turn.tool.rpartition(".")
                    item: dict[str, Any] = {
                        "type": "function_call",
                        "id": fake.new_id("fc"),
                        "call_id": fake.new_id("call"),
                        "name": name,
                        "arguments": json.dumps(turn.arguments),
                        "status": "completed",
                    }
                    if namespace:
                        item["namespace"] = namespace
                else:
                    item = {
                        "type": "message",
                        "id": fake.new_id("msg"),
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                    }
                self.start_events()
                model = str(body.get("model", "gpt-fake"))
                shell = {"id": response_id, "object": "response", "model": model}
                self._event("response.created", {"response": {**shell, "status": "in_progress"}})
                self._event("response.output_item.added", {"output_index": 0, "item": item})
                self._event("response.output_item.done", {"output_index": 0, "item": item})
                usage = {
                    "input_tokens": 100,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 10,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 110,
                }
                done = {**shell, "status": "completed", "output": [item], "usage": usage}
                self._event("response.completed", {"response": done})

            def _event(self, name: str, payload: dict[str, Any]) -> None:
                data = json.dumps({"type": name, **payload})
                self.wfile.write(f"event: {name}\ndata: {data}\n\n".encode())
                self.wfile.flush()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self.serve(Handler, "fake-openai", "/v1")

    def main_requests(self) -> list[Recorded]:
        """The /responses requests of the conversation, in order."""
        return [request for request in self.recorded() if request.is_responses and request.main]
