"""Codex: memsync's MCP server in `$CODEX_HOME/config.toml` (`~/.codex/config.toml`).

The block is appended with a comment that names it, and `--uninstall` removes exactly
that block; a server named `memsync` that memsync did not add is refused.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path

from sync_client.agents.base import Agent
from sync_client.agents.files import (
    MCP_NAME,
    FileChange,
    Files,
    SetupError,
    memsync_command,
    read,
)

__all__ = ["Codex"]

_CODEX_HEADER = f"[mcp_servers.{MCP_NAME}]"
_CODEX_MARK = "# added by `memsync setup codex` (`--uninstall` removes it)"


def _codex_block() -> str:
    command = memsync_command()
    args = ", ".join(json.dumps(part) for part in [*command[1:], "mcp"])
    return f"{_CODEX_MARK}\n{_CODEX_HEADER}\ncommand = {json.dumps(command[0])}\nargs = [{args}]\n"


def _codex(files: Files, path: Path, *, uninstall: bool) -> FileChange:
    before = read(path)
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


class Codex(Agent):
    """Codex: the MCP server, in TOML."""

    name = "codex"

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
        return [codex_home / "config.toml"]

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        return [_codex(files, self.settings_files(home, env)[0], uninstall=uninstall)]
