"""Reviewed team memory, the client's side (docs/protocol.md 3.12, docs/users.md).

In a reviewed repo a teammate who is not a reviewer proposes: the server keeps the write
until a reviewer accepts it. This module keeps this person's proposals in the sync state
(`SyncState.proposals`, one record per key) and carries out their outcomes:

- a proposed key whose file still holds the proposed text is "waiting for review": a
  push never sends it again (a pending proposal costs no request); an edit makes a new
  proposal, which replaces the old one on the server;
- `learn_outcomes` asks the server once (`GET /proposals?status=all`) what became of
  the pending ones: a pull does it while some are pending, the watcher when an event
  says one was decided;
- accepted: the team's text is the proposed one, so the next pull finds the file in
  sync and the record goes (reported once, with the reviewer's name);
- rejected: `restore_rejected` saves the proposed text as a conflict copy (exactly as a
  pull's conflict saves one), writes the team's text back (or removes a file the team
  does not have) and keeps the record, with who rejected it and why, for `status`, the
  watcher's log and the session-start block, until `memsync resolve KEY` or a new
  proposal of that key.

The reviewer's side (`review_list`, `review_one`) adds a diff against the team's current
text to each proposal. Library code: it returns data; `cli/review.py` words it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync_protocol.checksums import entry_checksum
from sync_client.state import now_stamp, save_conflict_copy
from sync_client.textdiff import unified

if TYPE_CHECKING:
    from sync_client.review.wire import Proposed
    from sync_client.state import SyncState
    from sync_client.workspace import Workspace

PENDING = "pending"
ACCEPTED = "accepted"
REJECTED = "rejected"


def is_reviewed(state: SyncState) -> bool:
    """Whether the server last said this repo is reviewed."""
    return isinstance(state.review, dict) and state.review.get("on") is True


def is_reviewer(state: SyncState) -> bool:
    """Whether this token reviews this repo (its writes publish directly)."""
    return is_reviewed(state) and bool(state.review and state.review.get("reviewer"))


def learn_review(state: SyncState, review: dict[str, Any] | None) -> None:
    """Remember a read's `review` field (None: the repo is not reviewed, or no longer)."""
    state.review = dict(review) if review is not None else None


def learn_review_event(state: SyncState, on: bool, reviewer: bool) -> bool:
    """Remember the events stream's word on the setting (it opens with it and follows
    every change); whether it changed what this client believed."""
    before = (is_reviewed(state), is_reviewer(state))
    if on:
        review = dict(state.review) if isinstance(state.review, dict) else {"pending": 0}
        review.update({"on": True, "reviewer": reviewer})
        state.review = review
    else:
        state.review = None
    return before != (on, on and reviewer)


def learn_elsewhere(workspace: Workspace, item: dict[str, Any]) -> list[dict[str, Any]]:
    """A proposal of this person made elsewhere (another machine of theirs, the web
    page) was decided (`item`: the proposal as the server answers it). A rejected one is
    kept on record here, as this machine's own would be (`status`, the session-start
    block), until `memsync resolve KEY`; nothing here is restored, since its text never
    was here. Returns `{key, id, status, by, reason, elsewhere}` per key."""
    state = workspace.state
    status = item.get("status")
    if status not in (ACCEPTED, REJECTED):
        return []
    rows: list[dict[str, Any]] = []
    for entry in item.get("keys") or []:
        key = entry.get("key") if isinstance(entry, dict) else None
        if not isinstance(key, str):
            continue
        op = "delete" if entry.get("op") == "delete" else "put"
        row = {
            "key": key,
            "id": item.get("id"),
            "status": status,
            "by": item.get("decidedBy"),
            "reason": item.get("reason"),
            "op": op,
            "saved_to": None,
            "restored": True,
            "elsewhere": True,
        }
        rows.append(row)
        record = state.proposals.get(key)
        if status != REJECTED or (isinstance(record, dict) and record.get("status") == PENDING):
            continue  # (a pending one of this machine is newer: its own outcome comes)
        state.proposals[key] = {
            "id": item.get("id"),
            "checksum": entry.get("checksum"),
            "op": op,
            "at": item.get("at") or now_stamp(),
            "status": REJECTED,
            "by": item.get("decidedBy"),
            "reason": item.get("reason"),
            "decided_at": item.get("decidedAt") or now_stamp(),
            "restored_at": now_stamp(),
            "elsewhere": True,
        }
    if status == REJECTED and rows:
        workspace.save()
    return rows


def pending_keys(state: SyncState) -> dict[str, dict[str, Any]]:
    """key -> record of this person's proposals still waiting for review."""
    return {
        key: record
        for key, record in state.proposals.items()
        if isinstance(record, dict) and record.get("status") == PENDING
    }


def waiting(state: SyncState, key: str, local: str | None) -> bool:
    """Whether `key` holds the very text already proposed (pending, or rejected and not
    yet restored): it is not sent again until it changes."""
    record = state.proposals.get(key)
    if not isinstance(record, dict) or record.get("checksum") != local:
        return False
    return record.get("status") == PENDING or (
        record.get("status") == REJECTED and "restored_at" not in record
    )


def edited_while_pending(state: SyncState, local: dict[str, str]) -> bool:
    """Whether a file of a pending proposal now holds another text (or is gone)."""
    return any(
        local.get(key) != record.get("checksum") for key, record in pending_keys(state).items()
    )


def record_proposal(state: SyncState, answer: Proposed, sent: dict[str, str | None]) -> None:
    """A 202: the keys `sent` (key -> proposed checksum, None for a delete) wait for
    review under `answer.id`. Keys the server carried over from an older proposal of
    this author (it replaced that one) move to the new id too."""
    at = now_stamp()
    for key, checksum in sent.items():
        state.proposals[key] = {
            "id": answer.id,
            "checksum": checksum,
            "op": "put" if checksum is not None else "delete",
            "at": at,
            "status": PENDING,
        }
    for key in answer.keys:
        record = state.proposals.get(key)
        if key not in sent and isinstance(record, dict) and record.get("status") == PENDING:
            record["id"] = answer.id
    review = dict(state.review) if isinstance(state.review, dict) else {}
    review.update({"on": True, "reviewer": False})
    state.review = review


def learn_outcomes(workspace: Workspace) -> list[dict[str, Any]]:
    """Ask the server once what became of this person's pending proposals; record each
    decision. Returns `{key, id, status, by, reason}` per key newly decided."""
    from sync_client.retries import with_retries

    state = workspace.state
    pending = pending_keys(state)
    if not pending:
        return []
    answer = with_retries(lambda: workspace.api.proposals(status="all"))
    learn_review(
        state, {**(state.review or {}), **answer["review"]} if answer["review"]["on"] else None
    )
    by_id = {item["id"]: item for item in answer["proposals"]}
    decided: list[dict[str, Any]] = []
    for key, record in sorted(pending.items()):
        item = by_id.get(record.get("id"))
        # A proposal replaced by a newer one (an MCP write, another machine of the
        # same person) lives on under the newer id.
        hops = 0
        while item is not None and item["status"] == "replaced" and hops < 8:
            newer = item.get("replacedBy")
            record["id"] = newer
            item = by_id.get(newer)
            hops += 1
        if item is None or item["status"] not in (ACCEPTED, REJECTED):
            continue
        if item["status"] == ACCEPTED:
            _accepted_is_base(workspace, key, record, item.get("acceptedVersion"))
        record.update(
            {
                "status": item["status"],
                "by": item.get("decidedBy"),
                "reason": item.get("reason"),
                "decided_at": item.get("decidedAt") or now_stamp(),
            }
        )
        decided.append(
            {
                "key": key,
                "id": record["id"],
                "status": item["status"],
                "by": record["by"],
                "reason": record["reason"],
            }
        )
    workspace.save()
    return decided


def _accepted_is_base(
    workspace: Workspace, key: str, record: dict[str, Any], version: object
) -> None:
    """An accepted proposal's text is where the team's text now comes from: it becomes
    the key's base (from the store, where the push kept it, or from the file while it
    still holds it), as a push's commit would have made it.
    So the author's next edit is a plain fast-forward (or a merge against what a
    reviewer's merge made of it), never "changed on the server too" for their own text.
    A pull that already brought the accept's version (`version`) has set the base."""
    from sync_client.team_files import UnsafeKey, read_entry

    proposed = record.get("checksum")
    if not isinstance(proposed, str):
        return  # a delete: the pull that brings it settles the base
    pulled = workspace.state.version
    if isinstance(version, int) and pulled is not None and pulled >= version:
        return
    text = workspace.objects.get(proposed)  # kept by the push that proposed it
    if text is None:
        try:
            text = read_entry(workspace.team_dir, key)
        except (OSError, UnsafeKey, UnicodeDecodeError):
            return
    if entry_checksum(text) == proposed:
        workspace.set_base(key, text, proposed)


def restore_rejected(workspace: Workspace) -> list[dict[str, Any]]:
    """Put the team's text back for every rejected proposal still in its file: the
    proposed text is saved first as a conflict copy. Returns `{key, id, by, reason,
    saved_to}` per key restored (saved_to None: the file had changed since, kept)."""
    from sync_client.team_files import UnsafeKey, read_entry, remove_entry, write_entry
    from sync_client.verdicts import cache_record

    state = workspace.state
    restored: list[dict[str, Any]] = []
    for key, record in sorted(state.proposals.items()):
        if not (
            isinstance(record, dict)
            and record.get("status") == REJECTED
            and "restored_at" not in record
        ):
            continue
        record["restored_at"] = now_stamp()
        try:
            here: str | None = read_entry(workspace.team_dir, key)
        except FileNotFoundError:
            here = None
        except (UnsafeKey, UnicodeDecodeError, OSError):
            continue
        same = (here is None and record.get("checksum") is None) or (
            here is not None and entry_checksum(here) == record.get("checksum")
        )
        row = {
            "key": key,
            "id": record.get("id"),
            "by": record.get("by"),
            "reason": record.get("reason"),
            "saved_to": None,
            "restored": True,
            "op": record.get("op", "put"),
        }
        if same and here is not None:
            saved = save_conflict_copy(workspace.state_dir, key, here.encode("utf-8"))
            record["saved_to"] = row["saved_to"] = str(saved)
            base = state.bases.get(key)
            team_text = workspace.objects.get(base) if base is not None else None
            if base is None:
                remove_entry(workspace.team_dir, key)
                state.stat_cache.pop(key, None)
                record["removed"] = row["removed"] = True
            elif team_text is not None:
                size, mtime_ns, inode = write_entry(workspace.team_dir, key, team_text)
                state.stat_cache[key] = cache_record(size, mtime_ns, inode, base)
        restored.append(row)
    if restored:
        workspace.save()
    return restored


def settle_accepted(workspace: Workspace) -> list[dict[str, Any]]:
    """Drop the records of accepted proposals whose file now agrees with the team (the
    pull brought the commit); `{key, id, by}` per key, to say so once. No scan unless
    an accepted record is waiting (a repo that is not reviewed pays nothing)."""
    state = workspace.state
    done: list[dict[str, Any]] = []
    # A pending record whose proposed text is now the team's (the base a pull just
    # set) is in, whoever's answer said so: its outcome may never reach this token
    # (another token of the same person proposed it), and it must not be shown as
    # waiting forever. It goes without a report: who accepted it is not known here.
    settled = [
        key
        for key, record in state.proposals.items()
        if isinstance(record, dict)
        and record.get("status") == PENDING
        and record.get("checksum") is not None
        and record.get("checksum") == state.bases.get(key)
    ]
    for key in settled:
        del state.proposals[key]
    if not any(
        isinstance(record, dict) and record.get("status") == ACCEPTED
        for record in state.proposals.values()
    ):
        if settled:
            workspace.save()
        return done
    local = workspace.scan().checksums
    for key, record in sorted(state.proposals.items()):
        if not isinstance(record, dict) or record.get("status") != ACCEPTED:
            continue
        if local.get(key) == state.bases.get(key):
            done.append({"key": key, "id": record.get("id"), "by": record.get("by")})
            del state.proposals[key]
    if done or settled:
        workspace.save()
    return done


def accepted_rows(settled: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`settle_accepted`'s rows as the `reviewed` rows a pull or a push reports."""
    return [{**row, "status": ACCEPTED, "reason": None, "saved_to": None} for row in settled]


def forget(state: SyncState, key: str) -> None:
    """The person settled `key` (`memsync resolve`): its rejected record goes."""
    record = state.proposals.get(key)
    if isinstance(record, dict) and record.get("status") != PENDING:
        del state.proposals[key]


def rejected_records(state: SyncState) -> list[dict[str, Any]]:
    """`{key, id, by, reason, saved_to, at}` of the rejected proposals still on record."""
    return [
        {
            "key": key,
            "id": record.get("id"),
            "by": record.get("by"),
            "reason": record.get("reason"),
            "saved_to": record.get("saved_to"),
            "restored": "restored_at" in record,
            "removed": bool(record.get("removed")),
            "op": record.get("op", "put"),
            "at": record.get("decided_at"),
            "elsewhere": bool(record.get("elsewhere")),
        }
        for key, record in sorted(state.proposals.items())
        if isinstance(record, dict) and record.get("status") == REJECTED
    ]


def returned(row: dict[str, Any]) -> bool:
    """Whether a rejected row was returned by no reviewer: not published when review
    was switched off (the reason says why)."""
    return not row.get("by")


def rejected_words(row: dict[str, Any]) -> str:
    """`notes/x.md: rejected by carol: "too vague"; your text is saved at ...`; a
    proposal returned when review was switched off says so, and that `--mine` now
    publishes (nobody reviews it any more)."""
    reason = " ".join(str(row.get("reason") or "no reason given").split())
    if returned(row):
        words = f"{row['key']}: proposal {row.get('id')} returned to you: {reason}"
        again = "publishes yours in place of the team's; or merge the two by hand and push"
    else:
        words = f"{row['key']}: rejected by {row['by']}: {reason!r}"
        again = "proposes it again"
    if row.get("elsewhere"):
        words += "; it was proposed from another machine or the web page: nothing here changed"
    elif row.get("op") == "delete":
        words += "; the note stays"
    elif row.get("saved_to"):
        back = (
            "the note is removed here (the team has none)"
            if row.get("removed")
            else ("the team's text is back")
        )
        words += (
            f"; {back} and yours is saved at {row['saved_to']} "
            f"(`memsync resolve {row['key']} --mine` {again})"
        )
    elif row.get("restored"):
        words += "; your later edit is kept here"
    else:
        words += "; the next pull puts the team's text back and saves yours"
    return words


def with_diffs(item: dict[str, Any]) -> dict[str, Any]:
    """A proposal (with texts) plus, per key, `diff`: the proposed text against the
    team's current text (`team/KEY` -> `proposed/KEY`)."""
    keys = []
    for row in item.get("keys") or []:
        team = row.get("teamText") or ""
        mine = row.get("text") if row.get("op") == "put" else ""
        keys.append(
            {
                **row,
                "diff": unified(team, mine or "", f"team/{row['key']}", f"proposed/{row['key']}"),
            }
        )
    return {**item, "keys": keys}


def review_list(workspace: Workspace) -> dict[str, Any]:
    """`memsync review --json`: the pending proposals this token may see, each with its
    diffs and similar notes (one request)."""
    from sync_client.retries import with_retries

    answer = with_retries(lambda: workspace.api.proposals(status="pending", texts=True))
    _remember(workspace, answer, len(answer["proposals"]))
    remember_listed(workspace.state_dir, [item["id"] for item in answer["proposals"]])
    return {**answer, "proposals": [with_diffs(item) for item in answer["proposals"]]}


# The proposals `memsync review` last listed here, by id: what `accept --all` accepts.
LISTED_FILE = "review-listed.json"
# How far `accept --all` follows a chain of replacements (each edit replaces the last).
_MAX_HOPS = 8


def remember_listed(state_dir: Path, ids: list[int]) -> None:
    """Keep the ids a listing showed (a proposal's texts never change under its id: an
    author's new edit makes a new proposal that replaces it), for `accept --all`."""
    from sync_client.durable import atomic_write

    record = {"ids": sorted(ids), "at": now_stamp()}
    atomic_write(state_dir / LISTED_FILE, json.dumps(record).encode("utf-8"), sync=False)


def listed_ids(state_dir: Path) -> list[int] | None:
    """The ids `remember_listed` kept, or None when no listing is on record (or it is
    unreadable: then the reviewer lists again, nothing is guessed)."""
    try:
        record = json.loads((state_dir / LISTED_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    ids = record.get("ids") if isinstance(record, dict) else None
    if not isinstance(ids, list) or not all(
        isinstance(item, int) and not isinstance(item, bool) for item in ids
    ):
        return None
    return ids


def _forget_listed(state_dir: Path) -> None:
    (state_dir / LISTED_FILE).unlink(missing_ok=True)


def _remember(workspace: Workspace, answer: dict[str, Any], pending: int) -> None:
    review = answer["review"]
    learn_review(workspace.state, {**review, "pending": pending} if review["on"] else None)
    workspace.save()


def review_one(workspace: Workspace, proposal_id: int) -> dict[str, Any]:
    """`memsync review show ID`: one proposal with its diffs."""
    from sync_client.retries import with_retries

    return with_diffs(with_retries(lambda: workspace.api.proposal(proposal_id)))


def accept_many(workspace: Workspace, ids: list[int] | None) -> dict[str, Any]:
    """Accept `ids`, each on its own: a conflict on one is reported and the others go
    on. `{accepted: [{id, version}], conflicts: [{id, keys, message}], changed: [{id,
    now, message}], decided: [{id, status, by}]}`; an unknown or decided id stops with
    its error.

    `ids` None (`--all`): the proposals `memsync review` last listed here, and only
    those, as they were listed: one replaced since (the author edited again) is not
    accepted, nor one that arrived since; both are `changed`, naming the proposal to
    look at. One another reviewer decided meanwhile is `decided`. The listing is used
    once; with none on record nothing is accepted (`ConfigError`: list first)."""
    from sync_client.errors import ConfigError, ProposalConflict, ProposalDecided
    from sync_client.retries import with_retries

    api = workspace.api
    changed: list[dict[str, Any]] = []
    decided: list[dict[str, Any]] = []
    from_listing = ids is None
    if ids is None:
        shown = listed_ids(workspace.state_dir)
        if shown is None:
            raise ConfigError(
                "--all accepts the proposals `memsync review` listed: run `memsync review` "
                "first (nothing was accepted)"
            )
        now = with_retries(lambda: api.proposals(status="all"))
        ids, changed, decided = _still_as_listed(shown, now["proposals"])
        _forget_listed(workspace.state_dir)
    accepted: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []
    for number in ids:
        try:
            answer = with_retries(lambda number=number: api.accept(number))  # type: ignore[misc]
        except ProposalConflict as error:
            conflicts.append({"id": number, "keys": error.keys, "message": str(error)})
            continue
        except ProposalDecided as error:
            if not from_listing:
                raise
            # Decided between the look and the accept (or older than the newest the
            # server lists): said, and the others go on.
            if error.status == "replaced":
                changed.append(_changed_row(number, None))
            else:
                decided.append({"id": number, "status": error.status, "by": None})
            continue
        accepted.append({"id": number, "version": answer["version"]})
    return {"accepted": accepted, "conflicts": conflicts, "changed": changed, "decided": decided}


def _changed_row(listed: int, newer: int | None) -> dict[str, Any]:
    look = f"`memsync review show {newer}`" if newer is not None else "`memsync review`"
    replaced = f" (proposal {newer} replaces it)" if newer is not None else ""
    return {
        "id": listed,
        "now": newer,
        "message": f"proposal {listed} changed since you listed it{replaced}: not accepted; "
        f"run {look}",
    }


def _still_as_listed(
    shown: list[int], now: list[dict[str, Any]]
) -> tuple[list[int], list[dict[str, Any]], list[dict[str, Any]]]:
    """Of the ids a listing showed: those still pending (to accept), those replaced
    since (`changed`, with the proposal that replaces them), those another reviewer
    decided (`decided`); plus, as `changed`, pending proposals the listing did not show.
    An id not among the newest the server lists is tried: the server says if it is not
    pending."""
    by_id = {item["id"]: item for item in now}
    pending: list[int] = []
    changed: list[dict[str, Any]] = []
    decided: list[dict[str, Any]] = []
    named: set[int] = set(shown)
    for number in sorted(shown):
        item = by_id.get(number)
        if item is None or item["status"] == PENDING:
            pending.append(number)
            continue
        if item["status"] != "replaced":
            decided.append({"id": number, "status": item["status"], "by": item.get("decidedBy")})
            continue
        newer = item.get("replacedBy")
        hops = 0
        while newer in by_id and by_id[newer]["status"] == "replaced" and hops < _MAX_HOPS:
            newer = by_id[newer].get("replacedBy")
            hops += 1
        newer = newer if isinstance(newer, int) and not isinstance(newer, bool) else None
        changed.append(_changed_row(number, newer))
        if newer is not None:
            named.add(newer)
    for item in sorted(now, key=lambda item: item["id"]):
        if item["status"] == PENDING and item["id"] not in named:
            changed.append(
                {
                    "id": item["id"],
                    "now": item["id"],
                    "message": f"proposal {item['id']} arrived since you listed: not accepted; "
                    f"run `memsync review show {item['id']}`",
                }
            )
    return pending, changed, decided


def reject_one(workspace: Workspace, proposal_id: int, reason: str) -> dict[str, Any]:
    """Reject `proposal_id` with `reason` (checked here first: a refused reason costs no
    request); the proposal as the server answers it."""
    from sync_client.errors import ConfigError
    from sync_client.retries import with_retries
    from sync_client.review.wire import reason_problem

    problem = reason_problem(reason)
    if problem is not None:
        raise ConfigError(problem)
    return with_retries(lambda: workspace.api.reject(proposal_id, reason.strip()))
