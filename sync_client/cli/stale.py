"""`memsync stale`: the notes that cite code changed since they were written, or expired.

The check is `freshness.check`, against the git checkout of the current folder; this
module only words it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from sync_client.cli._common import (
    EXIT_NEEDS_USER,
    EXIT_OK,
    _emit,
    _options,
    _say,
    _timeout,
    global_options,
    run_safely,
)


def _team_and_state_dir() -> tuple[Path, Path | None]:
    """(the team dir, its state dir when server and repo are known: where this
    machine's record of when each note was written is kept). No token is needed."""
    from sync_client.config import resolve_options_parts, state_dir_for
    from sync_client.errors import ConfigError

    parts = resolve_options_parts(_options(), cwd=Path.cwd(), env=os.environ)
    if isinstance(parts.team_dir, Exception):
        raise parts.team_dir
    if isinstance(parts.server, ConfigError) or isinstance(parts.repo, ConfigError):
        return parts.team_dir, None
    return parts.team_dir, state_dir_for(os.environ, parts.server, parts.repo.name, parts.team_dir)


# Seconds the server may take to say where the notes came from: `stale` works offline,
# so an unreachable server only costs this, once.
SOURCES_TIMEOUT = 5.0


def _learn_sources(team_dir: Path, state_dir: Path | None) -> None:
    """Ask the server once (`GET /provenance`) for the commit each note was written
    against, and keep it as the note's written-at record (`freshness.sources.learn`).
    No token, no server, an older server or no network: nothing changes."""
    if state_dir is None:
        return
    try:
        from sync_client.api import Api
        from sync_client.cli._common import _config
        from sync_client.freshness.sources import learn

        config = _config()
        timeout = min(_timeout(), SOURCES_TIMEOUT)
        with Api(config.server, config.token, config.repo, timeout=timeout) as api:
            sources = api.sources()
    except Exception:  # offline, no token, an older server: the local record stands
        return
    learn(team_dir, state_dir, sources)


@click.command()
@global_options("repo", "dir", "json")
@run_safely
def stale() -> None:
    """List the notes that cite code changed since they were written.

    A note cites code by naming a file of this git checkout in backticks, as a link's
    target or in a code block (`src/app/retry.py`, `src/app/retry.py:88`, `#L88-L95`),
    or with a line anywhere (a bare path in a sentence only names it). A note is stale
    when a file it cites is gone, when a file it cites as a whole changed since the
    note was written, or when a line range it cites changed; also when its
    frontmatter's `expires: YYYY-MM-DD` has passed or `review-after: N days` is due.
    When a note was written is this machine's record of the commit its last push or
    pull saw, else the file's modification time. Committed changes count, not
    uncommitted edits. Needs no server.

    \b
    Exit codes:
      0  no note is stale (also outside a git checkout: nothing is checked)
      1  failed (the team dir cannot be read)
      2  usage or configuration error
      3  some notes are stale (each with its reasons)
    """
    from sync_client.config.git import git_root
    from sync_client.freshness import report as freshness

    team_dir, state_dir = _team_and_state_dir()
    _learn_sources(team_dir, state_dir)
    report = freshness.check(git_root(Path.cwd()), team_dir, state_dir)
    result = {"team_dir": str(team_dir), **report.as_json()}
    stale_notes = report.stale

    def human() -> None:
        if report.unchecked is not None:
            _say(report.unchecked)
            return
        for note in stale_notes:
            _say(f"stale: {note.key}")
            for reason in note.reasons:
                _say(f"  {reason.words()}")
        checked = len(report.notes)
        against = f" against {report.head[:7]}" if report.head else ""
        noun = "note" if checked == 1 else "notes"
        if stale_notes:
            _say(
                f"{len(stale_notes):,} of {checked:,} {noun} may no longer be true: check "
                "each against the code, then edit it (or its `expires`) so it is again"
            )
        else:
            _say(f"no stale note: {checked:,} {noun} checked{against}")

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if stale_notes else EXIT_OK)


COMMANDS = (stale,)
