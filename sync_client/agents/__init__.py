"""Agent integrations: one module per agent, each an `Agent` (see `base.py`).

    AGENTS           the names `memsync setup` takes, in the order it lists them
    agent(name)      the integration of one agent (a `ConfigError` for an unknown name)

A fifth agent is one module with an `Agent` subclass, added to `_REGISTRY` below.
"""

from __future__ import annotations

from sync_client.agents.base import Agent
from sync_client.agents.claude_code import ClaudeCode
from sync_client.agents.codex import Codex
from sync_client.agents.cursor import Cursor
from sync_client.agents.gemini import Gemini
from sync_client.agents.qwen import Qwen
from sync_client.errors import ConfigError

__all__ = ["AGENTS", "Agent", "agent"]

_REGISTRY: dict[str, Agent] = {
    integration.name: integration
    for integration in (ClaudeCode(), Codex(), Gemini(), Qwen(), Cursor())
}
AGENTS = tuple(_REGISTRY)


def agent(name: str) -> Agent:
    """The integration named `name`."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown agent {name!r}: choose one of {', '.join(AGENTS)}") from None
