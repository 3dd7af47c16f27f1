"""Cursor: memsync's MCP server in `~/.cursor/mcp.json`."""

from __future__ import annotations

from sync_client.agents.base import McpJsonAgent

__all__ = ["Cursor"]


class Cursor(McpJsonAgent):
    """Cursor: the MCP server."""

    name = "cursor"
    relative_path = ".cursor/mcp.json"
