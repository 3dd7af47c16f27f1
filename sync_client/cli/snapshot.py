"""`memsync snapshot`: seed a subagent's memory from the team's (`sync_client/snapshot.py`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from sync_client.cli._common import (
    _NEEDS_USER_SKIPS,
    EXIT_NEEDS_USER,
    EXIT_OK,
    _emit,
    _HelpGroup,
    _say,
    _skip_lines,
    _workspace,
    global_options,
    run_safely,
)


@click.group(cls=_HelpGroup, order=("export", "check", "seed"))
def snapshot() -> None:
    """Committed seeds of the team memory for subagents.

    `export` writes a snapshot into the repository, `check` says whether a subagent's
    memory dir needs it, `seed` copies it there.

    \b
    Exit codes:
      0  done
      1  failed
      2  usage or configuration error
      3  export: done, but a file was skipped that needs you
    """


_AGENT_OPTION = click.option("--agent", "agent", required=True, help="The subagent's type.")


_SNAPSHOTS_OPTION = click.option(
    "--snapshots",
    "snapshots",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder holding <TYPE>/ (default: .claude/agent-memory-snapshots of this repo).",
)


_MEMORY_DIR_OPTION = click.option(
    "--memory-dir",
    "memory_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="The subagent's memory dir (default: Claude Code's, by --agent and --scope).",
)


_SCOPE_OPTION = click.option(
    "--scope",
    "scope",
    type=click.Choice(["user", "project", "local"]),
    default=None,
    help="Which memory dir of the agent: project (.claude/agent-memory/TYPE, the default), "
    "local (.claude/agent-memory-local/TYPE) or user (~/.claude/agent-memory/TYPE).",
)


def _snapshot_memory_dir(
    agent: str, memory_dir: Path | None, scope: str | None, *, create: bool = False
) -> Path:
    """The memory dir `check` and `seed` work on: --memory-dir, else Claude Code's
    memory dir of the agent type in --scope (project when not given)."""
    from sync_client.errors import ConfigError
    from sync_client.snapshot import DEFAULT_SCOPE, agent_memory_dir

    if memory_dir is not None:
        if scope is not None:
            raise ConfigError("--memory-dir and --scope both name the memory dir: pass one")
        return Path(os.path.abspath(memory_dir))
    chosen = DEFAULT_SCOPE
    if scope == "user":
        chosen = "user"
    elif scope == "local":
        chosen = "local"
    return agent_memory_dir(Path.cwd(), os.environ, agent, chosen, create=create)


@snapshot.command("export")
@_AGENT_OPTION
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write <OUT>/<TYPE>/ instead of .claude/agent-memory-snapshots/<TYPE>/.",
)
@click.option("--from-server", is_flag=True, help="Export the server's memory, not the team dir's.")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="With --from-server."
)
@global_options
@run_safely
def snapshot_export(agent: str, out: Path | None, from_server: bool, version: int | None) -> None:
    """Write the team memory as a snapshot for subagents of one type.

    The same memory always gives the same files. Files that may not be in it (a
    secret, a bad name or text) are skipped with their reason.

    \b
    Exit codes:
      0  exported
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (a bad option, no server or token)
      3  exported; a file was skipped that needs you
    """
    from sync_client.errors import ConfigError
    from sync_client.snapshot import (
        agent_type,
        export_snapshot,
        memory_from_server,
        memory_from_team_dir,
        snapshot_dir,
    )

    agent_type(agent)
    if version is not None and not from_server:
        raise ConfigError("--version needs --from-server")
    snapshot_dir(Path.cwd(), out, agent)  # a bad place fails before any request
    with _workspace() as workspace:
        if from_server:
            memory = memory_from_server(workspace.api, version)
        else:
            memory = memory_from_team_dir(workspace)
    result = export_snapshot(memory, snapshot_dir(Path.cwd(), out, agent, create=True))

    def human() -> None:
        shown = "no version" if result["version"] is None else f"version {result['version']}"
        _say(
            f"exported {result['entries']} file(s) to {result['snapshot']} "
            f"({shown}, updated {result['updatedAt']}): {len(result['written'])} written, "
            f"{len(result['removed'])} removed"
        )
        if result["note"]:
            _say(f"note: {result['note']}")
        _skip_lines(result["skipped"])

    _emit(result, human)
    needs_user = any(row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"])
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


@snapshot.command("check")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SCOPE_OPTION
@_SNAPSHOTS_OPTION
@global_options("json")
@run_safely
def snapshot_check(
    agent: str, memory_dir: Path | None, scope: str | None, snapshots: Path | None
) -> None:
    """Print what the memory dir needs: none, initialize or prompt-update.

    The memory dir is --memory-dir, else Claude Code's for the agent type in --scope.

    \b
    Exit codes:
      0  printed (none also when there is no valid snapshot)
      2  usage error (an invalid --agent, both --memory-dir and --scope)
    """
    from sync_client.errors import ConfigError
    from sync_client.snapshot import InvalidSnapshot, agent_type, check, snapshot_dir

    agent_type(agent)
    if memory_dir is not None and scope is not None:
        _snapshot_memory_dir(agent, memory_dir, scope)  # says why
    try:
        directory = snapshot_dir(Path.cwd(), snapshots, agent)
        target = _snapshot_memory_dir(agent, memory_dir, scope)
    except (InvalidSnapshot, ConfigError):
        # Outside a repository, or a symlinked folder: no valid snapshot, or no memory
        # dir a seed would write.
        action = "none"
    else:
        action = check(directory, target)
    _emit({"action": action}, lambda: _say(action))


@snapshot.command("seed")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SCOPE_OPTION
@_SNAPSHOTS_OPTION
@click.option(
    "--update",
    "mode",
    flag_value="update",
    help="Merge each note: keep the agent's edits, take the snapshot's changes.",
)
@click.option("--replace", "mode", flag_value="replace", help="Make the memory dir equal to it.")
@global_options("json")
@run_safely
def snapshot_seed(
    agent: str,
    memory_dir: Path | None,
    scope: str | None,
    snapshots: Path | None,
    mode: str | None,
) -> None:
    """Copy the snapshot into the memory dir (files it replaces are saved first).

    The memory dir is --memory-dir, else Claude Code's for the agent type in --scope.
    --update merges each note with what the last seed wrote and says what it did.

    \b
    Exit codes:
      0  seeded
      1  failed (the snapshot is missing or not valid, a write failed)
      2  usage error
    """
    from sync_client.snapshot import SeedMode, saves_dir, seed, seed_lines, snapshot_dir

    directory = snapshot_dir(Path.cwd(), snapshots, agent)
    target = _snapshot_memory_dir(agent, memory_dir, scope)
    chosen: SeedMode = "initialize"
    if mode == "update":
        chosen = "update"
    elif mode == "replace":
        chosen = "replace"

    def make_dir() -> None:
        _snapshot_memory_dir(agent, memory_dir, scope, create=True)

    result = seed(
        directory,
        target,
        chosen,
        saves_dir(os.environ, target),
        make_dir=None if memory_dir is not None else make_dir,
    )
    _emit(result, lambda: _say("\n".join(seed_lines(result))))


COMMANDS = (snapshot,)
