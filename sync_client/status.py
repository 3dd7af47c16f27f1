"""`memsync status`: what differs between here, the last sync and the server (how it
differs is `diff`'s)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sync_client.errors import NetworkError
from sync_client.index import deleted as index_deleted
from sync_client.index import team as team_index
from sync_client.index.memory import INDEX_NAME
from sync_client.local import LocalScan
from sync_client.personal import index_scan
from sync_client.push import describe_skip
from sync_client.retries import with_retries
from sync_client.review import proposals as review
from sync_client.state import SyncState, list_conflicts
from sync_client.workspace import Workspace

T = TypeVar("T")

# A person waits for `status` and `diff`: two quick tries, then the offline view.
_INTERACTIVE_ATTEMPTS = 2


def _scan_rows(
    workspace: Workspace,
) -> tuple[dict[str, str], list[dict[str, Any]], set[str], LocalScan]:
    scanned = workspace.scan()
    rows = [describe_skip(workspace, item.as_row()) for item in scanned.skipped]
    return scanned.checksums, rows, {item.key for item in scanned.skipped}, scanned


def remote_or_offline(action: Callable[[], T]) -> tuple[T | None, str | None]:
    """(answer, None), or (None, why) when the server cannot be reached."""
    try:
        return with_retries(action, attempts=_INTERACTIVE_ATTEMPTS), None
    except NetworkError as error:
        return None, str(error)


def _refused_row(state: SyncState, key: str, checksum: str | None) -> dict[str, Any] | None:
    """The server's remembered refusal of this very file (`state.rejected`), or None.

    A refusal of an older text is not this file's: the next push tries the new one.
    """
    rejected = state.rejected if isinstance(state.rejected, dict) else {}
    entry = rejected.get(key)
    if checksum is None or not isinstance(entry, dict) or entry.get("checksum") != checksum:
        return None
    return {"key": key, **{name: value for name, value in entry.items() if name != "checksum"}}


def status(workspace: Workspace) -> dict[str, Any]:
    """Local edits, teammates' edits, conflicts, saved copies and skipped files.

    A local edit the server refused before (and that has not changed since) is listed
    under `refused` with the server's reason, not as new or modified: the next push
    skips it. When the server cannot be reached, the local side is still shown (against
    the bases of the last sync) and `offline` says why the server's side is missing.
    `index` is the team index's health (`memory_index.IndexReport.as_json`);
    `index_blocked` the skip (or refusal) row of `MEMORY.md` when the team's index
    cannot be shared at all, else None.
    """
    local, skipped, skipped_keys, scanned = _scan_rows(workspace)
    state = workspace.state
    bases = state.bases
    answer, offline = remote_or_offline(workspace.api.hashes)
    remote = answer.entry_checksums if answer is not None else None
    if answer is not None:
        review.learn_review(state, workspace.api.last_review)
        index_deleted.follow(
            workspace,
            live=INDEX_NAME in answer.entry_checksums,
            version=answer.version,
            news=True,
        )
        if "sources" in answer.supports:
            _learn_sources(workspace)
        if review.pending_keys(state) and (
            not _watcher_running(workspace) or not review.is_reviewed(state)
        ):
            # No watcher hears the proposal events, or review was switched off (which
            # decides every waiting proposal): one request says what was decided.
            remote_or_offline(lambda: review.learn_outcomes(workspace))
    workspace.save()
    rows: dict[str, list[str]] = {
        name: []
        for name in (
            "modified",
            "new",
            "deleted_locally",
            "server_changed",
            "both_changed",
            "deleted_on_server",
        )
    }
    refused: list[dict[str, Any]] = []
    proposed: list[str] = []
    index = team_index.health(
        workspace.team_dir, index_scan(workspace, scanned), workspace.state_dir
    )
    # The server's answer, when there is one, says whether the team has an index now.
    team_deleted = index_deleted.current(state.index_deleted, bases if remote is None else remote)
    index_report = {**index.as_json(), "team_deleted": team_deleted}
    known = set(local) | set(bases) | set(remote or {}) | set(state.deleted_on_server)
    for key in sorted(known):
        if key in state.deleted_on_server:
            rows["deleted_on_server"].append(key)
            continue
        if key in skipped_keys:
            continue  # listed under skipped, with its reason
        here, base = local.get(key), bases.get(key)
        there = base if remote is None else remote.get(key)
        if here == there:
            continue
        if review.waiting(state, key, here):
            if key in review.pending_keys(state):
                proposed.append(key)
            continue  # (a rejected one is listed under `rejected`)
        refusal = None if here == base else _refused_row(state, key, here)
        if refusal is not None:
            refused.append(refusal)
        elif here != base and there != base and here is not None:
            rows["both_changed"].append(key)
        elif here != base:
            label = "deleted_locally" if here is None else "new" if base is None else "modified"
            rows[label].append(key)
        else:
            rows["server_changed"].append(key)
    return {
        **rows,
        "conflicts": [
            {"key": key, "saved_to": str(path), "when": when}
            for when, key, path in list_conflicts(workspace.state_dir)
        ],
        "skipped": skipped,
        "refused": refused,
        "offline": offline,
        "index": index_report,
        "index_blocked": team_index.blocked([*skipped, *refused]),
        "stale_notes": stale_notes(workspace),
        **_review_rows(workspace, proposed),
    }


def _watcher_running(workspace: Workspace) -> bool:
    from sync_client.state import read_watch_state

    watcher = read_watch_state(workspace.state_dir)
    return bool(watcher and watcher.get("running"))


def _review_rows(workspace: Workspace, proposed: list[str]) -> dict[str, Any]:
    """A reviewed repo's part of `status`: this person's proposals waiting (`proposed`:
    `{key, id, at}`), those rejected (`review.rejected_records`), and `review`
    (`{on, reviewer, pending}`: a reviewer's count of proposals that wait). A repo that
    is not reviewed and never was adds nothing, so its answer is as before."""
    state = workspace.state
    rejected = review.rejected_records(state)
    if not (review.is_reviewed(state) or proposed or rejected):
        return {}
    proposed += [
        key
        for key, record in review.pending_keys(state).items()
        # A delete or a restore: the file here is not what was proposed.
        if record.get("checksum") is None and key not in proposed
    ]
    return {
        "proposed": [
            {"key": key, "id": state.proposals[key].get("id"), "at": state.proposals[key].get("at")}
            for key in proposed
        ],
        "rejected": rejected,
        "review": state.review,
    }


def _learn_sources(workspace: Workspace) -> None:
    """The writers' commits of the notes (`GET /provenance`), kept as their written-at
    records so `freshness.stale_notes` compares teammates' notes from them."""
    from sync_client.freshness.sources import learn

    try:
        sources, _ = remote_or_offline(workspace.api.sources)
    except Exception:  # a refusal or an odd answer: the status does not fail for a hint
        return
    if sources is not None:
        learn(workspace.team_dir, workspace.state_dir, sources)


def stale_notes(workspace: Workspace) -> int | None:
    """How many notes `memsync stale` lists (cite changed code, or expired), from its
    cached answer while HEAD and the notes are unchanged; None outside a git checkout.
    A private memory folder's count leaves out its `team/` (the team dir's notes)."""
    from sync_client.config.git import git_root
    from sync_client.freshness.stale_notes import stale_kinds_cached

    checkout = git_root(Path.cwd())
    if checkout is None:
        return None
    team_dir, state_dir = workspace.team_dir, workspace.state_dir
    return len(stale_kinds_cached(checkout, team_dir, state_dir, workspace.api.hidden_prefix))
