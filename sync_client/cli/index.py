"""`memsync index`: check the team's MEMORY.md as Claude Code reads it, and fix it.

The index lines other commands print too are `_common`'s (`team_copy_line`) and, the
ones the watcher also logs, `index.team`'s (`problem_lines`, `kept_lines`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from sync_client.cli._common import (
    EXIT_NEEDS_USER,
    EXIT_OK,
    _config,
    _emit,
    _options,
    _say,
    _timeout,
    global_options,
    run_safely,
    team_copy_line,
)

# `memsync index` shows more of each kind of problem than the other commands
# (`team_index.SHOWN_PER_KIND`), still a screenful: a 300-line index is not 300 lines.
INDEX_SHOWN_PER_KIND = 20
# Seconds `memsync index` waits for the server's word on a deleted team index.
ASK_SECONDS = 5.0


def _team_dir() -> tuple[Path, Path | None]:
    """(the team dir, its state dir when server and repo are known: where the team's
    index of the last sync is kept). `memsync index` needs no server or token."""
    from sync_client.config import resolve_options_parts, state_dir_for
    from sync_client.errors import ConfigError

    parts = resolve_options_parts(_options(), cwd=Path.cwd(), env=os.environ)
    if isinstance(parts.team_dir, Exception):
        raise parts.team_dir
    if isinstance(parts.server, ConfigError) or isinstance(parts.repo, ConfigError):
        return parts.team_dir, None
    return parts.team_dir, state_dir_for(os.environ, parts.server, parts.repo.name, parts.team_dir)


@click.command()
@click.option(
    "--fix",
    is_flag=True,
    help="Add a line for each unlisted note and remove lines whose note is gone.",
)
@global_options("repo", "dir", "json")
@run_safely
def index(fix: bool) -> None:
    """Check the team's MEMORY.md as Claude Code reads it (and fix it).

    Shows the first 20 problems of each kind and counts the rest (--json lists
    every one).

    Reports an index longer than Claude Code loads (200 lines, 25,000 characters),
    lines that link to a note that does not exist, notes no line lists, and notes
    without the `name` and `description` frontmatter Claude Code recalls them by.
    With --fix, adds `- [name](path) — description` for each unlisted note at the
    end and removes lines whose every link is gone; every other line is kept as it
    is. A MEMORY.md missing here that the team has is written back first and fixed
    on top, never started anew; one deleted for the team is brought back from its
    last version first (the server's history says who deleted it). The fix is an
    ordinary edit: the next push (or the watcher) sends it.

    \b
    Exit codes:
      0  the index is healthy (after --fix: nothing is left to fix by hand)
      1  failed (the team dir cannot be read or written)
      2  usage or configuration error
      3  problems that need you (each line says the fix), or the team's index
         deleted for the team and not brought back
    """
    from sync_client.index import team as team_index
    from sync_client.index.deleted import who

    team_dir, state_dir = _team_dir()
    scanned = team_index.scan_alone(team_dir)
    # Missing here, kept by the team: never a new index over the team's.
    team_text = team_index.missing_team_index(team_dir, state_dir)
    # Deleted for the team: its last version is the way back, never a new index.
    deleted, deleted_text = (None, None) if team_text else _team_deleted(team_dir, state_dir, fix)
    fixed: dict[str, Any] | None = None
    restored_from: dict[str, Any] | None = None
    if fix and (deleted is None or deleted_text is not None or _has_index(team_dir)):
        fixed = team_index.fix(team_dir, scanned, team_text=team_text or deleted_text)
        scanned = team_index.scan_alone(team_dir)
        team_text = None
        # Brought back here: the push sends it; the deletion is said once, below.
        restored_from, deleted = (deleted, None) if fixed["restored"] else (None, deleted)
    report = team_index.health(team_dir, scanned, state_dir).as_json()
    report["team_copy"] = team_text is not None
    report["team_deleted"] = deleted
    result = {"team_dir": str(team_dir), **report, "fixed": fixed}

    def human() -> None:
        for line in team_copy_line(report):
            _say(line)
        if fixed is not None:
            if fixed["restored"] and restored_from is not None:
                _say(
                    f"restored: MEMORY.md, the team's index deleted for the team "
                    f"{who(restored_from)}, from its last version "
                    f"({restored_from.get('last_version')}); fixed on top of it, the next "
                    "push sends it to the team"
                )
            elif fixed["restored"]:
                _say(
                    "restored: MEMORY.md, the team's index, missing here (fixed on top "
                    "of it; the next push sends the fix)"
                )
            shown = INDEX_SHOWN_PER_KIND
            for key in fixed["added"][:shown]:
                _say(f"added: a line for {key} to MEMORY.md")
            if len(fixed["added"]) > shown:
                _say(
                    f"added: {len(fixed['added']) - shown:,} more lines "
                    "(`memsync index --fix --json` lists every one)"
                )
            for row in fixed["removed"][:shown]:
                _say(
                    f"removed: {row['index']} line {row['line']} (it linked to "
                    f"{row['target']}, which does not exist)"
                )
            if len(fixed["removed"]) > shown:
                _say(
                    f"removed: {len(fixed['removed']) - shown:,} more lines "
                    "(`memsync index --fix --json` lists every one)"
                )
            if not fixed["changed"]:
                _say("nothing to fix")
        for line in team_index.problem_lines(report, shown_per_kind=INDEX_SHOWN_PER_KIND):
            _say(line)
        if not report["problems"] and not report["team_copy"] and not deleted:
            load = report["claude_code"]
            if load is None:
                _say("no MEMORY.md and no notes: nothing to check")
            else:
                lines = f"{load['lines']:,} line{'' if load['lines'] == 1 else 's'}"
                _say(
                    f"MEMORY.md is healthy: {lines}, every note listed, Claude Code loads all of it"
                )

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if report["problems"] or deleted else EXIT_OK)


def _has_index(team_dir: Path) -> bool:
    from sync_client.index.memory import INDEX_NAME

    return os.path.lexists(team_dir / INDEX_NAME)


def _team_deleted(
    team_dir: Path, state_dir: Path | None, fix: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """(the delete of the team's MEMORY.md, with `fix` the text of its last version).

    With no MEMORY.md here or in the last sync, the server is asked (when a server and
    token are set): the team's history, not a missing file, says whether there is an
    index to bring back. Otherwise, or when it cannot answer, the last sync's record.
    """
    from sync_client.api import Api
    from sync_client.errors import MemsyncError
    from sync_client.index import deleted as index_deleted
    from sync_client.index import team as team_index
    from sync_client.index.memory import INDEX_NAME
    from sync_client.state import load_state
    from sync_client.workspace import Workspace

    if state_dir is None:
        return None, None
    state = load_state(state_dir)
    row = team_index.team_deleted(state)
    if INDEX_NAME in state.bases or _has_index(team_dir):
        return row, None
    try:
        config = _config()
        # A quick question: `memsync index` never waits long for a server.
        timeout = min(_timeout(), ASK_SECONDS)
        with Api(config.server, config.token, config.repo, timeout=timeout) as api:
            workspace = Workspace.open(config.team_dir, config.state_dir, api)
            try:
                row = index_deleted.learn(workspace)
                text = index_deleted.last_text(workspace, row) if fix and row else None
                workspace.save()
            finally:
                workspace.close()
    except MemsyncError:
        return row, None
    return row, text


COMMANDS = (index,)
