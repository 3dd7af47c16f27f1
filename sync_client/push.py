"""`memsync push`: upload local edits, never overwriting a teammate's edit unseen.

DESIGN.md 4.3: the delta is every key whose local checksum differs from its base; it
goes up in deterministic byte-bounded batches, each conditional on per-key
`baseChecksums` (memsync servers) or on `If-Match` (servers with only the anchor
contract). A refused batch is sorted with the hashes view: settled keys are done,
keys changed on both sides are conflicts (left for the next pull to settle), the
rest are sent again, for at most two rounds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from typing import Any

from scanner import scan_text
from sync_client.api import PreconditionFailed, RemoteState, StaleBase, with_retries
from sync_client.batching import make_batches
from sync_client.errors import ConflictRoundsExhausted, TooManyEntries
from sync_client.local import read_entry
from sync_client.plan import allowed_keys, push_delta, sort_after_refusal
from sync_client.state import now_stamp
from sync_client.workspace import Workspace
from sync_server.checksums import entry_checksum

CONFLICT_ROUNDS = 2
BASE_PRECONDITION = "base-precondition"


@dataclass
class PushResult:
    """What a push did (the `--json` shape of the client issue)."""

    uploaded: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0

    def as_json(self) -> dict[str, Any]:
        """The JSON object `memsync push --json` prints."""
        return asdict(self)


def _mode(workspace: Workspace) -> tuple[bool, RemoteState | None]:
    """(per-key bases offered?, the hashes view if it had to be fetched to know).

    Asked once, then remembered. A never-written repo answers 404 with no `supports`:
    nothing is learned, and that push uses If-Match on the empty checksum, which is
    safe with any server.
    """
    supports = workspace.state.supports
    if supports is not None:
        return BASE_PRECONDITION in supports, None
    remote = with_retries(workspace.api.hashes)
    if remote.version > 0:
        workspace.state.supports = sorted(remote.supports)
    return BASE_PRECONDITION in remote.supports, remote


def _settle(
    workspace: Workspace,
    keys: list[str],
    local_now: dict[str, str],
    remote: RemoteState,
    result: PushResult,
) -> list[str]:
    """Sort keys against the server (DESIGN 4.3 step 5); return those to send."""
    state = workspace.state
    sorted_keys = sort_after_refusal(keys, local_now, state.bases, remote.entry_checksums)
    for key in sorted_keys.done:
        state.bases[key] = local_now[key]
    result.conflicts.extend(sorted_keys.conflicts)
    return sorted_keys.retry


def push(
    workspace: Workspace,
    *,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
    only: Collection[str] | None = None,
) -> PushResult:
    """Push once (`only`: just these keys); the state is saved when it returns (also
    after a failure). A key deleted for the team while edited here (a modify/delete
    conflict) is not offered until `memsync resolve` settles it."""
    state = workspace.state
    api = workspace.api
    result = PushResult()
    scanned = workspace.scan()
    local = scanned.checksums
    result.skipped = [item.as_row() for item in scanned.skipped]
    delta = [
        key
        for key in push_delta(local, state.bases)
        if key not in state.deleted_on_server and (only is None or key in only)
    ]
    if state.max_entries is not None and delta:
        server_keys = with_retries(api.hashes).entry_checksums
        fits = allowed_keys(local, server_keys, state.max_entries)
        for key in delta:
            if key not in fits:
                result.skipped.append({"key": key, "reason": "too-many-entries"})
        delta = [key for key in delta if key in fits]
    if dry_run or not delta:
        if dry_run:
            texts = {key: read_entry(workspace.team_dir, key) for key in delta}
            bases = {key: state.bases.get(key) for key in delta}
            result.uploaded = delta
            result.batches = len(make_batches(texts, base_checksums=bases))
        workspace.save()
        return result
    try:
        _upload(workspace, delta, local, result, progress)
    finally:
        state.last_push = now_stamp()
        workspace.save()
    return result


def _read_checked(
    workspace: Workspace, keys: list[str], scanned: dict[str, str], result: PushResult
) -> dict[str, str]:
    """Texts to upload. A file edited since the scan is scanned again before it leaves;
    one that vanished is left for the next push."""
    texts: dict[str, str] = {}
    for key in keys:
        try:
            text = read_entry(workspace.team_dir, key)
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        if entry_checksum(text) != scanned.get(key):
            findings = scan_text(text)
            if findings:
                result.skipped.extend(
                    {
                        "key": key,
                        "reason": "secret",
                        "rule": item.rule,
                        "label": item.label,
                        "line": item.line,
                    }
                    for item in findings
                )
                continue
        texts[key] = text
    return texts


def _upload(
    workspace: Workspace,
    pending: list[str],
    scanned: dict[str, str],
    result: PushResult,
    progress: Callable[[int, int], None] | None,
) -> None:
    state = workspace.state
    api = workspace.api
    use_bases, remote = _mode(workspace)
    anchor: str | None = None
    if not use_bases:
        # If-Match alone would let a fresh ETag overwrite a teammate's edit unseen:
        # sort the keys against the server first, exactly as after a refusal.
        remote = remote if remote is not None else with_retries(api.hashes)
        anchor = remote.checksum
        local_now = {key: scanned[key] for key in pending}
        pending = _settle(workspace, pending, local_now, remote, result)
    total = len(pending)
    learned_limit = False
    for round_number in range(CONFLICT_ROUNDS + 1):
        if not pending:
            return
        texts = _read_checked(workspace, pending, scanned, result)
        pending = sorted(texts)
        local_now = {key: entry_checksum(text) for key, text in texts.items()}
        bases = {key: state.bases.get(key) for key in pending} if use_bases else None
        refused: list[str] = []
        for batch in make_batches(texts, base_checksums=bases):
            result.batches += 1
            try:
                written = with_retries(functools.partial(api.put, batch.body, if_match=anchor))
            except (StaleBase, PreconditionFailed):
                refused.extend(batch.keys)
                continue
            except TooManyEntries as error:
                state.max_entries = error.max_entries
                if learned_limit:
                    raise
                learned_limit = True
                server_keys = with_retries(api.hashes).entry_checksums
                fits = allowed_keys(set(state.bases) | set(texts), server_keys, error.max_entries)
                for key in batch.keys:
                    if key in fits:
                        refused.append(key)
                    else:
                        result.skipped.append({"key": key, "reason": "too-many-entries"})
                continue
            for key in batch.keys:
                state.bases[key] = local_now[key]
            result.uploaded.extend(batch.keys)
            if written.supports is not None:
                state.supports = sorted(written.supports)
            # Our own commit right after the version we pulled: the pull ETag may move
            # with it. Otherwise a teammate committed in between, and moving it would
            # hide their change from the next pull.
            if state.version is not None and written.version == state.version + 1:
                state.version = written.version
                state.etag = written.checksum
            if not use_bases:
                anchor = written.checksum
            if progress is not None:
                progress(len(result.uploaded), total)
        if not refused:
            return
        if round_number == CONFLICT_ROUNDS:
            break
        remote = with_retries(api.hashes)
        if not use_bases:
            anchor = remote.checksum
        pending = _settle(workspace, refused, local_now, remote, result)
        if not pending:
            return
    raise ConflictRoundsExhausted("the server kept changing during the push; try again in a moment")
