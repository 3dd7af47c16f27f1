"""Gemini CLI: memsync's MCP server in `~/.gemini/settings.json`."""

from __future__ import annotations

from sync_client.agents.base import McpJsonAgent

__all__ = ["Gemini"]


class Gemini(McpJsonAgent):
    """Gemini CLI: the MCP server."""

    name = "gemini"
    relative_path = ".gemini/settings.json"
