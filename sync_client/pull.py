"""`memsync pull`: bring the server's entries into the team dir, losing no edit.

`If-None-Match` first (a 304 costs one round trip), `?since=` when a version is known,
a full GET otherwise or after a 410. A 304 or an empty delta says the server has nothing
new, not that the team dir agrees with it: a key with a base and no local file, or one a
pull could not write earlier, is written again from the base store (or, when its text is
not kept, from a full GET). Per key, `plan.plan_pull` decides; this module only carries
the plan out, merging both-side edits with `merge.merge_notes`. Every key from the
server is validated before anything touches the disk, and every write stays inside the
team dir (`local.write_entry`).

Files are written in chunks, each recorded in the state as it lands: Ctrl-C raises
`Interrupted` with how many were written, and the next pull writes only the rest.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import text_problem
from sync_client.answers import HistoryGone, RemoteState
from sync_client.errors import Interrupted
from sync_client.freshness import report as freshness
from sync_client.index import deleted as index_deleted
from sync_client.index.memory import INDEX_NAME, is_index_key
from sync_client.local import LocalScan
from sync_client.merge import merge_notes
from sync_client.objects import base_texts
from sync_client.plan import PullAction, PullKind, plan_pull
from sync_client.retries import with_retries
from sync_client.review import proposals as review
from sync_client.state import load_state, now_stamp, save_conflict_copy
from sync_client.team_files import (
    UnsafeKey,
    key_problem,
    read_entry,
    remove_entry,
    safe_target,
    write_entries,
    write_entry,
)
from sync_client.transport import DownloadProgress
from sync_client.verdicts import cache_record
from sync_client.workspace import Workspace

# From this many files on, one sync for all beats one fsync each.
BULK_WRITES = 16
# Files written (and recorded) at a time: what Ctrl-C can cost, and the progress step.
WRITE_CHUNK = 256


@dataclass
class PullResult:
    """What a pull did (the `--json` shape).

    `written`: files that now hold the server's text (`restored` among them: written
    again from the base store because the local file was missing); `merged`: both sides
    edited different lines and the file now holds the merge (the next push sends it);
    `merged_additions`: those of `merged` where both sides added lines at the same place
    and both blocks were kept, the server's first;
    `conflicts`: `{key, kind, saved_to}`, kind `edited` (both edited the same lines: the
    server's text was written and yours saved at `saved_to`) or `deleted` (deleted for
    the team while edited here: your file is kept, `saved_to` is null).
    """

    written: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    merged_additions: list[str] = field(default_factory=list)
    kept_local: list[str] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    not_modified: bool = False
    refused: list[dict[str, str]] = field(default_factory=list)
    # A reviewed repo: this person's proposals decided since the last pull, `{key, id,
    # status: accepted|rejected, by, reason, saved_to}` (review/proposals.py).
    reviewed: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The JSON object `memsync pull --json` prints."""
        return asdict(self)


@dataclass(frozen=True)
class _Write:
    """One file a pull writes: its text, and the base (server) text it agrees on."""

    text: str
    base_checksum: str
    base_text: str


def _fetch(
    workspace: Workspace, *, full: bool = False, download: DownloadProgress | None = None
) -> RemoteState | None:
    state = workspace.state
    api = workspace.api
    if full:
        return with_retries(lambda: api.get(progress=download))
    if state.etag is not None and state.version is not None:
        try:
            return with_retries(
                lambda: api.get(if_none_match=state.etag, since=state.version, progress=download)
            )
        except HistoryGone:
            pass
    return with_retries(lambda: api.get(if_none_match=state.etag, progress=download))


def _checked_server_entries(remote: RemoteState, result: PullResult) -> dict[str, str]:
    """key -> checksum of the entries that may touch the disk; the rest are refused."""
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
    return server


def _read_answer(
    workspace: Workspace, remote: RemoteState | None
) -> tuple[PullResult, dict[str, str], dict[str, str], list[str]]:
    """(a fresh result, server checksums, texts, deleted keys) of one answer."""
    result = PullResult(not_modified=remote is None)
    if remote is None:
        return result, {}, {}, []
    server = _checked_server_entries(remote, result)
    state = workspace.state
    if remote.is_delta:
        deleted = [key for key in remote.deleted if key_problem(key) is None]
    else:
        # A full answer names every live key: what it lacks was deleted.
        deleted = [key for key in state.bases if key not in remote.entry_checksums]
        for key in [key for key in state.refused if key not in remote.entry_checksums]:
            del state.refused[key]
    return result, server, dict(remote.texts), deleted


def _nothing_missing(workspace: Workspace) -> bool:
    """Whether every key with a base has something at its path and no write is owed.

    One `lstat` per key, far cheaper than a walk; anything unusual (a missing file, a
    refused write to retry, a modify/delete to watch) takes the full path.
    """
    state = workspace.state
    if state.refused or state.deleted_on_server:
        return False
    root = str(workspace.team_dir)
    return all(os.path.lexists(f"{root}/{key}") for key in state.bases)


def _to_reconcile(workspace: Workspace, local: LocalScan, mentioned: set[str]) -> dict[str, str]:
    """key -> checksum the team dir should hold but does not, for keys the answer omits.

    A key with a base and no local file at all (deleted here, or lost), and a key a
    pull could not write earlier: the server still holds that checksum, because the
    answer does not mention the key.
    """
    state = workspace.state
    present = set(local.checksums) | {item.key for item in local.skipped}
    wanted = {
        key: checksum
        for key, checksum in state.bases.items()
        if key not in present and key not in mentioned
    }
    for key, checksum in state.refused.items():
        if key not in mentioned:
            wanted[key] = checksum
    return wanted


def restore_missing(workspace: Workspace) -> tuple[list[str], list[str]]:
    """Write back, from the base store and without a request, every synced file that is
    missing here (deleted here, or the whole team dir gone): (keys restored, keys whose
    text the store lacks, which a pull fetches). What a running watcher does at once,
    so a local delete never waits for a teammate's commit; the state is saved.

    A local delete is not a team delete: `memsync rm KEY` deletes for the team. A key
    whose base is gone from the saved state (another process, `memsync rm`, deleted it
    for the team since this state was loaded) or moved there is left to the next pull.
    """
    state = workspace.state
    if not state.bases or _nothing_missing(workspace):
        return [], []
    local = workspace.scan()
    missing = _to_reconcile(workspace, local, set(state.refused))
    saved = load_state(workspace.state_dir).bases
    missing = {
        key: checksum
        for key, checksum in missing.items()
        if state.bases.get(key) == checksum and saved.get(key) == checksum
    }
    kept = base_texts(workspace.objects, missing, missing)
    restored: list[str] = []
    for key in sorted(kept):
        try:
            stat = write_entry(workspace.team_dir, key, kept[key])
        except (UnsafeKey, OSError):
            continue  # a folder or a symlink in the way: the next pull says so
        _remember_write(workspace, key, missing[key], stat)
        restored.append(key)
    if restored:
        workspace.save()
    return restored, sorted(set(missing) - set(kept))


def _remember_write(
    workspace: Workspace, key: str, checksum: str, stat: tuple[int, int, int]
) -> None:
    # A file written just now is "racily clean": cache_record makes the next scan read
    # it once, so an edit within the same mtime tick is not missed.
    size, mtime_ns, inode = stat
    workspace.state.stat_cache[key] = cache_record(size, mtime_ns, inode, checksum)


def _write_all(
    workspace: Workspace,
    writes: dict[str, _Write],
    result: PullResult,
    tally: _Tally,
    progress: Callable[[int, int], None] | None,
) -> OSError | None:
    """Write the planned texts in chunks; record each success; return the first I/O
    failure. `progress(files written, files to write)` after each chunk."""
    keys = sorted(writes)
    tally.total = len(keys)
    bulk = len(keys) >= BULK_WRITES
    failure: OSError | None = None
    try:
        for start in range(0, len(keys), WRITE_CHUNK):
            chunk = {key: writes[key] for key in keys[start : start + WRITE_CHUNK]}
            before = len(result.written)
            with _ctrl_c_held():
                chunk_failure = _write_chunk(workspace, chunk, result, bulk=bulk)
                tally.written += len(result.written) - before
            failure = failure or chunk_failure
            if progress is not None:
                progress(min(start + WRITE_CHUNK, len(keys)), len(keys))
    finally:
        if bulk and tally.written:
            # One sync for every chunk, before the state that records them is saved
            # (also after Ctrl-C): a recorded file whose text a crash lost would look
            # like a local edit to push.
            with _ctrl_c_held():
                os.sync()
    return failure


@contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, so a chunk of writes is never cut in half (no
    temp file left beside a note, every file written also recorded).

    Only where Python's own handler is installed, in the main thread: a watcher or an
    embedding program keeps its own.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _write_chunk(
    workspace: Workspace, writes: dict[str, _Write], result: PullResult, *, bulk: bool
) -> OSError | None:
    """Write some planned texts; record each success; return the first I/O failure.

    In `bulk`, files are written by `write_entries` and the caller syncs once for all
    chunks; otherwise each gets its own fsync, cheaper than flushing the file system.
    """
    team_dir = workspace.team_dir
    state = workspace.state
    texts = {key: write.text for key, write in writes.items()}
    outcomes: dict[str, tuple[int, int, int] | UnsafeKey | OSError]
    if bulk:
        outcomes = write_entries(team_dir, texts, sync=False)
    else:
        outcomes = {}
        for key, text in texts.items():
            try:
                outcomes[key] = write_entry(team_dir, key, text)
            except (UnsafeKey, OSError) as error:
                outcomes[key] = error
    failure: OSError | None = None
    for key, outcome in sorted(outcomes.items()):
        write = writes[key]
        if isinstance(outcome, UnsafeKey):
            result.refused.append({"key": key, "reason": f"unsafe path: {outcome.reason}"})
            # Tried again by every pull, from the store, until the obstacle is gone.
            state.refused[key] = write.base_checksum
            workspace.remember_text(write.base_text)
        elif isinstance(outcome, OSError):
            failure = failure or outcome
        else:
            # A plain write holds the server's text, whose checksum is known already.
            same = write.text is write.base_text
            checksum = write.base_checksum if same else entry_checksum(write.text)
            _remember_write(workspace, key, checksum, outcome)
            workspace.set_base(key, write.base_text, write.base_checksum)
            state.refused.pop(key, None)
            result.written.append(key)
    return failure


def pull(
    workspace: Workspace,
    *,
    progress: Callable[[int, int], None] | None = None,
    download: DownloadProgress | None = None,
    outcomes: bool = True,
) -> PullResult:
    """Pull once; the state is saved when it returns. `download(bytes, Content-Length)`
    while the answer arrives, `progress(files written, files to write)` as they land.

    In a reviewed repo, with `outcomes` and proposals of this person pending, the pull
    first asks what became of them (one request; the watcher asks only when an event
    says one was decided): a rejected one's text is saved and the team's put back.

    Ctrl-C raises `Interrupted`, with the files written so far recorded in the state.
    """
    tally = _Tally()
    try:
        if outcomes:
            review.learn_outcomes(workspace)
        restored = review.restore_rejected(workspace)
        result = _pull(workspace, tally, progress, download)
        if review.pending_keys(workspace.state) and not review.is_reviewed(workspace.state):
            # Review was switched off, which publishes or returns every waiting
            # proposal: what became of them is asked once, whatever `outcomes` says.
            review.learn_outcomes(workspace)
            restored += review.restore_rejected(workspace)
        accepted = review.settle_accepted(workspace)
        result.reviewed = review.accepted_rows(accepted)
        result.reviewed += [{**row, "status": "rejected"} for row in restored]
        return result
    except KeyboardInterrupt:
        # Every key recorded so far agrees with its file: keep it for the next pull.
        workspace.save()
        raise Interrupted("wrote", tally.written, tally.total, "memsync pull") from None


@dataclass
class _Tally:
    """How far a pull's writes got, for the message of an interrupted one."""

    written: int = 0
    total: int | None = None


def _pull(
    workspace: Workspace,
    tally: _Tally,
    progress: Callable[[int, int], None] | None,
    download: DownloadProgress | None,
) -> PullResult:
    state = workspace.state
    remote = _fetch(workspace, download=download)
    if remote is None and _nothing_missing(workspace):
        # 304 and every synced file is where it was: the stat cache need not be walked.
        state.last_pull = now_stamp()
        workspace.save()
        return PullResult(not_modified=True)
    local = workspace.scan()
    result, server, texts, deleted = _read_answer(workspace, remote)
    restoring: dict[str, str] = {}
    if remote is None or remote.is_delta:
        # The answer covers only what changed: what the team dir lacks is ours to see.
        mentioned = {*server, *deleted, *(row["key"] for row in result.refused)}
        missing = _to_reconcile(workspace, local, mentioned)
        kept = base_texts(workspace.objects, missing, missing)
        if len(kept) < len(missing):
            # Some text to write again is not in the store: ask for everything once.
            remote = _fetch(workspace, full=True, download=download)
            result, server, texts, deleted = _read_answer(workspace, remote)
        else:
            restoring = {key: missing[key] for key in kept}
            server.update(restoring)
            texts.update(kept)
    _settle_deleted_records(workspace, local, server)
    actions = plan_pull(local.checksums, state.bases, server, deleted)
    version = state.version if remote is None else remote.version
    writes = _carry_out(workspace, local, actions, server, texts, result, version)
    failure = _write_all(workspace, writes, result, tally, progress)
    merged = set(result.merged)
    result.merged = [key for key in result.written if key in merged]
    result.merged_additions = [key for key in result.merged if key in result.merged_additions]
    result.restored = [key for key in result.written if key in restoring]
    result.written = [key for key in result.written if key not in merged]
    if failure is not None:
        workspace.save()
        raise failure
    if remote is not None:
        review.learn_review(state, workspace.api.last_review)
        state.etag = remote.checksum
        state.version = remote.version
        if remote.supports:
            state.supports = sorted(remote.supports)
        # The team's index gone from the server: who deleted it (one request, once).
        index_deleted.follow(
            workspace,
            live=INDEX_NAME in state.bases,
            version=remote.version,
            news=INDEX_NAME in deleted or not remote.is_delta,
        )
    state.last_pull = now_stamp()
    workspace.save()
    freshness.record_written(workspace, [*result.written, *result.merged])
    return result


def _settle_deleted_records(workspace: Workspace, local: LocalScan, server: dict[str, str]) -> None:
    """A modify/delete conflict ends by itself when the file is gone here (the person
    took the deletion) or the key is back on the server (a pull settles it as usual)."""
    records = workspace.state.deleted_on_server
    present = set(local.checksums) | {item.key for item in local.skipped}
    for key in list(records):
        if key in server or key not in present:
            del records[key]


def _carry_out(
    workspace: Workspace,
    local: LocalScan,
    actions: list[PullAction],
    server: dict[str, str],
    texts: dict[str, str],
    result: PullResult,
    version: int | None,
) -> dict[str, _Write]:
    """Do what the plan says except writing; return the files to write."""
    state = workspace.state
    team_dir = workspace.team_dir
    skipped_here = {item.key for item in local.skipped}
    both_edited = [action.key for action in actions if action.kind is PullKind.CONFLICT]
    bases_kept = base_texts(workspace.objects, state.bases, both_edited)
    writes: dict[str, _Write] = {}
    for action in actions:
        key = action.key
        try:
            if action.kind is PullKind.CONFLICT:
                theirs = texts[key]
                mine = read_entry(team_dir, key)
                base = bases_kept.get(key, "" if key not in state.bases else None)
                # Two notes both created from nothing are not one note's additions;
                # two indexes are (each line stands alone).
                union = key in state.bases or is_index_key(key)
                merged = None if base is None else merge_notes(base, mine, theirs, union=union)
                if merged is not None:
                    writes[key] = _Write(merged.text, server[key], theirs)
                    result.merged.append(key)
                    if merged.kept_both_additions:
                        result.merged_additions.append(key)
                    continue
                saved = save_conflict_copy(workspace.state_dir, key, mine.encode("utf-8"))
                result.conflicts.append({"key": key, "kind": "edited", "saved_to": str(saved)})
                writes[key] = _Write(theirs, server[key], theirs)
            elif action.kind is PullKind.WRITE:
                # A file the scan skipped (a secret, not UTF-8...) that the pull replaces:
                # never lose an edit, its bytes go to conflicts/ first. Plain writes are
                # checked by the writer itself (no second realpath).
                if key in skipped_here and state.bases.get(key) == server[key]:
                    # Edited here into a text that cannot be sent (a secret, too large):
                    # the server still holds the base, so the team has nothing new for
                    # it. The local edit stays, reported by every push until it is fixed.
                    result.kept_local.append(key)
                    continue
                if key in skipped_here:
                    target = safe_target(team_dir, key)
                    if target.is_file():
                        copy = save_conflict_copy(workspace.state_dir, key, target.read_bytes())
                        result.conflicts.append(
                            {"key": key, "kind": "edited", "saved_to": str(copy)}
                        )
                writes[key] = _Write(texts[key], server[key], texts[key])
            elif action.kind is PullKind.SAME:
                workspace.set_base(key, texts[key], server[key])
                state.refused.pop(key, None)
            elif action.kind is PullKind.KEEP_LOCAL:
                result.kept_local.append(key)
            elif action.kind is PullKind.DELETE:
                remove_entry(team_dir, key)
                state.bases.pop(key, None)
                state.stat_cache.pop(key, None)
                result.deleted.append(key)
            elif action.kind is PullKind.FORGET:
                state.bases.pop(key, None)
                state.refused.pop(key, None)
            elif action.kind is PullKind.KEEP_DELETED:
                # Deleted for the team but edited here: the file stays, and it is not
                # offered again until the person decides (`memsync resolve`).
                state.bases.pop(key, None)
                state.deleted_on_server[key] = {"version": version, "at": now_stamp()}
                result.conflicts.append({"key": key, "kind": "deleted", "saved_to": None})
        except UnsafeKey as error:
            result.refused.append({"key": key, "reason": f"unsafe path: {error.reason}"})
        except (FileNotFoundError, UnicodeDecodeError):
            # Changed under us since the scan: the next pull looks again.
            continue
    return writes
