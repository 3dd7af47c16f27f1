"""`memsync resolve` and `memsync restore`: settling conflicts, bringing versions back.

Both change what the team dir holds on the person's word, so both keep every text they
displace: a local edit that `restore --force` or `resolve --theirs` replaces is saved
under the state dir first, as a pull conflict saves it.
"""

from __future__ import annotations

from typing import Any, Literal

from memsync_protocol.keys import key_problem
from sync_client.errors import ConfigError, LocalEditInTheWay
from sync_client.pull import pull
from sync_client.push import push
from sync_client.retries import with_retries
from sync_client.review.proposals import forget, record_proposal
from sync_client.review.wire import Proposed
from sync_client.state import (
    list_conflicts,
    now_stamp,
    save_conflict_copy,
    settle_conflict_copies,
)
from sync_client.team_files import remove_entry, safe_target, write_entry
from sync_client.workspace import Workspace

Side = Literal["mine", "theirs"]


def _checked_key(key: str) -> None:
    problem = key_problem(key)
    if problem is not None:
        raise ConfigError(f"invalid key {key!r}: {problem}")


def _unpushed_edit(workspace: Workspace, key: str) -> bool:
    """Whether the team dir holds bytes for `key` that the server has not seen."""
    scanned = workspace.scan()
    present = key in scanned.checksums or any(item.key == key for item in scanned.skipped)
    return present and scanned.checksums.get(key) != workspace.state.bases.get(key)


def restore(workspace: Workspace, key: str, version: int, *, force: bool) -> dict[str, Any]:
    """Make `version` of `key` current for the team, then pull it.

    An unpushed local edit of `key` is never displaced silently: without `force` this
    refuses (nothing changes); with it, the local text is saved first and reported.
    """
    _checked_key(key)
    saved: str | None = None
    in_the_way = _unpushed_edit(workspace, key)
    if in_the_way and not force:
        raise LocalEditInTheWay(
            f"{key} has local edits that are not pushed; push them first, or pass "
            "--force to save them under the state dir and restore anyway"
        )
    # The server first: a refused restore (a wrong version) must leave the file alone.
    from sync_client import provenance
    from sync_client.freshness import report as freshness

    workspace.api.provenance = provenance.for_write("cli", freshness.checkout_head(workspace))
    written = with_retries(lambda: workspace.api.restore_reviewed(key, version))
    if isinstance(written, Proposed):
        # A reviewed repo: nothing changed for the team yet, so nothing here either.
        record_proposal(workspace.state, written, {})
        workspace.state.proposals[key] = {
            "id": written.id,
            "checksum": None,
            "op": "put",
            "at": now_stamp(),
            "status": "pending",
        }
        workspace.save()
        return {"key": key, "version": None, "saved_to": None, "proposal": written.id}
    if in_the_way:
        target = safe_target(workspace.team_dir, key)
        saved = str(save_conflict_copy(workspace.state_dir, key, target.read_bytes()))
        remove_entry(workspace.team_dir, key)
        workspace.state.deleted_on_server.pop(key, None)
    pulled = pull(workspace)
    return {"key": key, "version": written.version, "saved_to": saved, "pull": pulled.as_json()}


def resolve(workspace: Workspace, key: str, side: Side) -> dict[str, Any]:
    """Settle `key`'s conflict: keep `mine` (sent to the team) or take `theirs`.

    A modify/delete conflict (deleted for the team, edited here): `mine` uploads the
    file again, `theirs` saves it under the state dir and removes it. A conflict a pull
    settled for the server (your text saved as a copy): `mine` puts your saved text back
    and uploads it, `theirs` keeps the server's text. Either way the saved copies of
    `key` are no longer listed (they stay under the state dir's `settled/`).
    """
    _checked_key(key)
    state = workspace.state
    forget(state, key)  # a rejected proposal of `key` is settled with its copy
    copies = [path for _, copy_key, path in list_conflicts(workspace.state_dir) if copy_key == key]
    result: dict[str, Any] = {"key": key, "side": side, "saved_to": None, "push": None}
    if key in state.deleted_on_server:
        if side == "theirs":
            target = safe_target(workspace.team_dir, key)
            if target.exists():
                save_conflict_copy(workspace.state_dir, key, target.read_bytes())
                result["saved_to"] = str(settle_conflict_copies(workspace.state_dir, key)[-1])
                remove_entry(workspace.team_dir, key)
            del state.deleted_on_server[key]
            workspace.save()
            return result
        del state.deleted_on_server[key]
        result["push"] = push(workspace, only={key}).as_json()
        return result
    if not copies:
        raise ConfigError(f"nothing to resolve for {key}: `memsync status` lists conflicts")
    if side == "mine":
        if _unpushed_edit(workspace, key):
            raise LocalEditInTheWay(
                f"{key} has local edits made after the conflict; push or move them first"
            )
        try:
            mine = copies[-1].read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"the saved copy {copies[-1]} is not UTF-8 text; copy it back by hand"
            ) from None
        write_entry(workspace.team_dir, key, mine)
    settled = settle_conflict_copies(workspace.state_dir, key)
    result["saved_to"] = str(settled[-1]) if settled else None
    if side == "mine":
        result["push"] = push(workspace, only={key}).as_json()
    else:
        workspace.save()
    return result
