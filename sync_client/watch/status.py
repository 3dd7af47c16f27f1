"""The watcher's state file (`watch.json` in a repo's state dir): what it says, and writing it.

    Counters                  what a repo's watcher has done since it started
    status_document(...)      the file's content for a given state (pure)
    write_status(dir, doc)    the atomic write (a reader never sees half a file)
    stamp_in(seconds)         a UTC stamp that many seconds from now (`backoff_until`)

`memsync status` and the session-start block read the file (`read_watch_state`); the
watcher (`watch.RepoWatcher`) keeps the bookkeeping and rewrites it when it changed.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sync_client.state import WATCH_STATE_FILE, atomic_write
from sync_client.watch.rules import Suppression

__all__ = ["Counters", "stamp_in", "status_document", "write_status"]

log = logging.getLogger("memsync.watch")


@dataclass
class Counters:
    """What a repo's watcher has done since it started (the state file's `counters`)."""

    events: int = 0
    pushes: int = 0
    pulls: int = 0
    suppressed_events: int = 0
    failures: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "events": self.events,
            "pushes": self.pushes,
            "pulls": self.pulls,
            "suppressed_events": self.suppressed_events,
            "failures": self.failures,
        }


def status_document(
    *,
    running: bool,
    started_at: str,
    updated_at: str,
    repo: str,
    server: str | None,
    team_dir: str | None,
    live: str | None,
    unreachable_since: str | None,
    last_pull: str | None,
    last_push: str | None,
    suppression: Suppression | None,
    last_error: str | None,
    backoff_until: str | None,
    file_events: str | None,
    skipped: list[dict[str, Any]],
    counters: Counters,
    pid: int | None = None,
) -> dict[str, Any]:
    """The state file's content (see `read_watch_state`). A stopped watcher says no
    `live` mode; at most 50 skipped files are listed."""
    return {
        "running": running,
        "pid": os.getpid() if pid is None else pid,
        "started_at": started_at,
        "updated_at": updated_at,
        "repo": repo,
        # Where: so that a session without credentials finds this state dir.
        "server": server,
        "team_dir": team_dir,
        "live": live if running else None,
        # Since when nothing answers at the server's address (None: it answers).
        "unreachable_since": unreachable_since,
        "last_pull": last_pull,
        "last_push": last_push,
        "suppressed": suppression.as_json() if suppression is not None else None,
        "last_error": last_error,
        "backoff_until": backoff_until,
        "file_events": file_events,
        # The files the last push left out that need the person (at most 50).
        "skipped": skipped[:50],
        "counters": counters.as_json(),
    }


def write_status(directory: Path, document: dict[str, Any], label: str) -> None:
    """Write `document` as `directory`'s state file; a failure is logged, not raised
    (the watcher goes on syncing without it)."""
    data = json.dumps(document, sort_keys=True).encode()
    try:
        atomic_write(directory / WATCH_STATE_FILE, data)
    except OSError as error:
        log.warning("%s: cannot write the watcher's state: %s", label, error)


def stamp_in(seconds: float) -> str:
    """The UTC stamp `seconds` from now, in the state file's format."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
