"""What a watcher says about the team index and restored notes, each thing once.

A watcher runs for days: a warning repeated on every push would bury the log, and one
said never leaves a person guessing. So the index's health is logged when it changes
(a WARNING per problem, at most a few per kind), a `MEMORY.md` that cannot be shared
is an ERROR once per version of the file, a file a push leaves out (a secret, too
large, not UTF-8, a symlink) is a WARNING with its fix once per version of the file,
and a restored note (deleted here, brought back by a pull) is said once per restore.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sync_client.index import team as team_index
from sync_client.index.deleted import rm_command
from sync_client.index.memory import INDEX_NAME
from sync_client.index.team import problem_lines
from sync_client.local import LocalScan, shown_key
from sync_client.personal import index_scan
from sync_client.skip_words import skip_words
from sync_client.workspace import Workspace

log = logging.getLogger("memsync.watch")


class IndexNotices:
    """The index lines one repo's watcher has said, so each is said once."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._notes_fingerprint: str | None = None
        self._said: set[str] = set()
        self._blocked_version: str | None = None

    def after_push(self, workspace: Workspace, skipped: Iterable[dict[str, Any]]) -> None:
        """Log what changed about the team index since the last push."""
        self._blocked(workspace, list(skipped))
        # The push's own scan: the team dir is walked once per push, not twice.
        scanned = workspace.last_scan or workspace.scan()
        if INDEX_NAME not in scanned.checksums and INDEX_NAME in workspace.state.bases:
            # Deleted here, the team's index is put back by the follower's pull (and said
            # as restored): its absence is no advice to give. Checked again next push.
            return
        fingerprint = _markdown_fingerprint(scanned)
        if fingerprint == self._notes_fingerprint:
            return
        self._notes_fingerprint = fingerprint
        scanned = index_scan(workspace, scanned)  # (none to check in the agent memory)
        report = team_index.health(workspace.team_dir, scanned, workspace.state_dir).as_json()
        report["team_deleted"] = team_index.team_deleted(workspace.state)
        lines = set(problem_lines(report))
        for line in sorted(lines - self._said):
            log.warning("%s: %s", self.label, line)
        self._said = lines

    def _blocked(self, workspace: Workspace, skipped: list[dict[str, Any]]) -> None:
        row = team_index.blocked(skipped)
        if row is None:
            self._blocked_version = None
            return
        try:
            data = (workspace.team_dir / row["key"]).read_bytes()
        except OSError:
            return
        version = hashlib.sha256(data).hexdigest()
        if version == self._blocked_version:
            return
        self._blocked_version = version
        log.error(
            "%s: the team's index is NOT SHARED: %s is not being sent: %s; teammates keep "
            "the team's older index until it can be pushed",
            self.label,
            row["key"],
            skip_words(row),
        )


# Skips that are choices (hidden names, editor and sync leftovers, .memsyncignore): a
# push counts them in one line; a watcher says nothing about them.
QUIET_SKIPS = frozenset({"hidden", "editor-leftover", "ignored"})
# A watcher names at most this many skipped files per reason in one push's lines.
_SKIPS_SAID_PER_REASON = 3


class SkipNotices:
    """The skipped files one repo's watcher has said, so each is said once per version.

    A file is said again when it changes (its stat) or its reason does; a file that
    syncs again is forgotten, so a later skip of it is said anew.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._said: dict[str, tuple[str, tuple[int, int, int] | None]] = {}
        self.current: list[dict[str, Any]] = []

    def after_push(self, team_dir: Path, skipped: Iterable[dict[str, Any]]) -> None:
        """Log each newly skipped file (reason and fix); keep the list for `status`."""
        rows = [row for row in skipped if row.get("reason") not in QUIET_SKIPS]
        self.current = [
            {"key": row["key"], "reason": row["reason"], "words": skip_words(row)} for row in rows
        ]
        said: dict[str, tuple[str, tuple[int, int, int] | None]] = {}
        fresh: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            key = str(row["key"])
            version = (str(row["reason"]), _stat_of(team_dir / key))
            said[key] = version
            if self._said.get(key) != version:
                fresh.setdefault(str(row["reason"]), []).append(row)
        self._said = said
        for reason, fresh_rows in fresh.items():
            for row in fresh_rows[:_SKIPS_SAID_PER_REASON]:
                log.warning("%s: not sending %s: %s", self.label, row["key"], skip_words(row))
            more = len(fresh_rows) - _SKIPS_SAID_PER_REASON
            if more > 0:
                log.warning(
                    "%s: not sending %d more file(s): %s (`memsync status` lists them)",
                    self.label,
                    more,
                    reason.replace("-", " "),
                )


def _stat_of(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def restored_lines(restored: Iterable[str]) -> list[str]:
    """The line said once for each note a pull restored (it was deleted here)."""
    return [
        f"restored {key}, deleted here: `{rm_command(key)}` deletes it for the team"
        for key in restored
    ]


def _markdown_fingerprint(scanned: LocalScan) -> str:
    digest = hashlib.sha256()
    for key, checksum in scanned.checksums.items():
        if key.endswith(".md"):
            digest.update(f"{key}\n{checksum}\n".encode())
    for item in scanned.skipped:
        # A name that is not UTF-8 has no UTF-8 form: the shown one never fails.
        digest.update(f"skipped {shown_key(item.key)}\n".encode())
    return digest.hexdigest()
