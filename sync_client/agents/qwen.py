"""Qwen Code: memsync's session hooks and MCP server in `$QWEN_HOME/settings.json`
(`~/.qwen/settings.json`).

- `hooks.SessionStart` (startup, resume, clear, compact): `memsync context --hook`, the
  team memory block Claude Code gets (Qwen Code adds a hook's plain stdout to the
  session's context).
- `hooks.SessionEnd`: `memsync context --session-end`, which sends what the session wrote.
- `mcpServers.memsync`: the MCP server.

Its team dir is `memory/team/` in Qwen Code's project folder (`sync_client.qwen_code`),
which its tools read and write without asking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sync_client import qwen_code
from sync_client.agents.base import Agent
from sync_client.agents.claude_code import hook_commands
from sync_client.agents.files import (
    FileChange,
    Files,
    edit_json,
    mcp_servers_edit,
    session_hooks_edit,
)
from sync_client.config.team_dir import session_hook_in

__all__ = ["Qwen"]


def _settings_edit() -> tuple[
    Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], list[str]]
]:
    sources = qwen_code.SESSION_START_SOURCES
    session_on, session_off = session_hooks_edit(*hook_commands(), sources)
    add_mcp, remove_mcp = mcp_servers_edit(with_type=False)

    def edit(settings: dict[str, Any]) -> list[str]:
        return session_on(settings) + add_mcp(settings)

    def unedit(settings: dict[str, Any]) -> list[str]:
        return session_off(settings) + remove_mcp(settings)

    return edit, unedit


class Qwen(Agent):
    """Qwen Code: the session hooks and the MCP server."""

    name = "qwen"

    @property
    def who(self) -> str:
        return "a Qwen Code"

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [qwen_code.settings_path(home, env)]

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        edit, unedit = _settings_edit()
        path = qwen_code.settings_path(home, env)
        return [edit_json(files, path, edit, uninstall=uninstall, unedit=unedit)]

    def session_words(self) -> str | None:
        return (
            "the next Qwen Code session in a repo memsync syncs starts with the team's "
            "index (`memsync context` shows it)"
        )

    def hook_installed(self, env: Mapping[str, str], home: Path) -> bool | None:
        """Whether a memsync SessionStart hook (`memsync context --hook`) is in the
        user's Qwen Code settings."""
        return session_hook_in(qwen_code.settings_path(home, env))

    def team_dir(self, root: Path, home: Path, env: Mapping[str, str]) -> Path | None:
        """The team dir in Qwen Code's project folder for `root` (`qwen_code.team_dir`)."""
        return qwen_code.team_dir(root, home, env)
