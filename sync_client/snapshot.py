"""Snapshot seeding for subagents: committed, deterministic copies of the team memory.

    memory_from_team_dir(workspace) -> Memory      the local team dir's syncable files
    memory_from_server(api, version) -> Memory     the server's current or a past version
    export_snapshot(memory, directory) -> dict     write the snapshot folder, exactly
    read_snapshot(directory) -> Snapshot           every key and checksum verified
    agent_memory_dir(cwd, env, agent, scope) -> Path   Claude Code's memory dir of an agent
    check(directory, memory_dir) -> str            "none" | "initialize" | "prompt-update"
    seed(directory, memory_dir, mode, saves) -> dict   initialize, update or replace
    merge_outcome(base, local, snapshot) -> str    the three-way rule of one note (pure)

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

A seed records in the memory dir's marker (`.snapshot-synced.json`) the checksum of
every note of the snapshot it seeded from (`entries`): the base of the next `update`,
which merges each note three ways. A note only the subagent changed keeps its change,
a note only the snapshot changed takes the snapshot's, and a note both changed takes
the snapshot's with the subagent's text saved first. Without a usable record (a marker
from before `entries`, none at all, or one of another repo) the base is empty, which is
the two-way rule: every differing note is saved and replaced, and no note is removed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memsync_protocol.checksums import (
    entry_checksum,
    is_checksum,
    matches_any_definition,
    repo_checksum,
)
from memsync_protocol.keys import key_problem, text_problem
from scanner import scan_text
from sync_client.answers import HistoryGone
from sync_client.api import Api
from sync_client.claude_code import (
    AGENT_MEMORY_SNAPSHOTS,
    AgentMemoryScope,
    agent_memory_location,
)
from sync_client.config import git_root, state_home, user_home
from sync_client.errors import ConfigError, MemsyncError
from sync_client.local import scan_team_dir
from sync_client.retries import with_retries
from sync_client.state import save_conflict_copy
from sync_client.team_files import UnsafeKey, read_entry, remove_entry, safe_target, write_entry
from sync_client.workspace import Workspace

MANIFEST = "snapshot.json"
MARKER = ".snapshot-synced.json"
FORMAT = 1
# Format 1's `checksum` (in snapshot.json and the seed marker) is the repo checksum by
# definition 1, whatever definition servers use now: snapshots already committed stay valid.
SNAPSHOT_CHECKSUM = 1
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
# What a seed did to one note. `unchanged` (already the snapshot's) and `own` (only the
# subagent has it) are not listed in a seed's result: nothing happened to them.
Outcome = Literal[
    "unchanged",
    "own",
    "added",  # new in the snapshot: written
    "updated",  # the snapshot changed it, the subagent had not: the snapshot's written
    "kept-local-edit",  # the subagent changed it, the snapshot had not: left as it is
    "kept-local-removal",  # the subagent removed it, the snapshot had not changed it
    "restored",  # the subagent removed it, the snapshot changed it: the snapshot's written
    "saved-copy",  # both changed it: the subagent's saved, then the snapshot's written
    "removed",  # the snapshot removed it, the subagent had not changed it
    "kept-removed-in-snapshot",  # the snapshot removed it, the subagent had changed it
]
# The outcomes that write the snapshot's text, and the one that saves the local file first.
_WRITES: frozenset[Outcome] = frozenset({"added", "updated", "restored", "saved-copy"})
# The scope `--scope` means when it is not given: the one beside the snapshot (see docs).
DEFAULT_SCOPE: AgentMemoryScope = "project"


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


def _contained_dir(
    base: Path,
    parts: tuple[str, ...],
    *,
    create: bool,
    error: type[MemsyncError] = InvalidSnapshot,
) -> Path:
    """`base/parts...`, refusing (with `error`) any part that is a symlink or not a
    directory.

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
            raise error(f"refusing {path}: it is a symbolic link")
        if not stat.S_ISDIR(mode):
            raise error(f"refusing {path}: it is not a directory")
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
    return _contained_dir(root, (*AGENT_MEMORY_SNAPSHOTS, agent), create=create)


def agent_memory_dir(
    cwd: Path, env: Mapping[str, str], agent: str, scope: AgentMemoryScope, *, create: bool = False
) -> Path:
    """The memory dir Claude Code gives a subagent of type `agent` in `scope`.

    `user`: below Claude Code's config root (`CLAUDE_CONFIG_DIR`, else `~/.claude`, from
    the environment only). `project` and `local`: below the top folder of the current
    repository (the git root, as `snapshot_dir` finds it). Nothing is read from the
    repository to decide it. A folder on the way below that base that is a symlink or
    not a directory is refused (ConfigError), never followed; `create` makes the
    missing ones, one at a time.
    """
    agent_type(agent)
    home = user_home(env)
    if scope == "user":
        project = home  # not used: the user scope lives below the config root
    else:
        root = git_root(cwd)
        if root is None:
            raise ConfigError(
                f"{cwd} is not inside a git repository; pass --memory-dir DIR or --scope user"
            )
        project = root
    base, parts = agent_memory_location(scope, agent, project, home, env)
    if create:
        base.mkdir(parents=True, exist_ok=True)
    return _contained_dir(base, parts, create=create, error=ConfigError)


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
    if checksums == state.bases and matches_any_definition(state.etag, checksums):
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
        "checksum": repo_checksum(checksums, SNAPSHOT_CHECKSUM),
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
    if checksum != repo_checksum(entries, SNAPSHOT_CHECKSUM):
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
    """The marker a seed leaves: which snapshot, and each of its notes' checksums (the
    base the next `--update` merges against)."""
    marker = {
        "syncedFrom": snapshot.updated_at,
        "checksum": snapshot.checksum,
        "repo": snapshot.repo,
        "version": snapshot.version,
        "entries": {key: entry_checksum(text) for key, text in sorted(snapshot.texts.items())},
    }
    return json.dumps(marker, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def recorded_base(marker: Mapping[str, Any] | None, repo: str | None) -> dict[str, str] | None:
    """The checksums the last seed recorded (key -> checksum), or None when `marker`
    holds no usable record: none at all, one from before `entries` was recorded, one
    whose entries do not add up to its own `checksum` or name a key a snapshot may not
    hold, or one of another repo than `repo` (a user-scope memory dir seen from two
    repositories must not lose one's notes to the other's snapshot)."""
    if marker is None:
        return None
    entries = marker.get("entries")
    if not isinstance(entries, dict) or marker.get("repo") != repo:
        return None
    for key, checksum in entries.items():
        if not is_checksum(checksum) or key_problem(key) is not None:
            return None
        if _hidden(key) or key == MANIFEST:
            return None
    if marker.get("checksum") != repo_checksum(entries, SNAPSHOT_CHECKSUM):
        return None
    return {str(key): str(checksum) for key, checksum in entries.items()}


def merge_outcome(base: str | None, local: str | None, snapshot: str | None) -> Outcome:
    """What `--update` does to one note, from three checksums (None: absent there):
    `base` what the last seed seeded, `local` the memory dir's, `snapshot` the new one's.

    Only the subagent changed it: theirs stays (`kept-local-edit`, `kept-local-removal`,
    or `own` for a note only it has). Only the snapshot changed it: the snapshot's
    (`added`, `updated`, `removed`). Both changed it, differently: the snapshot's, the
    subagent's saved first (`saved-copy`; `restored` when the subagent had removed it,
    so there is nothing to save); but a note the snapshot removed and the subagent
    changed stays as the subagent left it (`kept-removed-in-snapshot`), since removing
    it would only lose that change. With an empty base this is the two-way rule.
    """
    if local == snapshot:
        return "unchanged"
    if snapshot == base:
        if base is None:
            return "own"
        return "kept-local-removal" if local is None else "kept-local-edit"
    if local == base:
        if snapshot is None:
            return "removed"
        return "added" if local is None else "updated"
    if snapshot is None:
        return "kept-removed-in-snapshot"
    return "restored" if local is None else "saved-copy"


@dataclass(frozen=True)
class _Step:
    """One note of a seed: its outcome, and whether the local file is saved first."""

    key: str
    outcome: Outcome
    save: bool = False


def _file_ancestor(memory_dir: Path, key: str) -> str | None:
    """The folder on `key`'s path that is a regular file (a note), if one is; then the
    key itself cannot exist. Symlinks are left for `safe_target` to refuse."""
    segments = key.split("/")
    for index in range(1, len(segments)):
        prefix = "/".join(segments[:index])
        try:
            mode = os.lstat(memory_dir.joinpath(*segments[:index])).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISREG(mode):
            return prefix
        if not stat.S_ISDIR(mode):
            return None
    return None


def _local_bytes(memory_dir: Path, key: str) -> bytes | None:
    """The memory dir's bytes of `key`, None when it has none (also when a note or a
    folder takes its place). A symlink on the way, or a target that is not a regular
    file, raises UnsafeKey: each folder is checked before it is looked into."""
    problem = key_problem(key)
    if problem is not None:
        raise UnsafeKey(key, problem)
    segments = key.split("/")
    path = memory_dir
    for index, segment in enumerate(segments):
        path = path / segment
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(mode):
            raise UnsafeKey(key, f"{'/'.join(segments[: index + 1])!r} is a symbolic link")
        last = index == len(segments) - 1
        if (not last and stat.S_ISREG(mode)) or (last and stat.S_ISDIR(mode)):
            return None
    return safe_target(memory_dir, key).read_bytes()


def _checksum_of(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return entry_checksum(data.decode("utf-8"))
    except UnicodeDecodeError:
        # Matches no checksum a snapshot holds: such a file always differs.
        return "not-utf8:" + hashlib.sha256(data).hexdigest()


def _only_removed_below(memory_dir: Path, key: str, removed: set[str]) -> bool:
    """Whether `key` is a folder holding only files that are about to be removed (so
    it is gone once they are: `remove_entry` removes the folders it empties)."""
    top = memory_dir.joinpath(*key.split("/"))
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            return False
    except OSError:
        return False
    pending = [top]
    while pending:
        folder = pending.pop()
        for child in os.scandir(folder):
            mode = child.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                pending.append(Path(child.path))
                continue
            name = Path(child.path).relative_to(memory_dir).as_posix()
            if not stat.S_ISREG(mode) or name not in removed:
                return False
    return True


def _check_targets(memory_dir: Path, steps: list[_Step]) -> None:
    """Refuse the seed (UnsafeKey) before its first write when a note cannot be
    written or removed safely. A note whose way is blocked only by notes this seed
    removes first (a note `d` that became a folder `d/`, or the other way) is checked
    again when it is written."""
    removed = {step.key for step in steps if step.outcome == "removed"}
    for step in steps:
        if step.outcome == "removed":
            safe_target(memory_dir, step.key)
        elif step.outcome in _WRITES:
            ancestor = _file_ancestor(memory_dir, step.key)
            if ancestor in removed or _only_removed_below(memory_dir, step.key, removed):
                continue
            safe_target(memory_dir, step.key)
    safe_target(memory_dir, MARKER)


def _plan(
    mode: SeedMode,
    snapshot: dict[str, str],
    base: Mapping[str, str],
    local: Mapping[str, str | None],
    present: list[str],
) -> list[_Step]:
    """Every note's step, sorted by key. `snapshot` and `base`: key -> checksum;
    `local`: the memory dir's checksum of each key of either (None: absent)."""
    steps: list[_Step] = []
    if mode == "update":
        for key in sorted({*snapshot, *base}):
            outcome = merge_outcome(base.get(key), local.get(key), snapshot.get(key))
            steps.append(_Step(key, outcome, save=outcome == "saved-copy"))
        return steps
    # initialize (an empty dir) and replace: the memory dir becomes the snapshot.
    for key in sorted({*snapshot, *(present if mode == "replace" else [])}):
        have, want = local.get(key), snapshot.get(key)
        if want is None:
            steps.append(_Step(key, "removed", save=True))
        elif have == want:
            steps.append(_Step(key, "unchanged"))
        elif have is None:
            steps.append(_Step(key, "added"))
        else:
            steps.append(_Step(key, "saved-copy", save=True))
    return steps


def seed(
    directory: Path,
    memory_dir: Path,
    mode: SeedMode,
    saves: Path,
    *,
    make_dir: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Write the snapshot in `directory` into `memory_dir`; record what was seeded.

    `initialize` refuses a dir that already holds memory files. `update` merges each
    note three ways against what the last seed recorded (`merge_outcome`); `replace`
    makes the dir equal to the snapshot. A local file that is replaced, or that
    `replace` removes, is saved under `saves` first. Every path is checked before the
    first write: a symlink in the way refuses the whole seed and changes nothing.
    `make_dir`, when given, creates the memory dir just before the first write.
    """
    snapshot = read_snapshot(directory)
    present = _memory_files(memory_dir)
    if mode == "initialize" and present:
        raise ConfigError(
            f"{memory_dir} already holds memory files: `--update` adds the snapshot's files, "
            "`--replace` makes it equal to the snapshot (local changes are saved either way)"
        )
    wanted = {key: entry_checksum(text) for key, text in snapshot.texts.items()}
    recorded = recorded_base(_marker(memory_dir), snapshot.repo) if mode == "update" else None
    base = recorded or {}
    data: dict[str, bytes | None] = {}
    for key in sorted({*wanted, *base, *(present if mode == "replace" else [])}):
        data[key] = _local_bytes(memory_dir, key)
    local = {key: _checksum_of(value) for key, value in data.items()}
    steps = _plan(mode, wanted, base, local, present)
    _check_targets(memory_dir, steps)
    if make_dir is not None:
        make_dir()  # the marker is always written: the dir is needed either way
    saved: dict[str, str] = {}
    # Removals first: a note `d` that became a folder `d/` must make room.
    removals = [step for step in steps if step.outcome == "removed"]
    writes = [step for step in steps if step.outcome in _WRITES]
    for step in [*removals, *writes]:
        local_data = data[step.key]
        if step.save and local_data is not None:
            saved[step.key] = str(save_conflict_copy(saves, step.key, local_data))
        if step.outcome == "removed":
            remove_entry(memory_dir, step.key)
        else:
            write_entry(memory_dir, step.key, snapshot.texts[step.key])
    write_entry(memory_dir, MARKER, _marker_text(snapshot))
    listed = [step for step in steps if step.outcome not in ("unchanged", "own")]
    return {
        "action": mode,
        "memory_dir": str(memory_dir),
        "snapshot": str(directory),
        "syncedFrom": snapshot.updated_at,
        "version": snapshot.version,
        "merge": None if mode != "update" else "three-way" if recorded is not None else "two-way",
        "written": [step.key for step in steps if step.outcome in _WRITES],
        "removed": [step.key for step in steps if step.outcome == "removed"],
        "unchanged": sum(1 for step in steps if step.outcome == "unchanged"),
        "saved": [{"key": key, "saved_to": path} for key, path in sorted(saved.items())],
        "notes": [
            {"key": step.key, "outcome": step.outcome}
            | ({"saved_to": saved[step.key]} if step.key in saved else {})
            for step in listed
        ],
    }


_OUTCOME_WORDS: dict[str, str] = {
    "added": "added: {key}",
    "updated": "updated: {key} (the snapshot changed it; you had not)",
    "kept-local-edit": "kept local edit: {key} (the snapshot did not change it)",
    "kept-local-removal": "kept local removal: {key} (the snapshot did not change it)",
    "restored": "restored: {key} (you had removed it; the snapshot changed it)",
    "removed": "removed: {key} (the snapshot removed it; you had not changed it)",
    "kept-removed-in-snapshot": "kept: {key} (the snapshot removed it, but you had changed it)",
}


def seed_lines(result: Mapping[str, Any]) -> list[str]:
    """The human lines of a seed's result: a summary, then one line per note."""
    how = f", {result['merge']}" if result.get("merge") else ""
    lines = [
        f"seeded {result['memory_dir']} ({result['action']}{how}): "
        f"{len(result['written'])} written, {len(result['removed'])} removed, "
        f"{result['unchanged']} unchanged"
    ]
    if result.get("merge") == "two-way":
        lines.append(
            "note: no record of what the last seed wrote (a first --update, or a marker "
            "from an older memsync): every note that differs from the snapshot was saved "
            "and replaced, and none was removed"
        )
    for note in result["notes"]:
        if "saved_to" in note:
            lines.append(f"saved: {note['key']}: your copy is at {note['saved_to']}")
        elif note["outcome"] in _OUTCOME_WORDS:
            lines.append(_OUTCOME_WORDS[note["outcome"]].format(key=note["key"]))
    return lines
