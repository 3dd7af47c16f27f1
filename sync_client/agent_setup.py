"""`memsync setup AGENT`: register memsync in an agent's *user* settings, reversibly.

- `claude-code`: the `SessionStart` hook (startup, resume, clear, compact) that prints
  the team memory block, the `SessionEnd` hook that sends what the session wrote, and
  with `mcp=True` the MCP server `memsync` (in `.claude.json`) and its allow rule.
- `codex`: the `SessionStart` and `SessionEnd` hooks in `~/.codex/hooks.json` (which the
  person trusts in Codex's `/hooks`; setup says so) and the MCP server in
  `~/.codex/config.toml`.
- `gemini`: in `~/.gemini/settings.json`, the same session hooks (the block as Gemini
  CLI's `additionalContext`) and the MCP server, trusted (Gemini CLI runs them in a
  folder the person trusts; setup says so).
- `cursor`: the MCP server, in `~/.cursor/mcp.json`.

Each agent is one module of `sync_client/agents/` (where its settings live, how
memsync's entries are added and removed, what doctor checks); this module dispatches to
them and says what the person should know. Every edit keeps each other setting, hook
and key as it was, is idempotent, is written atomically after a timestamped backup, and
refuses a file it cannot parse (changing nothing). The bytes of each file as it was
before memsync first touched it are kept, so `uninstall` gives back exactly that file
when nothing else changed since; otherwise it removes exactly what it added. A
repository's own `.claude/` (or `.cursor/`...) files are never written: anyone who can
push to a repository controls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sync_client.agents import AGENTS
from sync_client.agents import agent as integration
from sync_client.agents.claude_code import ALLOW_RULE, hook_commands
from sync_client.agents.files import MCP_NAME, FileChange, Files, SetupError, memsync_command
from sync_client.config import user_home

__all__ = [
    "AGENTS",
    "ALLOW_RULE",
    "MCP_NAME",
    "FileChange",
    "SetupError",
    "environment_token_warning",
    "hook_commands",
    "hook_installed",
    "memsync_command",
    "setup",
]


def setup(
    agent: str, env: Mapping[str, str], *, mcp: bool = False, uninstall: bool = False
) -> dict[str, Any]:
    """Install (or uninstall) memsync for `agent`; `{agent, changed, files, notes,
    warning, next_session}`."""
    chosen = integration(agent)
    home = user_home(env)
    files = Files(env)
    changes = chosen.apply(files, home, env, mcp=mcp, uninstall=uninstall)
    uses_mcp = chosen.uses_mcp(mcp)
    notes = []
    trust = None if uninstall else chosen.trust_note()
    if trust is not None:
        notes.append(trust)
    import importlib.util

    if not uninstall and uses_mcp and importlib.util.find_spec("mcp") is None:
        notes.append(
            "the MCP server needs the MCP SDK, which is not installed: pip install 'memsync[mcp]'"
        )
    warning = None if uninstall else environment_token_warning(agent, env)
    # (Unless the agent's own note said it already, in its words.)
    said = any("`memsync login`" in note for note in notes)
    if warning is None and not uninstall and uses_mcp and not said and not _token_saved(env):
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
        "next_session": None if uninstall else chosen.session_words(),
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
    who = integration(agent).who
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
    return bool(integration("claude-code").hook_installed(env, user_home(env)))
