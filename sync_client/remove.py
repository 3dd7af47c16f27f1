"""`memsync rm`: delete a note for the team, with the index lines that lead only to it."""

from __future__ import annotations

from typing import Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import key_problem
from sync_client.answers import StaleBase, WriteResult
from sync_client.errors import ConfigError
from sync_client.index import deleted as index_deleted
from sync_client.index import team as team_index
from sync_client.index.memory import INDEX_NAME, is_index_key
from sync_client.retries import with_retries
from sync_client.review import proposals as review
from sync_client.review.wire import Proposed
from sync_client.state import save_conflict_copy
from sync_client.team_files import remove_entry, safe_target, write_entry
from sync_client.workspace import Workspace

# The `supports` name of a server that deletes keys in a PUT (one commit, docs/protocol.md 3.3).
PUT_DELETES = "put-deletes"


def remove(
    workspace: Workspace, key: str, *, keep_index: bool = False, delete_index: bool = False
) -> dict[str, Any]:
    """Delete `key` for the team, then here; an unpushed local edit is saved first.

    The index lines that link only to `key` go in the same commit (unless
    `keep_index`), when the server takes deletes in a PUT and no teammate changed the
    index since the last sync. Otherwise the key is deleted alone and the lines are
    removed here only, for the next push (`index_pending`). An index (`MEMORY.md`) is
    the team's way to every note: it is deleted only with `delete_index`.
    """
    from sync_client import provenance
    from sync_client.freshness import report as freshness

    workspace.api.provenance = provenance.for_write("cli", freshness.checkout_head(workspace))
    problem = key_problem(key)
    if problem is not None:
        raise ConfigError(f"invalid key {key!r}: {problem}")
    if is_index_key(key) and not delete_index:
        raise ConfigError(index_refusal(key))
    # The scan first: a team dir it cannot read (a bad `.memsyncignore`) changes nothing.
    scanned = workspace.scan()
    local = scanned.checksums
    state = workspace.state
    changes = {} if keep_index else team_index.without_links_to(workspace.team_dir, scanned, key)
    changes.pop(key, None)
    if review.is_reviewed(state) and not review.is_reviewer(state):
        answer, together = _delete_reviewed(workspace, key, changes)
        if isinstance(answer, Proposed):
            return _proposed_delete(workspace, key, answer, changes if together else {})
        review.learn_review(state, None)  # committed after all: a reviewer now, or review off
        written = answer
    else:
        written, together = _delete_with_index(workspace, key, changes)
    target = safe_target(workspace.team_dir, key)
    saved = None
    if target.exists():
        here = local.get(key)
        # A file the scan left out (skipped, or ignored) may hold anything: keep a copy.
        if here is None or here != state.bases.get(key):
            saved = str(save_conflict_copy(workspace.state_dir, key, target.read_bytes()))
        remove_entry(workspace.team_dir, key)
    state.bases.pop(key, None)
    state.stat_cache.pop(key, None)
    state.deleted_on_server.pop(key, None)
    for index_key, (text, _) in sorted(changes.items()):
        write_entry(workspace.team_dir, index_key, text)
        state.stat_cache.pop(index_key, None)
        if together:
            workspace.set_base(index_key, text, entry_checksum(text))
    # Our delete right after the version we pulled: the pull position may move with
    # it (as after a push); otherwise a teammate's commit in between must stay visible.
    if state.version is not None and written.version == state.version + 1:
        state.version = written.version
        state.etag = written.checksum
    if key == INDEX_NAME:
        index_deleted.learn(workspace, written.version)  # who deleted it, for every line
    workspace.save()
    return {
        "key": key,
        "version": written.version,
        "saved_to": saved,
        "index_lines_removed": [
            {"index": index_key, "lines": lines}
            for index_key, (_, lines) in sorted(changes.items())
        ],
        "index_pending": bool(changes) and not together,
    }


def index_refusal(key: str) -> str:
    """Why `memsync rm` of an index needs `--delete-team-index`: what it would do."""
    which = "the team's index" if key == INDEX_NAME else f"the team's index {key}"
    return (
        f"refused: `memsync rm {key}` deletes {which} for every teammate (their agents "
        f"then find no note through it); pass --delete-team-index to do that "
        f"(`memsync restore {key}` brings it back)"
    )


def _delete_reviewed(
    workspace: Workspace, key: str, changes: dict[str, tuple[str, list[int]]]
) -> tuple[WriteResult | Proposed, bool]:
    """The delete in a repo that may be reviewed (not by a reviewer): with its index
    edits in one change when it can, so the proposal a reviewer accepts leaves no line
    leading nowhere; (the answer, whether the index edits went with it)."""
    api = workspace.api
    state = workspace.state
    if changes and key in state.bases and _put_deletes(workspace):
        entries = {index_key: text for index_key, (text, _) in changes.items()}
        bases = {index_key: state.bases.get(index_key) for index_key in changes}
        try:
            return with_retries(lambda: api.put_and_delete_reviewed(entries, bases, [key])), True
        except StaleBase:
            pass  # a teammate changed the index: the delete goes alone
    return with_retries(lambda: api.delete_reviewed(key)), False


def _proposed_delete(
    workspace: Workspace, key: str, answer: Proposed, changes: dict[str, tuple[str, list[int]]]
) -> dict[str, Any]:
    """A delete proposed for review: the file and the index stay here until a reviewer
    accepts it (then the pull deletes the file and brings the index without its lines);
    `index_lines_removed` names the lines the proposal takes out with it."""
    review.record_proposal(workspace.state, answer, {key: None})
    workspace.save()
    return {
        "key": key,
        "version": None,
        "saved_to": None,
        "index_lines_removed": [
            {"index": index_key, "lines": lines}
            for index_key, (_, lines) in sorted(changes.items())
        ],
        "index_pending": False,
        "proposal": answer.id,
    }


def _put_deletes(workspace: Workspace) -> bool:
    """Whether the server deletes keys in a PUT (asked once when the state cannot say)."""
    state = workspace.state
    if state.supports is None:
        remote = with_retries(workspace.api.hashes)
        if remote.version > 0:
            state.supports = sorted(remote.supports)
    return PUT_DELETES in (state.supports or ())


def _delete_with_index(
    workspace: Workspace, key: str, changes: dict[str, tuple[str, list[int]]]
) -> tuple[WriteResult, bool]:
    """Delete `key` on the server, with the index edits in the same commit when it can;
    (the write, whether the index edits went with it)."""
    api = workspace.api
    state = workspace.state
    if changes and _put_deletes(workspace):
        entries = {index_key: text for index_key, (text, _) in changes.items()}
        bases = {index_key: state.bases.get(index_key) for index_key in changes}
        try:
            return with_retries(lambda: api.put_and_delete(entries, bases, [key])), True
        except StaleBase:
            pass  # a teammate changed the index: it is merged by the next sync
    return with_retries(lambda: api.delete(key)), False
