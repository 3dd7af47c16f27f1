"""The fake Anthropic API on its own: the wire shapes Claude Code relies on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.fake_anthropic import (
    DEFAULT_REPLY,
    SIDE_REPLY,
    FakeAnthropic,
    text,
    tool_use,
)

TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as api:
        yield api


def events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each server-sent event."""
    found: list[tuple[str, dict[str, Any]]] = []
    for chunk in response.text.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        found.append((name_line.removeprefix("event: "), json.loads(data_line[len("data: ") :])))
    return found


def test_a_streamed_tool_use_then_text(fake: FakeAnthropic) -> None:
    fake.script(tool_use("Write", {"file_path": "/x", "content": "y"}), text("ok"))
    body = {"model": "m", "stream": True, "tools": TOOLS, "messages": []}
    with httpx.Client(base_url=fake.url) as client:
        first = client.post("/v1/messages?beta=true", json=body)
        assert first.headers["content-type"] == "text/event-stream"
        stream = events(first)
        assert [name for name, _ in stream] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        block = stream[1][1]["content_block"]
        assert block["type"] == "tool_use"
        assert block["name"] == "Write"
        assert json.loads(stream[2][1]["delta"]["partial_json"]) == {
            "file_path": "/x",
            "content": "y",
        }
        assert stream[4][1]["delta"]["stop_reason"] == "tool_use"
        result = {"type": "tool_result", "tool_use_id": block["id"], "content": "written"}
        body["messages"] = [{"role": "user", "content": [result]}]
        second = events(client.post("/v1/messages", json=body))
    assert second[2][1]["delta"] == {"type": "text_delta", "text": "ok"}
    assert second[4][1]["delta"]["stop_reason"] == "end_turn"
    (found,) = fake.tool_results()
    assert (found.tool_use_id, found.text, found.is_error) == (block["id"], "written", False)
    assert fake.remaining() == 0


def test_side_calls_and_other_paths_leave_the_script_alone(fake: FakeAnthropic) -> None:
    fake.script(text("scripted"))
    with httpx.Client(base_url=fake.url) as client:
        side = client.post(
            "/v1/messages", json={"model": "haiku", "system": "Write a title", "messages": []}
        )
        counted = client.post("/v1/messages/count_tokens", json={"messages": []})
        other = client.get("/api/anything")
        main = client.post("/v1/messages", json={"model": "m", "tools": TOOLS, "messages": []})
        after = client.post("/v1/messages", json={"model": "m", "tools": TOOLS, "messages": []})
    assert side.json()["content"] == [{"type": "text", "text": SIDE_REPLY}]
    assert counted.json() == {"input_tokens": 100}
    assert other.json() == {}
    assert main.json()["content"] == [{"type": "text", "text": "scripted"}]
    assert main.json()["stop_reason"] == "end_turn"
    assert after.json()["content"][0]["text"] == DEFAULT_REPLY
    assert [request.path for request in fake.recorded()] == [
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/api/anything",
        "/v1/messages",
        "/v1/messages",
    ]
    assert len(fake.main_requests()) == 2
    assert fake.contains("Write a title")


def test_hook_outputs_are_found_in_system_messages(fake: FakeAnthropic) -> None:
    fake.script()
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "system",
            "content": "SessionStart:startup hook success: MARKER\n\nAvailable agent types",
        },
        {"role": "system", "content": "SessionStart hook additional context: CONTEXT"},
    ]
    with httpx.Client(base_url=fake.url) as client:
        client.post("/v1/messages", json={"tools": TOOLS, "messages": messages})
    (request,) = fake.main_requests()
    assert request.hook_outputs() == ["MARKER\n\nAvailable agent types", "CONTEXT"]
    assert request.hook_outputs("SessionEnd") == []
