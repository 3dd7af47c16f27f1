"""Claude Code: memsync's hooks, allow rule and MCP server in the user's settings.

- `settings.json` (under the config root, `claude_code.settings_path`): the
  `SessionStart` hook (startup, resume, clear, compact) that prints the team memory
  block, the `SessionEnd` hook that sends what the session wrote, the `PostToolUse` hook
  on Write|Edit|MultiEdit that records which session wrote a note (its provenance), and
  with `--mcp` the allow rule `mcp__memsync`.
- `.claude.json` (`claude_code.user_config_path`), with `--mcp`: the MCP server.

Claude Code's own facts (paths, sanitizing, the project folder) are `sync_client.claude_code`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sync_client import claude_code
from sync_client.agents.base import Agent
from sync_client.agents.files import (
    MCP_NAME,
    FileChange,
    Files,
    SetupError,
    add_hook,
    edit_json,
    json_object,
    mcp_servers_edit,
    memsync_command,
    read,
    remove_hooks,
    session_hooks_edit,
    shell,
)
from sync_client.hook_settings import file_has_hook

__all__ = ["ALLOW_RULE", "ClaudeCode", "hook_commands"]

ALLOW_RULE = f"mcp__{MCP_NAME}"


def hook_commands() -> tuple[str, str]:
    """The (SessionStart, SessionEnd) commands memsync installs."""
    base = shell(memsync_command())
    return f"{base} context --hook", f"{base} context --session-end"


# The tools whose writes the PostToolUse hook records (sync_client.provenance).
TOOL_USE_MATCHER = "Write|Edit|MultiEdit"


def tool_use_command() -> str:
    """The PostToolUse command memsync installs: it records which session wrote a note."""
    return f"{shell(memsync_command())} context --tool-use"


def _claude_settings_edit(
    mcp: bool,
) -> tuple[Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], list[str]]]:
    session_on, session_off = session_hooks_edit(
        *hook_commands(), claude_code.SESSION_START_SOURCES
    )
    tool_use = tool_use_command()

    def edit(settings: dict[str, Any]) -> list[str]:
        added = session_on(settings)
        if add_hook(settings, "PostToolUse", TOOL_USE_MATCHER, tool_use):
            added.append(f"PostToolUse hook ({TOOL_USE_MATCHER})")
        if mcp:
            permissions = settings.setdefault("permissions", {})
            if not isinstance(permissions, dict):
                raise SetupError("the settings' `permissions` is not an object; nothing changed")
            allow = permissions.setdefault("allow", [])
            if not isinstance(allow, list):
                raise SetupError("the settings' `permissions.allow` is not a list; nothing changed")
            if ALLOW_RULE not in allow:
                allow.append(ALLOW_RULE)
                added.append(f"permission {ALLOW_RULE}")
        return added

    def unedit(settings: dict[str, Any]) -> list[str]:
        removed = session_off(settings)
        if remove_hooks(settings, "PostToolUse", tool_use):
            removed.append("PostToolUse hook")
        permissions = settings.get("permissions")
        allowed = permissions.get("allow") if isinstance(permissions, dict) else None
        if isinstance(permissions, dict) and isinstance(allowed, list) and ALLOW_RULE in allowed:
            permissions["allow"] = [rule for rule in allowed if rule != ALLOW_RULE]
            removed.append(f"permission {ALLOW_RULE}")
            if not permissions["allow"]:
                del permissions["allow"]
            if not permissions:
                del settings["permissions"]
        return removed

    return edit, unedit


class ClaudeCode(Agent):
    """Claude Code: the session hooks always, the MCP server and its allow rule with `--mcp`."""

    name = "claude-code"

    @property
    def who(self) -> str:
        return "a Claude Code"

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [claude_code.settings_path(home, env), claude_code.user_config_path(home, env)]

    def uses_mcp(self, mcp: bool) -> bool:
        return mcp

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        changes: list[FileChange] = []
        settings = claude_code.settings_path(home, env)
        user_config = claude_code.user_config_path(home, env)
        # Parse both before writing either: a bad file changes nothing at all.
        json_object(settings, read(settings))
        if mcp or uninstall:
            json_object(user_config, read(user_config))
        edit, unedit = _claude_settings_edit(mcp or uninstall)
        changes.append(edit_json(files, settings, edit, uninstall=uninstall, unedit=unedit))
        if mcp or uninstall:
            edit, unedit = mcp_servers_edit(with_type=True)
            changes.append(edit_json(files, user_config, edit, uninstall=uninstall, unedit=unedit))
        return changes

    def session_words(self) -> str | None:
        return (
            "the next Claude Code session in a repo memsync syncs starts with the team's "
            "index (`memsync context` shows it)"
        )

    def hook_installed(self, env: Mapping[str, str], home: Path) -> bool | None:
        """Whether a memsync SessionStart hook is in the user's Claude Code settings (any
        install of memsync: its command runs `memsync context --hook`)."""
        return self._has_hook(env, home, "SessionStart", " context --hook")

    def tool_use_hook_installed(self, env: Mapping[str, str], home: Path) -> bool:
        """Whether memsync's PostToolUse hook (`memsync context --tool-use`) is there."""
        return self._has_hook(env, home, "PostToolUse", " context --tool-use")

    @staticmethod
    def _has_hook(env: Mapping[str, str], home: Path, event: str, suffix: str) -> bool:
        return file_has_hook(claude_code.settings_path(home, env), event, suffix)

    def team_dir(self, root: Path, home: Path, env: Mapping[str, str]) -> Path | None:
        """The team dir in Claude Code's project folder for `root` (`claude_code.team_dir`)."""
        return claude_code.team_dir(root, home, env)
