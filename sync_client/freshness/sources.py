"""What the server knows of where each note came from, kept as its "written at" record.

This machine's record (`freshness.record_written`) of when a note was written is the
checkout's `HEAD` at the push or pull that last moved it. For a teammate's note, that
is the reader's `HEAD` at the pull, which can be later than the code the note was
written against: a change the writer never saw then passes as seen. The server keeps
the writer's commit with each version (`GET /provenance`, docs/protocol.md 3.13);
`learn` stores it, for each note whose local text is the version the server
describes, in the same record file (a version without a commit only gives its time,
kept where this machine has no commit for that text), so `memsync stale`, `status`
and the session-start block (which asks no server) compare from the writer's commit.

A commit the local checkout does not have (not fetched yet, or another clone's) is
kept too: `freshness.check` then uses the time the version was written, as for a
version with no commit, and the commit once `git log` knows it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from sync_client.freshness.report import (
    _COMMIT,
    MAX_RECORDS,
    RECORD_FILE,
    _read_records,
    read_notes,
)

__all__ = ["SOURCE", "learn"]

# The `source` of a record learned from the server (`freshness.WrittenAt.source`).
SOURCE = "server"


def _seconds(wire: object) -> int | None:
    """A wire time (`2026-12-03T10:00:00Z`) as seconds since the epoch."""
    if not isinstance(wire, str):
        return None
    try:
        return int(datetime.fromisoformat(wire).timestamp())
    except ValueError:
        return None


def _has_commit(record: object, checksum: str) -> bool:
    """Whether this machine's record of the same text names a commit: a server row
    without one (an older writer) only says a time, which does not replace it."""
    return (
        isinstance(record, dict)
        and record.get("checksum") == checksum
        and isinstance(record.get("commit"), str)
    )


def learn(team_dir: Path, state_dir: Path | None, sources: Mapping[str, Any]) -> int:
    """Record the server's commit and time (`sources`: `Api.sources()`) as the written
    at of each note whose text has the checksum the server's row has; how many records
    changed. Never fails its caller: the record is a hint."""
    if state_dir is None or not sources:
        return 0
    from memsync_protocol.checksums import entry_checksum

    try:
        data = _read_records(state_dir)
        notes = data.get("notes")
        notes = dict(notes) if isinstance(notes, dict) else {}
        changed = 0
        for key, note in read_notes(team_dir).items():
            row = sources.get(key)
            if not isinstance(row, dict):
                continue
            checksum = entry_checksum(note.text)
            at = _seconds(row.get("at"))
            if row.get("checksum") != checksum or at is None:
                continue
            commit = row.get("commit")
            commit = commit if isinstance(commit, str) and _COMMIT.fullmatch(commit) else None
            learned = {"checksum": checksum, "commit": commit, "at": at, "source": SOURCE}
            kept = notes.get(key)
            if kept == learned or (commit is None and _has_commit(kept, checksum)):
                continue
            notes.pop(key, None)  # re-inserted last: the newest survive the bound
            notes[key] = learned
            changed += 1
        if not changed:
            return 0
        if len(notes) > MAX_RECORDS:
            notes = dict(list(notes.items())[-MAX_RECORDS:])
        from sync_client.state import atomic_write

        state_dir.mkdir(parents=True, exist_ok=True)
        data = {**data, "notes": notes, "learned": int(time.time())}
        atomic_write(state_dir / RECORD_FILE, json.dumps(data).encode("utf-8"))
        return changed
    except (OSError, ValueError):
        return 0
