"""Local sync state, kept outside the team dir (docs/protocol.md 4.1).

`$XDG_STATE_HOME/memsync/<id>/state.json` holds the last ETag and version, the base
checksum of every key, what the server taught us (`max_entries`, `supports`), and the
stat cache. It is written atomically (temp file, fsync, rename). Losing it is safe: the
next sync rebuilds it from the server. `conflicts/` keeps the local copies a pull
replaced, so no edit is ever lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync_protocol.keys import key_problem
from sync_client.durable import atomic_write as atomic_write
from sync_client.durable import now_stamp as now_stamp
from sync_client.watch.lock import WATCH_STATE_FILE as WATCH_STATE_FILE
from sync_client.watch.lock import pid_alive as pid_alive
from sync_client.watch.lock import read_watch_state as read_watch_state

STATE_FILE = "state.json"
CONFLICTS_DIR = "conflicts"
# Copies a person has settled with `memsync resolve`: no longer listed, still kept.
SETTLED_DIR = "settled"
# The watcher's state file (`WATCH_STATE_FILE`), `pid_alive` and `read_watch_state` live
# in `watch/lock.py`, beside the lock they consult, and are re-exported here: reading a
# watcher's state loads neither the watcher (watchdog) nor this module's dataclasses.
# `atomic_write` and `now_stamp` live in `durable.py`, below both, and are re-exported
# here for the many modules that write with them.


@dataclass
class SyncState:
    """Everything memsync remembers between runs for one (server, repo, team dir)."""

    etag: str | None = None
    version: int | None = None
    bases: dict[str, str] = field(default_factory=dict)
    max_entries: int | None = None
    # The per-entry size limit a server's 413 taught us, when lower than the default.
    max_entry_bytes: int | None = None
    # Entries the server refused, by key: the refused local checksum and the skip row
    # (reason, detail, limit). The same unchanged file is skipped without a request.
    rejected: dict[str, dict[str, Any]] = field(default_factory=dict)
    supports: list[str] | None = None
    stat_cache: dict[str, list[Any]] = field(default_factory=dict)
    # The scanner rules the stat cache's verdicts were made with.
    scanner_rules: str | None = None
    # A digest of the rules file `scanner_rules` was computed from: while it is the
    # same, the fingerprint is taken from here without loading the rules.
    scanner_rules_source: str | None = None
    last_push: str | None = None
    last_pull: str | None = None
    # key -> server checksum of a text a pull could not write (a symlink or a file in
    # the way); every pull tries again, from the base store.
    refused: dict[str, str] = field(default_factory=dict)
    # key -> {"version", "at"}: deleted for the team while edited here (modify/delete).
    # The file stays and is not uploaded until `memsync resolve` settles it.
    deleted_on_server: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A reviewed repo (docs/protocol.md 3.12): `{on, reviewer, pending}` as the server
    # last said it (a read's `review` field, or a 202), None while it is not reviewed.
    review: dict[str, Any] | None = None
    # key -> this person's proposal of it (`review.ProposalRecord` fields): its id, the
    # proposed text's checksum (None: a delete), and once known the outcome (status,
    # by, reason, when; for a rejection where the replaced text was saved).
    proposals: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The team's MEMORY.md deleted for the team, as the server last said it
    # (`index_deleted`): `{checked: server version asked at, row: {version, author, at,
    # last_version} or None}`; None once it is live again (or never asked).
    index_deleted: dict[str, Any] | None = None


def load_state(state_dir: Path) -> SyncState:
    """The saved state, or a fresh one when missing or unreadable (a full compare follows)."""
    try:
        data = (state_dir / STATE_FILE).read_bytes()
        raw = json.loads(data)
        state = SyncState(**{key: raw[key] for key in raw if key in SyncState.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return SyncState()
    if not all(
        isinstance(value, dict)
        for value in (
            state.bases,
            state.stat_cache,
            state.refused,
            state.deleted_on_server,
            state.proposals,
        )
    ):
        return SyncState()
    _last_written[state_dir / STATE_FILE] = data
    return state


_last_written: dict[Path, bytes] = {}


def save_state(state_dir: Path, state: SyncState) -> None:
    """Persist the state atomically; a state equal to the one on disk is not rewritten."""
    # Shallow field access, not dataclasses.asdict: that deep-copies the stat cache.
    fields = {name: getattr(state, name) for name in SyncState.__dataclass_fields__}
    data = json.dumps(fields, ensure_ascii=False, sort_keys=True).encode("utf-8")
    path = state_dir / STATE_FILE
    if _last_written.get(path) == data and path.exists():
        return
    atomic_write(path, data)
    _last_written[path] = data


def save_conflict_copy(state_dir: Path, key: str, data: bytes) -> Path:
    """Keep the local bytes that a pull is about to replace; return where they went."""
    if key_problem(key) is not None:
        raise ValueError(f"refusing to save a copy under an invalid key {key!r}")
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = state_dir / CONFLICTS_DIR / stamp / key
    atomic_write(target, data, mode=0o600)
    return target


def list_conflicts(state_dir: Path, *, folder: str = CONFLICTS_DIR) -> list[tuple[str, str, Path]]:
    """(when, key, path) of every saved copy, oldest first (settled ones: `SETTLED_DIR`)."""
    root = state_dir / folder
    found: list[tuple[str, str, Path]] = []
    if not root.is_dir():
        return found
    for stamp_dir in sorted(root.iterdir()):
        if not stamp_dir.is_dir() or stamp_dir.is_symlink():
            continue
        for path in sorted(stamp_dir.rglob("*")):
            if path.is_file() and not path.is_symlink():
                found.append((stamp_dir.name, path.relative_to(stamp_dir).as_posix(), path))
    return found


def settle_conflict_copies(state_dir: Path, key: str) -> list[Path]:
    """Move every saved copy of `key` out of the conflict list (into `settled/`)."""
    moved: list[Path] = []
    for when, copy_key, path in list_conflicts(state_dir):
        if copy_key != key:
            continue
        target = state_dir / SETTLED_DIR / when / key
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(path, target)
        moved.append(target)
        # Drop folders the move emptied, up to the stamp folder.
        parent = path.parent
        while parent != state_dir / CONFLICTS_DIR:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
    return moved
