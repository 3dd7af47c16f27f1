"""The watcher in a reviewed repo: what a `proposal` event means, and the log lines.

A proposal event (docs/protocol.md 3.12) says a proposal was made or decided. For this
person's own pending proposal a decision is worth one pull (which first asks what was
decided: `pull(outcomes=True)`); the event of a proposal just made costs nothing (no
resend, no request: issue 28 point 4). A reviewer's watcher says once per new proposal
that one waits. The state lives on `watch.RepoWatcher`; this module only decides and
words.
"""

from __future__ import annotations

from typing import Any

from sync_client.review.proposals import is_reviewer, pending_keys, rejected_words
from sync_client.state import SyncState

PENDING = "pending"


def proposal_action(
    state: SyncState, proposal_id: int, status: str, seen: set[int], *, theirs: bool = False
) -> str | None:
    """What the watcher does for a proposal event: "pull" (one of this person's pending
    proposals was decided), "learn" (one of this person's, made elsewhere: another
    machine or the web page, was accepted or rejected; `theirs`: the event said it is
    this person's), "announce" (a new proposal for this reviewer to look at, first time
    seen), or None (nothing: no request)."""
    mine = {record.get("id") for record in pending_keys(state).values()}
    if status != PENDING:
        seen.discard(proposal_id)
        if proposal_id in mine:
            return "pull"
        return "learn" if theirs and status in ("accepted", "rejected") else None
    if proposal_id in mine or proposal_id in seen or not is_reviewer(state):
        return None
    seen.add(proposal_id)
    return "announce"


def review_line(on: bool, reviewer: bool) -> str:
    """The watcher's line when the server says the review setting changed."""
    if not on:
        return "review is off for this repo now: notes written here reach the team directly"
    if reviewer:
        return (
            "review is on for this repo now: you review (`memsync review` lists what "
            "waits); your own notes reach the team directly"
        )
    return (
        "review is on for this repo now: notes written here are proposed, and reach "
        "teammates once a reviewer accepts them (`memsync status` shows yours)"
    )


def announce_line(proposal_id: int) -> str:
    """A reviewer's log line for a new proposal."""
    return (
        f"proposal {proposal_id} waits for review "
        f"(`memsync review show {proposal_id}`, `memsync review accept {proposal_id}`)"
    )


def proposed_lines(proposed: list[dict[str, Any]]) -> list[str]:
    """The push's proposals, one line per proposal id."""
    by_id: dict[int, list[str]] = {}
    for row in proposed:
        by_id.setdefault(int(row["id"]), []).append(str(row["key"]))
    return [
        f"proposed {', '.join(sorted(keys))} for review (proposal {number}): teammates see "
        "it once a reviewer accepts it; not sent again meanwhile"
        for number, keys in sorted(by_id.items())
    ]


def reviewed_lines(reviewed: list[dict[str, Any]]) -> list[str]:
    """A pull's decided proposals: accepted (now in sync) or rejected (and restored)."""
    lines = []
    for row in reviewed:
        where = " (proposed from another machine or the web page)" if row.get("elsewhere") else ""
        if row["status"] == "accepted" and not row.get("by"):
            lines.append(
                f"{row['key']}: proposal {row.get('id')}{where} published when review was "
                "switched off: the team has it"
            )
        elif row["status"] == "accepted":
            lines.append(
                f"{row['key']}: proposal {row.get('id')}{where} accepted by {row['by']}: "
                "the team has it"
            )
        else:
            lines.append(rejected_words(row))
    return lines
