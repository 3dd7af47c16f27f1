"""The settings files of agents, edited reversibly: what every agent integration shares.

    Files(env)            reads, backs up and writes a settings file, keeping its bytes
                          as they were before memsync first touched it
    edit_json(...)        one install or uninstall edit of a JSON settings file
    mcp_servers_edit(...) adding and removing memsync's entry under `mcpServers`
    add_hook, remove_hooks, has_hook
                          memsync's command hooks in the `hooks` layout Claude Code,
                          Codex (`hooks.json`) and Gemini CLI share
    FileChange            what an edit did to one file (a row of `memsync setup --json`)
    SetupError            a settings file memsync will not edit (exit 2, nothing changed)

Every edit keeps each other setting as it was, is idempotent, is written atomically
after a timestamped backup, and refuses a file it cannot parse (changing nothing).
`uninstall` gives back the file as it was when nothing else changed since; otherwise it
removes exactly what was added.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sync_client.claude_code import MCP_SERVER_NAME
from sync_client.config import state_home
from sync_client.errors import ConfigError
from sync_client.hook_settings import has_hook
from sync_client.state import atomic_write

__all__ = [
    "MCP_NAME",
    "FileChange",
    "Files",
    "SetupError",
    "add_hook",
    "dump",
    "edit_json",
    "has_hook",
    "json_object",
    "mcp_entry",
    "mcp_servers_edit",
    "memsync_command",
    "read",
    "remove_hooks",
    "session_hooks_edit",
    "shell",
]

# One edit of a settings object (and its undoing): what it added or removed, in words.
Edit = Callable[[dict[str, Any]], list[str]]

# The name memsync's MCP server is registered under, in every agent's settings.
MCP_NAME = MCP_SERVER_NAME


class SetupError(ConfigError):
    """A settings file memsync will not edit (it cannot be parsed, or is not an object)."""


@dataclass
class FileChange:
    """What setup did to one file."""

    path: Path
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None

    def as_json(self) -> dict[str, Any]:
        """The row of `memsync setup --json`."""
        return {
            "path": str(self.path),
            "added": self.added,
            "removed": self.removed,
            "backup": None if self.backup is None else str(self.backup),
        }


def memsync_command() -> list[str]:
    """How another program starts this memsync: the console script's absolute path,
    or this interpreter with `-m sync_client`."""
    script = Path(sys.argv[0])
    if script.name.startswith("memsync") and script.is_file():
        return [str(script.resolve())]
    return [sys.executable, "-m", "sync_client"]


def shell(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def setup_dir(env: Mapping[str, str]) -> Path:
    return state_home(env) / "setup"


def file_key(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:16]


def read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SetupError(f"cannot read {path}: {error.strerror}; nothing changed") from error


def json_object(path: Path, data: bytes | None) -> dict[str, Any]:
    if data is None or not data.strip():
        return {}
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise SetupError(
            f"cannot parse {path} as JSON ({error}); fix it or move it away, nothing changed"
        ) from error
    if not isinstance(value, dict):
        raise SetupError(f"{path} is not a JSON object; nothing changed")
    return value


class Files:
    """Reads, backs up and writes the agents' files, remembering each one's first state."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = setup_dir(env)
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")

    def _original_path(self, path: Path) -> Path:
        return self.folder / "originals" / f"{file_key(path)}.json"

    def remember_original(self, path: Path, data: bytes | None) -> None:
        """Keep the file's bytes as they were before memsync first edited it."""
        record = self._original_path(path)
        if record.exists():
            return
        payload = {
            "path": str(path),
            "existed": data is not None,
            "bytes": None if data is None else data.decode("latin-1"),
        }
        atomic_write(record, json.dumps(payload).encode())

    def original(self, path: Path) -> tuple[bool, bytes | None] | None:
        """(existed, bytes) of the file before memsync's first edit, if known."""
        try:
            payload = json.loads(self._original_path(path).read_bytes())
        except (OSError, ValueError):
            return None
        raw = payload.get("bytes")
        return bool(payload.get("existed")), None if raw is None else str(raw).encode("latin-1")

    def forget_original(self, path: Path) -> None:
        self._original_path(path).unlink(missing_ok=True)

    def write(self, path: Path, before: bytes | None, after: bytes) -> Path | None:
        """Write `after` atomically (same mode as before), after a backup of `before`."""
        backup = None
        if before is not None:
            backup = self.folder / "backups" / f"{path.name}.{file_key(path)}.{self.stamp}"
            atomic_write(backup, before)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
        atomic_write(path, after, mode=mode)
        return backup

    def remove(self, path: Path, before: bytes) -> Path:
        backup = self.folder / "backups" / f"{path.name}.{file_key(path)}.{self.stamp}"
        atomic_write(backup, before)
        path.unlink()
        return backup


def dump(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def edit_json(
    files: Files,
    path: Path,
    edit: Callable[[dict[str, Any]], list[str]],
    *,
    uninstall: bool,
    unedit: Callable[[dict[str, Any]], list[str]],
) -> FileChange:
    """Apply `edit` (install) or `unedit` (uninstall) to one JSON file."""
    before = read(path)
    value = json_object(path, before)
    change = FileChange(path)
    if not uninstall:
        added = edit(value)
        if added:
            files.remember_original(path, before)
            change.added = added
            change.backup = files.write(path, before, dump(value))
        return change
    removed = unedit(value)
    if not removed:
        return change
    change.removed = removed
    original = files.original(path)
    if original is not None:
        existed, original_bytes = original
        if not existed and not value:
            assert before is not None
            change.backup = files.remove(path, before)
            files.forget_original(path)
            return change
        if original_bytes is not None and json_object(path, original_bytes) == value:
            change.backup = files.write(path, before, original_bytes)
            files.forget_original(path)
            return change
    change.backup = files.write(path, before, dump(value))
    return change


def mcp_entry(with_type: bool) -> dict[str, Any]:
    command = memsync_command()
    entry: dict[str, Any] = {"type": "stdio"} if with_type else {}
    entry.update({"command": command[0], "args": [*command[1:], "mcp"]})
    return entry


def mcp_servers_edit(
    with_type: bool, *, extra: Mapping[str, Any] | None = None
) -> tuple[Edit, Edit]:
    """(install, uninstall) of memsync's entry under `mcpServers`, with `extra` fields
    (Gemini CLI's `"trust": true`). An entry this memsync registered without them is
    taken over and removed too; any other entry of that name is not memsync's, and is
    refused."""
    plain = mcp_entry(with_type)
    wanted = {**plain, **(extra or {})}
    ours = (wanted, plain)
    words = f"MCP server {MCP_NAME}" + (" (trusted)" if (extra or {}).get("trust") else "")

    def edit(config: dict[str, Any]) -> list[str]:
        servers = config.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise SetupError("`mcpServers` is not an object; nothing changed")
        if servers.get(MCP_NAME) == wanted:
            return []
        if MCP_NAME in servers and servers[MCP_NAME] not in ours:
            raise SetupError(
                f"an MCP server named {MCP_NAME!r} is registered already, not by this "
                "memsync; remove it first (nothing changed)"
            )
        servers[MCP_NAME] = wanted
        return [words]

    def unedit(config: dict[str, Any]) -> list[str]:
        servers = config.get("mcpServers")
        if not isinstance(servers, dict) or servers.get(MCP_NAME) not in ours:
            return []
        del servers[MCP_NAME]
        if not servers:
            del config["mcpServers"]
        return [f"MCP server {MCP_NAME}"]

    return edit, unedit


def _is_ours(hook: object, command: str) -> bool:
    return (
        isinstance(hook, dict) and hook.get("type") == "command" and hook.get("command") == command
    )


def add_hook(
    settings: dict[str, Any], event: str, matcher: str | None, command: str, timeout: int = 15
) -> bool:
    """Add one command hook under `settings["hooks"][event]` in the layout Claude Code,
    Codex and Gemini CLI share (`{matcher?, hooks: [{type, command, timeout}]}`); False
    when it is there already."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SetupError("the settings' `hooks` is not an object; nothing changed")
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise SetupError(f"the settings' `hooks.{event}` is not a list; nothing changed")
    for group in groups:
        ours = isinstance(group, dict) and group.get("matcher") == matcher
        if ours and any(_is_ours(hook, command) for hook in group.get("hooks") or []):
            return False
    entry: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
    entry["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
    groups.append(entry)
    return True


def remove_hooks(settings: dict[str, Any], event: str, command: str) -> int:
    """Remove every hook of `event` that runs `command` (and a group left empty, and
    `hooks` left empty); how many were removed."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict) or not isinstance(hooks.get(event), list):
        return 0
    removed = 0
    kept_groups = []
    for group in hooks[event]:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            kept = [hook for hook in group["hooks"] if not _is_ours(hook, command)]
            removed += len(group["hooks"]) - len(kept)
            if not kept and len(group["hooks"]) > 0:
                continue  # a group of ours alone
            group["hooks"] = kept
        kept_groups.append(group)
    if not removed:
        return 0
    hooks[event] = kept_groups
    if not kept_groups:
        del hooks[event]
    if not hooks:
        del settings["hooks"]
    return removed


def session_hooks_edit(
    start: str, end: str, sources: tuple[str, ...], *, timeout: int = 15
) -> tuple[Edit, Edit]:
    """(install, uninstall) of the session hooks every agent with hooks gets: one
    SessionStart group running `start` per source (Gemini CLI compares a matcher with
    the source as a plain string, so none is an alternation) and a SessionEnd hook
    running `end`; `timeout` in the agent's unit."""

    def edit(settings: dict[str, Any]) -> list[str]:
        added = [
            f"SessionStart hook ({source})"
            for source in sources
            if add_hook(settings, "SessionStart", source, start, timeout)
        ]
        if add_hook(settings, "SessionEnd", None, end, timeout):
            added.append("SessionEnd hook")
        return added

    def unedit(settings: dict[str, Any]) -> list[str]:
        removed = []
        if remove_hooks(settings, "SessionStart", start):
            removed.append("SessionStart hooks")
        if remove_hooks(settings, "SessionEnd", end):
            removed.append("SessionEnd hook")
        return removed

    return edit, unedit
