"""`memsync pull`: bring the server's entries into the team dir, losing no edit.

`If-None-Match` first (a 304 costs one round trip), `?since=` when a version is known,
a full GET otherwise or after a 410. Per key, `plan.plan_pull` decides; this module
only carries the plan out. Every key from the server is validated before anything
touches the disk, and every write stays inside the team dir (`local.write_entry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sync_client.api import HistoryGone, RemoteState, with_retries
from sync_client.local import (
    UnsafeKey,
    cache_record,
    remove_entry,
    safe_target,
    write_entries,
    write_entry,
)
from sync_client.plan import PullKind, plan_pull
from sync_client.state import now_stamp, save_conflict_copy
from sync_client.workspace import Workspace
from sync_server.checksums import entry_checksum
from sync_server.keys import key_problem, text_problem

# From this many files on, one sync for all beats one fsync each.
BULK_WRITES = 16


@dataclass
class PullResult:
    """What a pull did (the `--json` shape of DESIGN's issue)."""

    written: list[str] = field(default_factory=list)
    kept_local: list[str] = field(default_factory=list)
    conflicts: list[dict[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    not_modified: bool = False
    refused: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The JSON object `memsync pull --json` prints."""
        return asdict(self)


def _fetch(workspace: Workspace) -> RemoteState | None:
    state = workspace.state
    api = workspace.api
    if state.etag is not None and state.version is not None:
        try:
            return with_retries(lambda: api.get(if_none_match=state.etag, since=state.version))
        except HistoryGone:
            pass
    return with_retries(lambda: api.get(if_none_match=state.etag))


def _remember_write(
    workspace: Workspace, key: str, checksum: str, stat: tuple[int, int, int]
) -> None:
    # A file written just now is "racily clean": cache_record makes the next scan read
    # it once, so an edit within the same mtime tick is not missed.
    size, mtime_ns, inode = stat
    workspace.state.stat_cache[key] = cache_record(size, mtime_ns, inode, checksum)


def _write_all(
    workspace: Workspace, texts: dict[str, str], server: dict[str, str], result: PullResult
) -> OSError | None:
    """Write the pulled texts; record each success; return the first I/O failure.

    Many files are written with one sync for all (`write_entries`); a few, each with
    its own fsync, which is cheaper than flushing the whole file system.
    """
    team_dir = workspace.team_dir
    outcomes: dict[str, tuple[int, int, int] | UnsafeKey | OSError]
    if len(texts) >= BULK_WRITES:
        outcomes = write_entries(team_dir, texts)
    else:
        outcomes = {}
        for key, text in texts.items():
            try:
                outcomes[key] = write_entry(team_dir, key, text)
            except (UnsafeKey, OSError) as error:
                outcomes[key] = error
    failure: OSError | None = None
    for key, outcome in sorted(outcomes.items()):
        if isinstance(outcome, UnsafeKey):
            result.refused.append({"key": key, "reason": f"unsafe path: {outcome.reason}"})
        elif isinstance(outcome, OSError):
            failure = failure or outcome
        else:
            _remember_write(workspace, key, server[key], outcome)
            workspace.state.bases[key] = server[key]
            result.written.append(key)
    return failure


def pull(workspace: Workspace, *, progress: Callable[[int, int], None] | None = None) -> PullResult:
    """Pull once; the state is saved when it returns. `progress(done, total)` per key."""
    result = PullResult()
    remote = _fetch(workspace)
    state = workspace.state
    if remote is None:
        result.not_modified = True
        state.last_pull = now_stamp()
        workspace.save()
        return result
    local = workspace.scan()
    skipped_here = {item.key for item in local.skipped}
    server: dict[str, str] = {}
    for key, checksum in remote.entry_checksums.items():
        problem = key_problem(key)
        text = remote.texts.get(key)
        if problem is not None:
            result.refused.append({"key": key, "reason": f"unsafe key: {problem}"})
        elif not isinstance(text, str) or text_problem(text) is not None:
            result.refused.append({"key": key, "reason": "text is missing or not storable"})
        elif entry_checksum(text) != checksum:
            result.refused.append({"key": key, "reason": "text does not match its checksum"})
        else:
            server[key] = checksum
    deleted = (
        [key for key in remote.deleted if key_problem(key) is None]
        if remote.is_delta
        else [key for key in state.bases if key not in remote.entry_checksums]
    )
    team_dir = workspace.team_dir
    actions = plan_pull(local.checksums, state.bases, server, deleted)
    writes: dict[str, PullKind] = {}
    for done, action in enumerate(actions, start=1):
        key = action.key
        if progress is not None:
            progress(done, len(actions))
        try:
            if action.kind in (PullKind.WRITE, PullKind.CONFLICT):
                # A file here that the pull replaces (a conflict, or a file the scan
                # skipped): never lose an edit, the local bytes go to conflicts/ first.
                # Plain writes are checked by the writer itself (no second realpath).
                if action.kind is PullKind.CONFLICT or key in skipped_here:
                    target = safe_target(team_dir, key)
                    if target.exists():
                        saved = save_conflict_copy(workspace.state_dir, key, target.read_bytes())
                        result.conflicts.append({"key": key, "saved_to": str(saved)})
                writes[key] = action.kind
            elif action.kind is PullKind.SAME:
                state.bases[key] = server[key]
            elif action.kind is PullKind.KEEP_LOCAL:
                result.kept_local.append(key)
            elif action.kind is PullKind.DELETE:
                remove_entry(team_dir, key)
                state.bases.pop(key, None)
                state.stat_cache.pop(key, None)
                result.deleted.append(key)
            elif action.kind is PullKind.FORGET:
                state.bases.pop(key, None)
            elif action.kind is PullKind.KEEP_DELETED:
                # Deleted for the team but changed here: keep it; a push offers it again.
                state.bases.pop(key, None)
                result.kept_local.append(key)
        except UnsafeKey as error:
            result.refused.append({"key": key, "reason": f"unsafe path: {error.reason}"})
    failure = _write_all(workspace, {key: remote.texts[key] for key in writes}, server, result)
    result.written = [key for key in result.written if writes[key] is PullKind.WRITE]
    if failure is not None:
        workspace.save()
        raise failure
    state.etag = remote.checksum
    state.version = remote.version
    if remote.supports:
        state.supports = sorted(remote.supports)
    state.last_pull = now_stamp()
    workspace.save()
    return result
