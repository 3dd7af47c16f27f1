"""The review gate's pure parts: a reject reason's rules, a proposal's similar notes,
and the wire form of a proposal (docs/protocol.md section 3.12).

The service (`service.TeamMemory`) decides who may do what; these only check, rank
and shape, so the API and the web page word a proposal the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memsync_protocol.search import SearchIndex, notes_of
from sync_server.errors import BadRequest
from sync_server.storage.base import Proposal, ProposalEntry
from sync_server.times import wire_time

MAX_REASON_CHARS = 500
# How many live notes `similar` names per proposal, and how much of a text it asks with.
SIMILAR_LIMIT = 3
_QUERY_CHARS = 2_000


def checked_reason(reason: object) -> str:
    """A reject reason as stored: stripped, 1 to 500 characters, no control character
    but newline; anything else is a 400 (`invalid_reason`)."""
    if not isinstance(reason, str):
        raise _bad_reason("reason must be a string")
    stripped = reason.strip()
    if not 1 <= len(stripped) <= MAX_REASON_CHARS:
        raise _bad_reason(f"reason must be 1 to {MAX_REASON_CHARS} characters")
    if any((not char.isprintable() and char != "\n") for char in stripped):
        raise _bad_reason("reason must have no control characters (a newline is fine)")
    if any(0xD800 <= ord(char) <= 0xDFFF for char in stripped):
        raise _bad_reason("reason must be valid UTF-8")
    return stripped


def _bad_reason(message: str) -> BadRequest:
    return BadRequest(message, details={"error_code": "invalid_reason"})


def similar_notes(
    proposal: Proposal, index: SearchIndex, limit: int = SIMILAR_LIMIT
) -> list[dict[str, str]]:
    """Up to `limit` live notes, not among the proposal's keys, that the ranked search
    finds for the proposal's texts: what a reviewer checks for a duplicate."""
    own = set(proposal.keys)
    query = " ".join(entry.text for entry in proposal.entries if entry.text)[:_QUERY_CHARS]
    if not query.strip():
        return []
    hits = index.search(query, limit + len(own))
    return [{"key": hit.key, "title": hit.name or hit.key} for hit in hits if hit.key not in own][
        :limit
    ]


def search_index(texts: Mapping[str, str]) -> SearchIndex:
    """The ranked search's index of a repo's live notes."""
    return SearchIndex.of(notes_of(texts))


def proposal_view(proposal: Proposal, *, texts: bool) -> dict[str, Any]:
    """A proposal as the API answers it (`P` of docs/protocol.md section 3.12)."""
    return {
        "id": proposal.id,
        "author": proposal.author,
        "agent": proposal.agent,
        "at": wire_time(proposal.created_at),
        "status": proposal.status,
        "baseVersion": proposal.base_version,
        "decidedBy": proposal.decided_by,
        "decidedAt": None if proposal.decided_at is None else wire_time(proposal.decided_at),
        "reason": proposal.reason,
        "acceptedVersion": proposal.accepted_version,
        "replacedBy": proposal.replaced_by,
        "keys": [_entry_view(entry, texts=texts) for entry in proposal.entries],
    }


def _entry_view(entry: ProposalEntry, *, texts: bool) -> dict[str, Any]:
    view: dict[str, Any] = {
        "key": entry.key,
        "op": entry.op,
        "checksum": entry.checksum,
        "baseChecksum": entry.base_checksum,
    }
    if texts:
        view.update(
            text=entry.text,
            baseText=entry.base_text,
            teamText=entry.team_text,
            teamChecksum=entry.team_checksum,
        )
    return view
