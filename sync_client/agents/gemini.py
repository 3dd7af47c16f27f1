"""Gemini CLI: memsync's session hooks and MCP server in `~/.gemini/settings.json`.

What `memsync setup gemini` adds (the user's settings only, never a project's
`.gemini/settings.json`):

- `hooks.SessionStart`, one group per source (`startup`, `resume`, `clear`: Gemini CLI
  compares a SessionStart matcher to the source as a plain string, not a pattern):
  `memsync context --hook --agent gemini`, which prints the team memory block as
  `hookSpecificOutput.additionalContext` (Gemini CLI takes plain stdout as a message
  for the user, not as context for the model; `agent_hooks.SHAPES["gemini"]`).
  Headless, the block is prepended to the prompt; interactive, it is the first turn.
- `hooks.SessionEnd`: `memsync context --session-end`, which sends what the session
  left unsent in the background when no watcher runs. No `AfterTool` hook: the MCP
  `write_note` already pushes at once (or hands the note to the watcher), so a hook
  after every tool call would only start memsync again and again for nothing.
- `mcpServers.memsync` with `"trust": true`: the MCP server, its tools allowed without a
  confirmation prompt (as Claude Code's allow rule `mcp__memsync` does; headless, an
  unconfirmed tool call is refused).

Gemini CLI runs hooks and stdio MCP servers only in a trusted folder
(`~/.gemini/trustedFolders.json`: its trust prompt, `/permissions trust`); setup never
trusts a folder for the user, and says so. It hides every variable named like a token
from MCP servers, so memsync's there needs the token `memsync login` saved. Its file
tools stay inside the workspace, and the team dir is not in it: the block tells the
agent to write with memsync's MCP tools (`agent_hooks`).

The editing helpers fit any settings file in Gemini CLI's shape (its forks', Qwen
Code's): `edit_settings(files, path, start, end)`, over `settings_edit`
and `files.mcp_servers_edit` with `trust` (the hooks themselves: `files.add_hook`, `remove_hooks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sync_client.agents.base import Agent
from sync_client.agents.files import (
    Edit,
    FileChange,
    Files,
    edit_json,
    mcp_servers_edit,
    memsync_command,
    session_hooks_edit,
    shell,
)
from sync_client.hook_settings import file_has_hook

__all__ = [
    "SESSION_START_SOURCES",
    "Gemini",
    "edit_settings",
    "hook_commands",
    "settings_edit",
]

# The SessionStart sources Gemini CLI 0.61 fires (`SessionStartSource`).
SESSION_START_SOURCES = ("startup", "resume", "clear")
# Gemini CLI counts a hook's timeout in milliseconds (its default is 60,000).
HOOK_TIMEOUT_MS = 15_000
# What `memsync context` takes to print the block in Gemini CLI's shape (`agent_hooks`).
AGENT_OPTION = ("--agent", "gemini")

# What setup tells the person: the steps memsync leaves to them.
TRUST_NOTE = (
    "Gemini CLI runs these hooks and the MCP server only in a folder you trust: answer "
    "its trust prompt in your checkout, or run `/permissions trust` there (memsync never "
    "trusts a folder for you); and it hides every variable named like a token from MCP "
    "servers, so memsync's there needs the token `memsync login` saves"
)


def hook_commands() -> tuple[str, str]:
    """The (SessionStart, SessionEnd) commands memsync installs in Gemini CLI."""
    base = shell(memsync_command())
    return f"{base} context --hook {' '.join(AGENT_OPTION)}", f"{base} context --session-end"


def settings_edit(start: str, end: str) -> tuple[Edit, Edit]:
    """(install, uninstall) of everything memsync puts in a Gemini CLI settings file."""
    hooks_on, hooks_off = session_hooks_edit(
        start, end, SESSION_START_SOURCES, timeout=HOOK_TIMEOUT_MS
    )
    mcp_on, mcp_off = mcp_servers_edit(with_type=False, extra={"trust": True})

    def edit(settings: dict[str, Any]) -> list[str]:
        return hooks_on(settings) + mcp_on(settings)

    def unedit(settings: dict[str, Any]) -> list[str]:
        return hooks_off(settings) + mcp_off(settings)

    return edit, unedit


def edit_settings(files: Files, path: Path, start: str, end: str, *, uninstall: bool) -> FileChange:
    """Install (or uninstall) memsync's hooks (`start`, `end`) and trusted MCP server in
    the settings file at `path`, Gemini CLI's shape (its forks' too)."""
    edit, unedit = settings_edit(start, end)
    return edit_json(files, path, edit, uninstall=uninstall, unedit=unedit)


class Gemini(Agent):
    """Gemini CLI: the session hooks and the MCP server, in `~/.gemini/settings.json`."""

    name = "gemini"
    relative_path = ".gemini/settings.json"

    @property
    def who(self) -> str:
        return "a Gemini CLI"

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [home / self.relative_path]

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        path = self.settings_files(home, env)[0]
        return [edit_settings(files, path, *hook_commands(), uninstall=uninstall)]

    def trust_note(self) -> str | None:
        return TRUST_NOTE

    def session_words(self) -> str | None:
        return (
            "the next Gemini CLI session in a trusted checkout of a repo memsync syncs "
            "starts with the team's index (`memsync context` shows it)"
        )

    def hook_installed(self, env: Mapping[str, str], home: Path) -> bool | None:
        """Whether a memsync SessionStart hook is in the user's Gemini CLI settings."""
        path = self.settings_files(home, env)[0]
        return file_has_hook(path, "SessionStart", f" context --hook {' '.join(AGENT_OPTION)}")
