"""The review answers on the wire (docs/protocol.md 3.12), checked before use.

A write into a reviewed repo by a teammate who is not a reviewer is answered 202 with a
`proposal` object instead of a commit; `GET /proposals` lists proposals. Like every
answer, these are checked field by field: a body that is not what the protocol says is
`None` here (the caller words it as "not a memsync server"), never a crash later.
This module imports nothing of the client, so the API and the library both use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

PROPOSAL_STATUSES = ("pending", "accepted", "rejected", "replaced")
# The longest reason the server takes, after strip (the CLI checks it first).
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class Proposed:
    """A write the server kept as a proposal (202): nothing reached the team yet.

    `checksum`/`version` are the team's current head, as a 202 carries them.
    """

    id: int
    keys: list[str]
    base_version: int
    checksum: str
    version: int


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def proposed(body: object) -> Proposed | None:
    """The `Proposed` of a 202 body, or None when the body is not one."""
    if not isinstance(body, dict):
        return None
    proposal = body.get("proposal")
    if not (
        isinstance(proposal, dict)
        and _int(proposal.get("id"))
        and isinstance(proposal.get("keys"), list)
        and all(isinstance(key, str) for key in proposal["keys"])
        and _int(body.get("version"))
        and isinstance(body.get("checksum"), str)
    ):
        return None
    base = proposal.get("baseVersion")
    return Proposed(
        id=proposal["id"],
        keys=list(proposal["keys"]),
        base_version=base if _int(base) else body["version"],
        checksum=body["checksum"],
        version=body["version"],
    )


def _key_row_ok(row: object) -> bool:
    return (
        isinstance(row, dict)
        and isinstance(row.get("key"), str)
        and row.get("op") in ("put", "delete")
        and all(
            _text_or_none(row.get(name))
            for name in ("checksum", "baseChecksum", "text", "baseText", "teamText")
        )
    )


def proposal_ok(item: object) -> bool:
    """Whether `item` is a proposal object `P` (texts optional)."""
    return (
        isinstance(item, dict)
        and _int(item.get("id"))
        and isinstance(item.get("author"), str)
        and item.get("status") in PROPOSAL_STATUSES
        and isinstance(item.get("keys"), list)
        and all(_key_row_ok(row) for row in item["keys"])
        and all(_text_or_none(item.get(name)) for name in ("agent", "at", "decidedBy", "reason"))
        and (item.get("similar") is None or isinstance(item.get("similar"), list))
    )


def proposal_list(body: object) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """(review `{on, reviewer}`, proposals) of a `GET /proposals` answer, or None."""
    if not isinstance(body, dict):
        return None
    items = body.get("proposals")
    review = body.get("review")
    if not (isinstance(items, list) and all(proposal_ok(item) for item in items)):
        return None
    flags = review if isinstance(review, dict) else {}
    return (
        {"on": flags.get("on") is True, "reviewer": flags.get("reviewer") is True},
        [dict(item) for item in items],
    )


def reason_problem(reason: str) -> str | None:
    """Why the server would refuse a rejection's reason, or None (checked before asking)."""
    stripped = reason.strip()
    if not stripped:
        return "a reason is required (--reason TEXT)"
    if len(stripped) > MAX_REASON_CHARS:
        return f"the reason is {len(stripped):,} characters; at most {MAX_REASON_CHARS} are kept"
    if any((ord(char) < 32 and char != "\n") or ord(char) == 127 for char in stripped):
        return "the reason holds a control character"
    return None


def review_field(body: object) -> dict[str, Any] | None:
    """The `review` field of a full, hashes or delta answer (`{on, reviewer, pending}`), or
    None: a repo that is not reviewed has none."""
    review = body.get("review") if isinstance(body, dict) else None
    if not isinstance(review, dict) or review.get("on") is not True:
        return None
    pending = review.get("pending")
    return {
        "on": True,
        "reviewer": review.get("reviewer") is True,
        "pending": pending if _int(pending) and pending >= 0 else 0,
    }


@dataclass(frozen=True)
class ProposalEvent:
    """A review event of the events stream: a proposal was made or decided."""

    id: int
    status: str
    # The proposal is this token's person's (made by any of their tokens: another
    # machine, the web page).
    mine: bool = False


def proposal_event(data: str) -> ProposalEvent | None:
    """The `ProposalEvent` of an `event: proposal`'s data, or None (events are hints)."""
    try:
        body = json.loads(data)
    except ValueError:
        return None
    number = body.get("id") if isinstance(body, dict) else None
    status = body.get("status") if isinstance(body, dict) else None
    if not _int(number) or not isinstance(status, str):
        return None
    assert isinstance(body, dict)
    return ProposalEvent(id=number, status=status, mine=body.get("mine") is True)


@dataclass(frozen=True)
class ReviewEvent:
    """The events stream's word on the repo's review setting: sent when the stream opens
    and whenever it changes, with whether this token reviews."""

    on: bool
    reviewer: bool


def review_event(data: str) -> ReviewEvent | None:
    """The `ReviewEvent` of an `event: review`'s data, or None (events are hints)."""
    try:
        body = json.loads(data)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("on"), bool):
        return None
    return ReviewEvent(on=body["on"], reviewer=body.get("reviewer") is True)
