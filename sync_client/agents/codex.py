"""Codex: memsync's session hooks and MCP server in the user's `$CODEX_HOME` (`~/.codex`).

- `hooks.json`: the `SessionStart` hook (startup, resume, clear, compact) that puts the
  team memory block into the session (`memsync context --hook --agent codex`: Codex's
  JSON, fitted to the 10,000 bytes Codex 0.171 shows its model, `agent_hooks`), and
  the `SessionEnd` hook that sends what the session wrote when no watcher runs. A JSON
  file of its own: memsync's entries are added and removed exactly, every other hook
  kept. Codex runs a hook that is not managed by an administrator only once the person
  trusted it in Codex (`/hooks`); memsync never does that for them (`trust_note`).
- `config.toml`: the MCP server `memsync`, which is how a Codex session writes a note
  (its sandbox cannot write the team folder). The block is appended with a comment that
  names it, and `--uninstall` removes exactly that block; a server named `memsync` that
  memsync did not add is refused.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sync_client.agents.base import Agent
from sync_client.agents.files import (
    MCP_NAME,
    FileChange,
    Files,
    SetupError,
    add_hook,
    edit_json,
    json_object,
    memsync_command,
    read,
    remove_hooks,
    shell,
)
from sync_client.hook_settings import file_has_hook

__all__ = ["Codex", "codex_home", "hook_commands"]

_CODEX_HEADER = f"[mcp_servers.{MCP_NAME}]"
_CODEX_MARK = "# added by `memsync setup codex` (`--uninstall` removes it)"


# memsync's own tools run without a question, as Claude Code's allow rule and Gemini
# CLI's `trust` let them (a write passes every rule a push applies); and the MCP SDK
# takes seconds to load on a busy machine, more than Codex's default 10 s start.
_CODEX_SETTINGS = 'default_tools_approval_mode = "approve"\nstartup_timeout_sec = 30\n'


def _codex_block(*, settings: bool = True) -> str:
    """memsync's block in `config.toml`; `settings=False`: as setup wrote it before it
    approved the tools (recognised, so such an install is updated and removed)."""
    command = memsync_command()
    args = ", ".join(json.dumps(part) for part in [*command[1:], "mcp"])
    block = f"{_CODEX_MARK}\n{_CODEX_HEADER}\ncommand = {json.dumps(command[0])}\nargs = [{args}]\n"
    return block + (_CODEX_SETTINGS if settings else "")


# The sources Codex names a session start by (its hook input's `source`), one matcher.
SESSION_START_MATCHER = "startup|resume|clear|compact"
HOOKS_FILE = "hooks.json"
CONFIG_FILE = "config.toml"


def hook_commands() -> tuple[str, str]:
    """The (SessionStart, SessionEnd) commands memsync installs for Codex."""
    base = shell(memsync_command())
    return f"{base} context --hook --agent codex", f"{base} context --session-end"


def _hooks_edit() -> tuple[
    Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], list[str]]
]:
    start, end = hook_commands()

    def edit(settings: dict[str, Any]) -> list[str]:
        added = []
        if add_hook(settings, "SessionStart", SESSION_START_MATCHER, start):
            added.append(f"SessionStart hook ({SESSION_START_MATCHER})")
        if add_hook(settings, "SessionEnd", None, end):
            added.append("SessionEnd hook")
        return added

    def unedit(settings: dict[str, Any]) -> list[str]:
        removed = []
        if remove_hooks(settings, "SessionStart", start):
            removed.append("SessionStart hook")
        if remove_hooks(settings, "SessionEnd", end):
            removed.append("SessionEnd hook")
        return removed

    return edit, unedit


def _toml(path: Path, before: bytes | None) -> tuple[str, dict[str, Any]]:
    try:
        text = "" if before is None else before.decode("utf-8", errors="strict")
        return text, tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise SetupError(f"cannot parse {path} as TOML ({error}); nothing changed") from error


def _codex(files: Files, path: Path, *, uninstall: bool) -> FileChange:
    before = read(path)
    text, parsed = _toml(path, before)
    change = FileChange(path)
    block = _codex_block()
    servers = parsed.get("mcp_servers")
    present = isinstance(servers, dict) and MCP_NAME in servers
    if not uninstall:
        if present:
            if block in text:
                return change
            earlier = _codex_block(settings=False)
            if earlier in text:  # an earlier setup's block: its tools approved now
                change.added = [f"MCP server {MCP_NAME}: its tools approved"]
                after = text.replace(earlier, block, 1)
                change.backup = files.write(path, before, after.encode())
                return change
            raise SetupError(
                f"{path} has an MCP server named {MCP_NAME!r} already, not by this memsync; "
                "nothing changed"
            )
        files.remember_original(path, before)
        separator = (
            "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        )
        change.added = [f"MCP server {MCP_NAME}"]
        change.backup = files.write(path, before, (text + separator + block).encode())
        return change
    if block not in text:
        block = _codex_block(settings=False)
        if block not in text:
            return change
    change.removed = [f"MCP server {MCP_NAME}"]
    after = text.replace(block, "", 1)
    original = files.original(path)
    if original is not None:
        existed, original_bytes = original
        if not existed and not after.strip():
            assert before is not None
            change.backup = files.remove(path, before)
            files.forget_original(path)
            return change
        if original_bytes is not None and original_bytes.decode().strip() == after.strip():
            change.backup = files.write(path, before, original_bytes)
            files.forget_original(path)
            return change
    change.backup = files.write(path, before, after.encode())
    return change


def codex_home(home: Path, env: Mapping[str, str]) -> Path:
    """`$CODEX_HOME`, else `~/.codex`."""
    return Path(env.get("CODEX_HOME") or home / ".codex")


class Codex(Agent):
    """Codex: the session hooks in `hooks.json`, the MCP server in `config.toml`."""

    name = "codex"

    @property
    def who(self) -> str:
        return "a Codex"

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        folder = codex_home(home, env)
        return [folder / HOOKS_FILE, folder / CONFIG_FILE]

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        hooks, config = self.settings_files(home, env)
        # Parse both before writing either: a bad file changes nothing at all.
        json_object(hooks, read(hooks))
        _toml(config, read(config))
        edit, unedit = _hooks_edit()
        return [
            edit_json(files, hooks, edit, uninstall=uninstall, unedit=unedit),
            _codex(files, config, uninstall=uninstall),
        ]

    def session_words(self) -> str | None:
        return (
            "the next Codex session in a repo memsync syncs starts with the team's index, "
            "once you trust the hooks (`memsync context` shows it)"
        )

    def hook_installed(self, env: Mapping[str, str], home: Path) -> bool | None:
        """Whether memsync's SessionStart hook is in Codex's `hooks.json`."""
        path = codex_home(home, env) / HOOKS_FILE
        return file_has_hook(path, "SessionStart", " context --hook --agent codex")

    def trust_note(self) -> str | None:
        return (
            "Codex runs these hooks only once you trust them: start Codex, type /hooks, "
            "review memsync's SessionStart and SessionEnd hooks and trust them (until then "
            "Codex skips them without a word; after `memsync setup codex` changes them, "
            "trust them again)"
        )
