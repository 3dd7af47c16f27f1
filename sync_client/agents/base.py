"""The interface every agent integration implements (`memsync setup AGENT`, `doctor`).

An agent integration says where the agent keeps its user settings, how memsync's hook
and MCP entry are added to them and removed again, and what `memsync doctor` can check
there. Adding an agent is one module with one `Agent` subclass, named in `AGENTS`
(`sync_client/agents/__init__.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from sync_client.agents.files import FileChange, Files, edit_json, mcp_servers_edit

__all__ = ["Agent", "McpJsonAgent"]


class Agent(ABC):
    """One agent memsync can set itself up in (user settings only, never a repository's)."""

    # The name `memsync setup` takes.
    name: ClassVar[str]

    @property
    def who(self) -> str:
        """How a warning names one of its sessions ("... which {who} started from
        another terminal does not see")."""
        return self.name

    @abstractmethod
    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        """Where the agent's user settings that memsync edits live."""

    @abstractmethod
    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        """Add memsync's entries (or, with `uninstall`, remove exactly them); one
        `FileChange` per settings file looked at. A file that cannot be parsed raises
        `SetupError` before any file is written."""

    def uses_mcp(self, mcp: bool) -> bool:
        """Whether setup registers the MCP server (`--mcp` asked for it, or the agent
        has no other way in)."""
        del mcp
        return True

    def hook_installed(self, env: Mapping[str, str], home: Path) -> bool | None:
        """What `memsync doctor` checks: whether memsync's session hook is in the
        agent's settings; None for an agent memsync installs no hook in."""
        del env, home
        return None

    def trust_note(self) -> str | None:
        """What the person must do in the agent before it runs the hooks memsync added
        (`memsync setup` says it after installing; memsync never does it for them), or
        None when nothing."""
        return None

    def session_words(self) -> str | None:
        """What the agent's next session gets once set up (`memsync setup` says it last),
        or None for an agent memsync installs no session hook in."""
        return None

    def team_dir(self, root: Path, home: Path, env: Mapping[str, str]) -> Path | None:
        """What `memsync doctor` checks too: the folder the agent reads the team's memory
        from for the git checkout at `root`; None for an agent with no such folder."""
        del root, home, env
        return None


class McpJsonAgent(Agent):
    """An agent whose only entry is memsync's MCP server under a JSON `mcpServers`."""

    # The settings file, below the home folder.
    relative_path: ClassVar[str]

    def settings_files(self, home: Path, env: Mapping[str, str]) -> list[Path]:
        return [home / self.relative_path]

    def apply(
        self, files: Files, home: Path, env: Mapping[str, str], *, mcp: bool, uninstall: bool
    ) -> list[FileChange]:
        path = self.settings_files(home, env)[0]
        edit, unedit = mcp_servers_edit(with_type=False)
        return [edit_json(files, path, edit, uninstall=uninstall, unedit=unedit)]
