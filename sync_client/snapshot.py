"""Snapshot seeding for subagents: committed, deterministic copies of the team memory.

    memory_from_team_dir(workspace) -> Memory      the local team dir's syncable files
    memory_from_server(api, version) -> Memory     the server's current or a past version
    export_snapshot(memory, directory) -> dict     write the snapshot folder, exactly
    read_snapshot(directory) -> Snapshot           every key and checksum verified
    check(directory, memory_dir) -> str            "none" | "initialize" | "prompt-update"
    seed(directory, memory_dir, mode, saves) -> dict   initialize, update or replace

A snapshot folder (`.claude/agent-memory-snapshots/<agent>/` of a repository) holds one
file per entry and `snapshot.json`: `format`, `repo`, `version`, `updatedAt`, `checksum`
(the repo checksum over the entries) and `entries` (key -> entry checksum), sorted,
indented, ending in a newline. The same memory always gives the same bytes:
`updatedAt` is the time of the version the memory is (its commit on the server), never
the time of the export. A local team dir that holds exactly what its last pull brought,
and that the server still holds, is that version (one hashes request says so); any
other local memory has `version` null and `updatedAt` the newest file time.

A committed snapshot is a file inside a repository, so it is data, never configuration:
nothing in it names a server, token or team dir, and it is only used when every file
matches its checksum, every key is one a pull would accept, and no file is one the
scanner flags. A subagent's memory dir is written through `sync_client.local` (atomic,
no symlink followed); a local file a seed replaces or removes is first saved under the
client's state dir, as pull saves conflicts. Nothing here pushes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memsync_protocol.checksums import entry_checksum, is_checksum, repo_checksum
from memsync_protocol.keys import key_problem, text_problem
from scanner import scan_text
from sync_client.api import Api, HistoryGone, with_retries
from sync_client.config import git_root, state_home
from sync_client.errors import ConfigError, MemsyncError
from sync_client.local import (
    UnsafeKey,
    read_entry,
    remove_entry,
    safe_target,
    scan_team_dir,
    write_entry,
)
from sync_client.state import save_conflict_copy
from sync_client.workspace import Workspace

SNAPSHOTS_DIR = (".claude", "agent-memory-snapshots")
MANIFEST = "snapshot.json"
MARKER = ".snapshot-synced.json"
FORMAT = 1
# Far above any real manifest (2,000 keys of 512 bytes); a bigger one is not read.
MAX_MANIFEST_BYTES = 4_000_000
# The time of a memory with no version and no files.
EPOCH = "1970-01-01T00:00:00Z"
_AGENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_WIRE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
# Skips that are not memory at all: the scan lists them, a seed leaves them be.
_NOT_MEMORY = frozenset({"hidden", "editor-leftover"})

Action = Literal["none", "initialize", "prompt-update"]
SeedMode = Literal["initialize", "update", "replace"]


class InvalidSnapshot(MemsyncError):
    """The folder is not a valid snapshot (missing, malformed, or files that do not match)."""

    type = "invalid_snapshot"


@dataclass
class Memory:
    """Entries to export, with the version they are and the time of that version."""

    repo: str
    version: int | None
    updated_at: str
    texts: dict[str, str] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """A snapshot folder whose manifest and files were all verified."""

    directory: Path
    repo: str | None
    version: int | None
    updated_at: str
    checksum: str
    texts: dict[str, str]


def agent_type(name: str) -> str:
    """`name` when it is a safe agent type (one path segment of letters, digits, `._-`)."""
    if _AGENT.fullmatch(name) is None:
        raise ConfigError(
            f"agent type {name!r} must be 1-100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def _contained_dir(base: Path, parts: tuple[str, ...], *, create: bool) -> Path:
    """`base/parts...`, refusing any part that is a symlink or not a directory.

    A repository's `.claude` folder is controlled by whoever can push to it: a symlink
    there must not send a snapshot's writes, or its reads, anywhere else.
    """
    path = base
    for part in parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if not create:
                return base.joinpath(*parts)
            path.mkdir()
            continue
        if stat.S_ISLNK(mode):
            raise InvalidSnapshot(f"refusing {path}: it is a symbolic link")
        if not stat.S_ISDIR(mode):
            raise InvalidSnapshot(f"refusing {path}: it is not a directory")
    return path


def snapshot_dir(cwd: Path, out: Path | None, agent: str, *, create: bool = False) -> Path:
    """The snapshot folder of `agent`: `<out>/<agent>`, or the current repository's
    `.claude/agent-memory-snapshots/<agent>` (the git root, as the client finds it)."""
    agent_type(agent)
    if out is not None:
        base = Path(os.path.abspath(out))
        if create:
            base.mkdir(parents=True, exist_ok=True)
        return _contained_dir(base, (agent,), create=create)
    root = git_root(cwd)
    if root is None:
        raise ConfigError(f"{cwd} is not inside a git repository; pass --out DIR")
    return _contained_dir(root, (*SNAPSHOTS_DIR, agent), create=create)


def saves_dir(env: Mapping[str, str], memory_dir: Path) -> Path:
    """Where a seed keeps the local files it replaced: under the client's state root."""
    identity = hashlib.sha256(str(Path(os.path.abspath(memory_dir))).encode()).hexdigest()
    return state_home(env) / "snapshots" / identity[:16]


def _hidden(key: str) -> bool:
    return any(segment.startswith(".") for segment in key.split("/"))


def _admit(memory: Memory, key: str, text: object) -> None:
    """Add one entry to `memory`, or a skip row saying why it may not be in a snapshot."""
    problem = key_problem(key)
    if problem is not None:
        memory.skipped.append({"key": key, "reason": "invalid-key", "detail": problem})
    elif _hidden(key) or key == MANIFEST:
        # A hidden key could overwrite a memory dir's marker; the manifest is ours.
        memory.skipped.append({"key": key, "reason": "reserved-name"})
    elif not isinstance(text, str) or text_problem(text) is not None:
        memory.skipped.append({"key": key, "reason": "invalid-text"})
    else:
        findings = scan_text(text)
        if findings:
            for finding in findings:
                memory.skipped.append(
                    {
                        "key": key,
                        "reason": "secret",
                        "rule": finding.rule,
                        "label": finding.label,
                        "line": finding.line,
                    }
                )
        else:
            memory.texts[key] = text


def _file_time(team_dir: Path, keys: list[str]) -> str:
    newest = 0
    for key in keys:
        try:
            newest = max(newest, int(os.lstat(safe_target(team_dir, key)).st_mtime))
        except (OSError, UnsafeKey):
            continue
    return datetime.fromtimestamp(newest, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def memory_from_team_dir(workspace: Workspace) -> Memory:
    """The team dir's syncable files (as a push would see them), scanner-clean.

    Reads the server only to name the version: when the team dir holds exactly the
    entries of the last pull, one hashes request confirms the server still holds them.
    Nothing is saved to the sync state.
    """
    scan = workspace.scan()
    memory = Memory(repo=workspace.api.repo, version=None, updated_at=EPOCH)
    for row in scan.skipped:
        if row.reason not in _NOT_MEMORY:
            memory.skipped.append(row.as_row())
    for key in scan.checksums:
        try:
            text: object = read_entry(workspace.team_dir, key)
        except (OSError, UnsafeKey, UnicodeDecodeError):
            continue  # changed since the scan: not part of this export
        _admit(memory, key, text)
    checksums = {key: entry_checksum(text) for key, text in memory.texts.items()}
    state = workspace.state
    if checksums == state.bases and state.etag == repo_checksum(checksums):
        try:
            head = with_retries(workspace.api.hashes)
        except MemsyncError as error:
            memory.note = f"server unreachable, version not known: {error}"
        else:
            if head.checksum == state.etag and head.last_modified is not None:
                memory.version = head.version
                memory.updated_at = head.last_modified
    if memory.version is None:
        memory.updated_at = _file_time(workspace.team_dir, sorted(memory.texts))
    return memory


def _history_rows(api: Api, key: str) -> list[dict[str, Any]]:
    rows = with_retries(lambda: api.history(key))
    return [
        row
        for row in rows
        if isinstance(row, dict)
        and isinstance(row.get("version"), int)
        and not isinstance(row.get("version"), bool)
    ]


def _commit_time(rows: list[dict[str, Any]], version: int) -> str | None:
    for row in rows:
        if row["version"] == version and isinstance(row.get("at"), str):
            return str(row["at"])
    return None


def memory_from_server(api: Api, version: int | None = None) -> Memory:
    """The server's entries now, or at `version`, scanner-clean; `updatedAt` is the
    version's commit time.

    A past version is rebuilt from history: keys unchanged since it come from the
    current state, the others from their newest history row at or before it.
    """
    current = with_retries(api.get)
    assert current is not None  # a 304 needs If-None-Match
    if current.version == 0:
        raise MemsyncError(f"the server holds no team memory for {api.repo}")
    if version is None or version == current.version:
        memory = Memory(api.repo, current.version, current.last_modified or EPOCH)
        for key in sorted(current.entry_checksums):
            text = current.texts.get(key)
            if isinstance(text, str) and entry_checksum(text) != current.entry_checksums[key]:
                text = None
            _admit(memory, key, text)
        return memory
    if version > current.version:
        raise MemsyncError(f"no version {version}: the server's newest is {current.version}")
    try:
        delta = with_retries(lambda: api.get(since=version))
    except HistoryGone as error:
        raise MemsyncError(
            f"version {version} is older than the history the server keeps"
        ) from error
    assert delta is not None
    changed = {*delta.entry_checksums, *delta.deleted}
    memory = Memory(api.repo, version, EPOCH)
    at: str | None = None
    texts: dict[str, object] = {}
    for key in sorted(current.entry_checksums):
        if key not in changed:
            text = current.texts.get(key)
            ok = isinstance(text, str) and entry_checksum(text) == current.entry_checksums[key]
            texts[key] = text if ok else None
    for key in sorted(changed):
        if key_problem(key) is not None:
            texts[key] = None
            continue
        rows = _history_rows(api, key)
        at = at or _commit_time(rows, version)
        older = [row for row in rows if row["version"] <= version]
        if not older:
            continue  # written after that version
        row = max(older, key=lambda item: int(item["version"]))
        if row.get("op") == "delete" or not is_checksum(row.get("checksum")):
            continue  # deleted at that version
        found = with_retries(functools.partial(api.version, key, int(row["version"])))
        text = found.get("content")
        ok = isinstance(text, str) and entry_checksum(text) == row["checksum"]
        texts[key] = text if ok else None
    if at is None:
        # Commit N touched only keys unchanged since: they changed after N - 1.
        try:
            before = with_retries(lambda: api.get(since=version - 1))
        except HistoryGone:
            before = None
        if before is not None:
            for key in sorted({*before.entry_checksums, *before.deleted} - changed):
                if key_problem(key) is None:
                    at = _commit_time(_history_rows(api, key), version)
                if at is not None:
                    break
    if at is None:
        raise MemsyncError(f"the server's history does not show version {version}")
    memory.updated_at = at
    for key in sorted(texts):
        _admit(memory, key, texts[key])
    return memory


def manifest_bytes(memory: Memory) -> bytes:
    """The exact bytes of `snapshot.json` for `memory`."""
    checksums = {key: entry_checksum(text) for key, text in sorted(memory.texts.items())}
    manifest = {
        "format": FORMAT,
        "repo": memory.repo,
        "version": memory.version,
        "updatedAt": memory.updated_at,
        "checksum": repo_checksum(checksums),
        "entries": checksums,
    }
    return (json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def _current_text(directory: Path, key: str) -> str | None:
    try:
        return read_entry(directory, key)
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None


def export_snapshot(memory: Memory, directory: Path) -> dict[str, Any]:
    """Make `directory` hold exactly `memory`'s entries and manifest.

    Files already holding the right bytes are not rewritten; files the snapshot no
    longer has are removed first. Every target is checked before it is touched: a
    symlink or a non-file in the way is refused, never followed.
    """
    manifest = manifest_bytes(memory).decode()
    wanted = {**memory.texts, MANIFEST: manifest}
    present = scan_team_dir(directory, {}, max_bytes=MAX_MANIFEST_BYTES)
    stale = sorted(
        {*present.checksums, *(row.key for row in present.skipped if row.reason != "hidden")}
        - set(wanted)
    )
    for key in stale:
        safe_target(directory, key)
    # Stale files go first: a note `d` that became a folder `d/` must make room.
    for key in stale:
        remove_entry(directory, key)
    for key in wanted:
        safe_target(directory, key)
    written: list[str] = []
    for key, text in sorted(wanted.items()):
        if _current_text(directory, key) != text:
            write_entry(directory, key, text)
            if key != MANIFEST:
                written.append(key)
    return {
        "snapshot": str(directory),
        "repo": memory.repo,
        "version": memory.version,
        "updatedAt": memory.updated_at,
        "entries": len(memory.texts),
        "written": written,
        "removed": stale,
        "skipped": memory.skipped,
        "note": memory.note,
    }


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        if os.lstat(safe_target(directory, MANIFEST)).st_size > MAX_MANIFEST_BYTES:
            raise InvalidSnapshot(f"{directory / MANIFEST} is too large")
        raw = json.loads(read_entry(directory, MANIFEST))
    except FileNotFoundError as error:
        raise InvalidSnapshot(f"no snapshot at {directory} (no {MANIFEST})") from error
    except (UnsafeKey, OSError, UnicodeDecodeError, ValueError) as error:
        raise InvalidSnapshot(f"{directory / MANIFEST} cannot be read: {error}") from error
    if not isinstance(raw, dict):
        raise InvalidSnapshot(f"{directory / MANIFEST} is not a JSON object")
    return raw


def read_snapshot(directory: Path) -> Snapshot:
    """The verified snapshot in `directory`; InvalidSnapshot says what is wrong."""
    where = directory / MANIFEST
    raw = _manifest(directory)
    repo, version, updated_at = raw.get("repo"), raw.get("version"), raw.get("updatedAt")
    checksum, entries = raw.get("checksum"), raw.get("entries")
    if raw.get("format") != FORMAT:
        raise InvalidSnapshot(f"{where}: unknown format {raw.get('format')!r}")
    if not (repo is None or isinstance(repo, str)):
        raise InvalidSnapshot(f"{where}: repo is not a string")
    if not (version is None or (type(version) is int and version >= 0)):
        raise InvalidSnapshot(f"{where}: version is not a number")
    if not isinstance(updated_at, str) or _WIRE_TIME.fullmatch(updated_at) is None:
        raise InvalidSnapshot(f"{where}: updatedAt is not a UTC time")
    if not isinstance(entries, dict) or not all(is_checksum(v) for v in entries.values()):
        raise InvalidSnapshot(f"{where}: entries is not a map of checksums")
    for key in entries:
        problem = key_problem(key)
        if problem is not None or _hidden(key) or key == MANIFEST:
            raise InvalidSnapshot(f"{where}: refusing key {key!r}: {problem or 'reserved name'}")
    if checksum != repo_checksum(entries):
        raise InvalidSnapshot(f"{where}: checksum does not match its entries")
    # A server may allow larger notes than a push does: the manifest's checksums decide.
    found = scan_team_dir(directory, {}, max_bytes=MAX_MANIFEST_BYTES)
    for row in found.skipped:
        if row.key == MANIFEST or row.reason == "hidden":
            continue  # hidden files are never entries (a seed does not copy them)
        what = f"{row.reason} ({row.label}, line {row.line})" if row.label else row.reason
        raise InvalidSnapshot(f"{directory}: {row.key}: {what}")
    extra = sorted(set(found.checksums) - set(entries) - {MANIFEST})
    if extra:
        raise InvalidSnapshot(f"{directory}: files not in {MANIFEST}: {', '.join(extra)}")
    texts: dict[str, str] = {}
    for key, expected in sorted(entries.items()):
        if found.checksums.get(key) != expected:
            state = "is missing" if key not in found.checksums else "does not match its checksum"
            raise InvalidSnapshot(f"{directory}: {key} {state}")
        try:
            text = read_entry(directory, key)
        except (OSError, UnsafeKey, UnicodeDecodeError) as error:
            raise InvalidSnapshot(f"{directory}: {key} cannot be read: {error}") from error
        if entry_checksum(text) != expected:
            raise InvalidSnapshot(f"{directory}: {key} does not match its checksum")
        texts[key] = text
    return Snapshot(directory, repo, version, updated_at, checksum, texts)


def _memory_files(memory_dir: Path) -> list[str]:
    """Every non-hidden thing a memory dir holds (files, symlinks, odd names)."""
    found = scan_team_dir(memory_dir, {})
    return sorted(
        {*found.checksums, *(row.key for row in found.skipped if row.reason not in _NOT_MEMORY)}
    )


def _marker(memory_dir: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(read_entry(memory_dir, MARKER))
    except (OSError, UnsafeKey, UnicodeDecodeError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def check(directory: Path, memory_dir: Path) -> Action:
    """What a subagent's memory dir needs from the snapshot in `directory`.

    `initialize`: the dir holds no memory files. `prompt-update`: its marker is missing,
    unreadable, records a different snapshot, or is older than this one. `none`:
    otherwise, and whenever the snapshot is missing or not valid.
    """
    try:
        snapshot = read_snapshot(directory)
    except InvalidSnapshot:
        return "none"
    if not _memory_files(memory_dir):
        return "initialize"
    marker = _marker(memory_dir)
    if marker is None:
        return "prompt-update"
    synced = marker.get("syncedFrom")
    if not isinstance(synced, str) or _WIRE_TIME.fullmatch(synced) is None:
        return "prompt-update"
    if synced < snapshot.updated_at or marker.get("checksum") != snapshot.checksum:
        return "prompt-update"
    return "none"


def _marker_text(snapshot: Snapshot) -> str:
    marker = {
        "syncedFrom": snapshot.updated_at,
        "checksum": snapshot.checksum,
        "repo": snapshot.repo,
        "version": snapshot.version,
    }
    return json.dumps(marker, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def seed(directory: Path, memory_dir: Path, mode: SeedMode, saves: Path) -> dict[str, Any]:
    """Write the snapshot in `directory` into `memory_dir`; record `syncedFrom`.

    `initialize` refuses a dir that already holds memory files. `update` writes every
    snapshot file; `replace` also removes the files the snapshot lacks. A local file
    that is replaced or removed and differs from the snapshot is saved under `saves`
    first. Every path is checked before the first write: a symlink in the way refuses
    the whole seed and changes nothing.
    """
    snapshot = read_snapshot(directory)
    present = _memory_files(memory_dir)
    if mode == "initialize" and present:
        raise ConfigError(
            f"{memory_dir} already holds memory files: `--update` adds the snapshot's files, "
            "`--replace` makes it equal to the snapshot (local changes are saved either way)"
        )
    remove = sorted(set(present) - set(snapshot.texts)) if mode == "replace" else []
    targets: dict[str, Path] = {}
    for key in [*snapshot.texts, *remove, MARKER]:
        targets[key] = safe_target(memory_dir, key)
    saved: list[dict[str, str]] = []
    written: list[str] = []
    for key, text in sorted(snapshot.texts.items()):
        data = text.encode()
        try:
            local: bytes | None = targets[key].read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            local = None
        if local == data:
            continue
        if local is not None:
            copy = save_conflict_copy(saves, key, local)
            saved.append({"key": key, "saved_to": str(copy)})
        write_entry(memory_dir, key, text)
        written.append(key)
    for key in remove:
        with_data = targets[key].read_bytes()
        copy = save_conflict_copy(saves, key, with_data)
        saved.append({"key": key, "saved_to": str(copy)})
        remove_entry(memory_dir, key)
    write_entry(memory_dir, MARKER, _marker_text(snapshot))
    return {
        "action": mode,
        "memory_dir": str(memory_dir),
        "snapshot": str(directory),
        "syncedFrom": snapshot.updated_at,
        "version": snapshot.version,
        "written": written,
        "removed": remove,
        "unchanged": len(snapshot.texts) - len(written),
        "saved": saved,
    }
