"""`memsync status`, `diff` and `rm`: what differs, how, and deleting for the team."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import key_problem
from sync_client.answers import StaleBase, WriteResult
from sync_client.errors import ConfigError, NetworkError, UnknownKey
from sync_client.index import deleted as index_deleted
from sync_client.index import team as team_index
from sync_client.index.memory import INDEX_NAME, is_index_key
from sync_client.local import LocalScan
from sync_client.personal import index_scan
from sync_client.push import describe_skip
from sync_client.retries import with_retries
from sync_client.review import proposals as review
from sync_client.review.wire import Proposed
from sync_client.state import SyncState, list_conflicts, save_conflict_copy
from sync_client.team_files import read_entry, remove_entry, safe_target, write_entry
from sync_client.textdiff import unified
from sync_client.workspace import Workspace

T = TypeVar("T")
# The `supports` name of a server that answers `GET ?key=K` (docs/protocol.md 3.2).
ONE_KEY = "key"


# A person waits for `status` and `diff`: two quick tries, then the offline view.
_INTERACTIVE_ATTEMPTS = 2


def _skip_rows(workspace: Workspace) -> tuple[dict[str, str], list[dict[str, Any]], set[str]]:
    checksums, rows, keys, _ = _scan_rows(workspace)
    return checksums, rows, keys


def _scan_rows(
    workspace: Workspace,
) -> tuple[dict[str, str], list[dict[str, Any]], set[str], LocalScan]:
    scanned = workspace.scan()
    rows = [describe_skip(workspace, item.as_row()) for item in scanned.skipped]
    return scanned.checksums, rows, {item.key for item in scanned.skipped}, scanned


def _remote_or_offline(action: Callable[[], T]) -> tuple[T | None, str | None]:
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
    answer, offline = _remote_or_offline(workspace.api.hashes)
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
            _remote_or_offline(lambda: review.learn_outcomes(workspace))
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
        sources, _ = _remote_or_offline(workspace.api.sources)
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


def _base_text(workspace: Workspace, key: str, base: str | None, server: dict[str, str]) -> str:
    """The text the base checksum names: from the base store, the server's text, or an
    older version from the server's history."""
    if base is None:
        return ""
    kept = workspace.objects.get(base)
    if kept is not None:
        return kept
    if key in server and entry_checksum(server[key]) == base:
        return server[key]
    for item in reversed(with_retries(lambda: workspace.api.history(key))):
        if item.get("checksum") == base:
            version = with_retries(
                functools.partial(workspace.api.version, key, int(item["version"]))
            )
            return str(version.get("content") or "")
    return ""


def diff(workspace: Workspace, key: str | None) -> dict[str, Any]:
    """Per differing key (or one key): local against its base, and against the server.

    Offline, only the local side is shown (against the base store) and `offline` says
    why; `against_server` is then null. One key is asked for alone when the server
    supports it; otherwise (and for every differing key) the whole repo is fetched.
    """
    if key is not None:
        problem = key_problem(key)
        if problem is not None:
            raise ConfigError(f"invalid key {key!r}: {problem}")
    local, _, _ = _skip_rows(workspace)
    bases = workspace.state.bases
    server: dict[str, str]
    server_sums: dict[str, str]
    if key is not None and ONE_KEY in (workspace.state.supports or ()):
        # One key from a server that can answer for one key: a small request, not
        # the whole repo. A key the server could never hold is not asked about.
        one_key = key

        def ask() -> tuple[str, str] | None:
            return workspace.api.entry(one_key)

        found, offline = _remote_or_offline(ask)
        online = offline is None
        server = {} if found is None else {key: found[1]}
        server_sums = {} if found is None else {key: found[0]}
    else:
        remote, offline = _remote_or_offline(lambda: workspace.api.get())
        online = remote is not None
        server = remote.texts if remote is not None else {}
        server_sums = remote.entry_checksums if remote is not None else {}
    if not online:
        server_sums = dict(bases)
    copies = _latest_copies(workspace)
    if key is not None:
        _known_here_or_there(workspace, key, online, server_sums, copies)
        keys = [key]
    else:
        keys = sorted(
            k for k in set(local) | set(server_sums) if local.get(k) != server_sums.get(k)
        )
    out = []
    for name in keys:
        mine = read_entry(workspace.team_dir, name) if name in local else ""
        base = bases.get(name)
        against_base = unified(
            _base_text(workspace, name, base, server), mine, f"base/{name}", f"local/{name}"
        )
        against_server = (
            unified(server.get(name, ""), mine, f"server/{name}", f"local/{name}")
            if online
            else None
        )
        copy = copies.get(name)
        out.append(
            {
                "key": name,
                "changed_locally": local.get(name) != base,
                "changed_on_server": server_sums.get(name) != base if online else None,
                "against_base": against_base,
                "against_server": against_server,
                "conflict_copy": str(copy) if copy is not None else None,
                "copy_against_local": _copy_against_local(workspace, name, copy),
            }
        )
    workspace.save()
    return {"diffs": out, "offline": offline}


def _latest_copies(workspace: Workspace) -> dict[str, Path]:
    """Each key's newest saved conflict copy (`memsync conflicts` lists them)."""
    return {key: path for _, key, path in list_conflicts(workspace.state_dir)}


def _known_here_or_there(
    workspace: Workspace,
    key: str,
    online: bool,
    server_sums: dict[str, str],
    copies: dict[str, Path],
) -> None:
    """Raise `UnknownKey` when `key` is nowhere: no file (synced or skipped), no base,
    not on the server (when it answered), no saved copy, no modify/delete conflict."""
    state = workspace.state
    if (
        os.path.lexists(workspace.team_dir / key)
        or key in state.bases
        or key in server_sums
        or key in state.deleted_on_server
        or key in copies
    ):
        return
    where = "here, in the last sync or on the server" if online else "here or in the last sync"
    raise UnknownKey(f"{key}: no such note {where}; `memsync status` lists the notes", key)


def _copy_against_local(workspace: Workspace, key: str, copy: Path | None) -> str | None:
    """The saved conflict copy of `key` against its file (`+` lines: the copy's), or
    None without a copy."""
    if copy is None:
        return None
    saved = copy.read_bytes().decode("utf-8", errors="replace")
    try:
        mine = read_entry(workspace.team_dir, key)
    except (FileNotFoundError, UnicodeDecodeError):
        mine = ""
    return unified(mine, saved, f"local/{key}", f"saved/{key}")


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
    local, _, _, scanned = _scan_rows(workspace)
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
