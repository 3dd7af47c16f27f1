"""`memsync setup AGENT`: register memsync in an agent's *user* settings, reversibly.

- `claude-code`: the `SessionStart` hook (startup, resume, clear, compact) that prints
  the team memory block, the `SessionEnd` hook that sends what the session wrote, and
  with `mcp=True` the MCP server `memsync` (in `.claude.json`) and its allow rule.
- `codex`, `gemini`, `cursor`: the MCP server, in `~/.codex/config.toml`,
  `~/.gemini/settings.json` and `~/.cursor/mcp.json`.

Every edit keeps each other setting, hook and key as it was, is idempotent, is written
atomically after a timestamped backup, and refuses a file it cannot parse (changing
nothing). The bytes of each file as it was before memsync first touched it are kept, so
`uninstall` gives back exactly that file when nothing else changed since; otherwise it
removes exactly what it added. A repository's own `.claude/` (or `.cursor/`...) files
are never written: anyone who can push to a repository controls them.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sync_client import claude_code
from sync_client.config import state_home, user_home
from sync_client.errors import ConfigError
from sync_client.state import atomic_write

AGENTS = ("claude-code", "codex", "gemini", "cursor")
MCP_NAME = claude_code.MCP_SERVER_NAME
ALLOW_RULE = f"mcp__{MCP_NAME}"
_CODEX_HEADER = f"[mcp_servers.{MCP_NAME}]"
_CODEX_MARK = "# added by `memsync setup codex` (`--uninstall` removes it)"


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


def _shell(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def _setup_dir(env: Mapping[str, str]) -> Path:
    return state_home(env) / "setup"


def _key(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:16]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SetupError(f"cannot read {path}: {error.strerror}; nothing changed") from error


def _json_object(path: Path, data: bytes | None) -> dict[str, Any]:
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


class _Files:
    """Reads, backs up and writes the agents' files, remembering each one's first state."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = _setup_dir(env)
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")

    def _original_path(self, path: Path) -> Path:
        return self.folder / "originals" / f"{_key(path)}.json"

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
            backup = self.folder / "backups" / f"{path.name}.{_key(path)}.{self.stamp}"
            atomic_write(backup, before)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
        atomic_write(path, after, mode=mode)
        return backup

    def remove(self, path: Path, before: bytes) -> Path:
        backup = self.folder / "backups" / f"{path.name}.{_key(path)}.{self.stamp}"
        atomic_write(backup, before)
        path.unlink()
        return backup


def _dump(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _edit_json(
    files: _Files,
    path: Path,
    edit: Callable[[dict[str, Any]], list[str]],
    *,
    uninstall: bool,
    unedit: Callable[[dict[str, Any]], list[str]],
) -> FileChange:
    """Apply `edit` (install) or `unedit` (uninstall) to one JSON file."""
    before = _read(path)
    value = _json_object(path, before)
    change = FileChange(path)
    if not uninstall:
        added = edit(value)
        if added:
            files.remember_original(path, before)
            change.added = added
            change.backup = files.write(path, before, _dump(value))
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
        if original_bytes is not None and _json_object(path, original_bytes) == value:
            change.backup = files.write(path, before, original_bytes)
            files.forget_original(path)
            return change
    change.backup = files.write(path, before, _dump(value))
    return change


# -- Claude Code ---------------------------------------------------------------------


def _is_ours(hook: object, command: str) -> bool:
    return (
        isinstance(hook, dict) and hook.get("type") == "command" and hook.get("command") == command
    )


def _add_hook(settings: dict[str, Any], event: str, matcher: str | None, command: str) -> bool:
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
    entry["hooks"] = [{"type": "command", "command": command, "timeout": 15}]
    groups.append(entry)
    return True


def _remove_hooks(settings: dict[str, Any], event: str, command: str) -> int:
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


def hook_commands() -> tuple[str, str]:
    """The (SessionStart, SessionEnd) commands memsync installs."""
    base = _shell(memsync_command())
    return f"{base} context --hook", f"{base} context --session-end"


def _claude_settings_edit(
    mcp: bool,
) -> tuple[Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], list[str]]]:
    start, end = hook_commands()

    def edit(settings: dict[str, Any]) -> list[str]:
        added = [
            f"SessionStart hook ({source})"
            for source in claude_code.SESSION_START_SOURCES
            if _add_hook(settings, "SessionStart", source, start)
        ]
        if _add_hook(settings, "SessionEnd", None, end):
            added.append("SessionEnd hook")
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
        removed = []
        if _remove_hooks(settings, "SessionStart", start):
            removed.append("SessionStart hooks")
        if _remove_hooks(settings, "SessionEnd", end):
            removed.append("SessionEnd hook")
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


def _mcp_entry(with_type: bool) -> dict[str, Any]:
    command = memsync_command()
    entry: dict[str, Any] = {"type": "stdio"} if with_type else {}
    entry.update({"command": command[0], "args": [*command[1:], "mcp"]})
    return entry


def _mcp_servers_edit(
    with_type: bool,
) -> tuple[Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], list[str]]]:
    wanted = _mcp_entry(with_type)

    def edit(config: dict[str, Any]) -> list[str]:
        servers = config.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise SetupError("`mcpServers` is not an object; nothing changed")
        if servers.get(MCP_NAME) == wanted:
            return []
        if MCP_NAME in servers:
            raise SetupError(
                f"an MCP server named {MCP_NAME!r} is registered already, not by this "
                "memsync; remove it first (nothing changed)"
            )
        servers[MCP_NAME] = wanted
        return [f"MCP server {MCP_NAME}"]

    def unedit(config: dict[str, Any]) -> list[str]:
        servers = config.get("mcpServers")
        if not isinstance(servers, dict) or servers.get(MCP_NAME) != wanted:
            return []
        del servers[MCP_NAME]
        if not servers:
            del config["mcpServers"]
        return [f"MCP server {MCP_NAME}"]

    return edit, unedit


# -- Codex (TOML) ----------------------------------------------------------------------


def _codex_block() -> str:
    command = memsync_command()
    args = ", ".join(json.dumps(part) for part in [*command[1:], "mcp"])
    return f"{_CODEX_MARK}\n{_CODEX_HEADER}\ncommand = {json.dumps(command[0])}\nargs = [{args}]\n"


def _codex(files: _Files, path: Path, *, uninstall: bool) -> FileChange:
    before = _read(path)
    text = "" if before is None else before.decode("utf-8", errors="strict")
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SetupError(f"cannot parse {path} as TOML ({error}); nothing changed") from error
    change = FileChange(path)
    block = _codex_block()
    servers = parsed.get("mcp_servers")
    present = isinstance(servers, dict) and MCP_NAME in servers
    if not uninstall:
        if present:
            if block in text:
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


# -- entry point ------------------------------------------------------------------------


def setup(
    agent: str, env: Mapping[str, str], *, mcp: bool = False, uninstall: bool = False
) -> dict[str, Any]:
    """Install (or uninstall) memsync for `agent`; `{agent, changed, files, notes}`."""
    if agent not in AGENTS:
        raise ConfigError(f"unknown agent {agent!r}: choose one of {', '.join(AGENTS)}")
    home = user_home(env)
    files = _Files(env)
    changes: list[FileChange] = []
    if agent == "claude-code":
        settings = claude_code.settings_path(home, env)
        user_config = claude_code.user_config_path(home, env)
        # Parse both before writing either: a bad file changes nothing at all.
        _json_object(settings, _read(settings))
        if mcp or uninstall:
            _json_object(user_config, _read(user_config))
        edit, unedit = _claude_settings_edit(mcp or uninstall)
        changes.append(_edit_json(files, settings, edit, uninstall=uninstall, unedit=unedit))
        if mcp or uninstall:
            edit, unedit = _mcp_servers_edit(with_type=True)
            changes.append(_edit_json(files, user_config, edit, uninstall=uninstall, unedit=unedit))
    elif agent == "codex":
        codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
        changes.append(_codex(files, codex_home / "config.toml", uninstall=uninstall))
    else:
        path = home / (".gemini/settings.json" if agent == "gemini" else ".cursor/mcp.json")
        edit, unedit = _mcp_servers_edit(with_type=False)
        changes.append(_edit_json(files, path, edit, uninstall=uninstall, unedit=unedit))
    notes = []
    import importlib.util

    if (
        not uninstall
        and (mcp or agent != "claude-code")
        and importlib.util.find_spec("mcp") is None
    ):
        notes.append(
            "the MCP server needs the MCP SDK, which is not installed: pip install 'memsync[mcp]'"
        )
    warning = None if uninstall else environment_token_warning(agent, env)
    if (
        warning is None
        and not uninstall
        and (mcp or agent != "claude-code")
        and not _token_saved(env)
    ):
        notes.append(
            "the MCP server reads the token saved by `memsync login`; one only in this "
            "shell's environment may not reach it"
        )
    return {
        "agent": agent,
        "changed": any(change.added or change.removed for change in changes),
        "files": [change.as_json() for change in changes],
        "notes": notes,
        "warning": warning,
    }


def environment_token_warning(agent: str, env: Mapping[str, str]) -> str | None:
    """One line when the only token is this shell's `MEMSYNC_TOKEN`, else None.

    An agent started from another terminal (or by a desktop launcher) does not inherit
    this shell's environment: its hooks and MCP server find no token, so syncing is off
    there. `memsync setup` still finishes (the hooks are right, and the block says
    syncing is off), but never silently. Names the variable, never the token.
    """
    if not env.get("MEMSYNC_TOKEN") or _token_saved(env):
        return None
    who = "a Claude Code" if agent == "claude-code" else f"{agent}"
    return (
        f"the token comes only from MEMSYNC_TOKEN, which {who} started from another "
        "terminal does not see: there, syncing is off (the session still gets the team's "
        "index as last synced, and says so); run `memsync login` to save it in "
        "credentials.toml"
    )


def _token_saved(env: Mapping[str, str]) -> bool:
    from sync_client.config import config_home, read_credentials

    return bool(read_credentials(config_home(env)).get("token"))


def hook_installed(env: Mapping[str, str]) -> bool:
    """Whether a memsync SessionStart hook is in the user's Claude Code settings (any
    install of memsync: its command runs `memsync context --hook`)."""
    path = claude_code.settings_path(user_home(env), env)
    try:
        settings = _json_object(path, _read(path))
    except SetupError:
        return False
    hooks = settings.get("hooks")
    groups = hooks.get("SessionStart") if isinstance(hooks, dict) else None
    for group in groups if isinstance(groups, list) else []:
        for hook in group.get("hooks") or [] if isinstance(group, dict) else []:
            command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
            if command.endswith(" context --hook") and (
                "memsync" in command or "sync_client" in command
            ):
                return True
    return False
