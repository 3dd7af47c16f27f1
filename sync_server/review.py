"""The review gate's pure parts: a reject reason's rules, a proposal's similar notes,
and the wire form of a proposal (docs/protocol.md section 3.12).

The service (`service.TeamMemory`) decides who may do what; these only check, rank
and shape, so the API and the web page word a proposal the same way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from memsync_protocol.memory_index import frontmatter
from memsync_protocol.search import SearchIndex, notes_of
from sync_server.errors import BadRequest, HistoryGone
from sync_server.personal import owner_person
from sync_server.storage.base import MAX_PROPOSALS_LISTED, Proposal, ProposalEntry, Store
from sync_server.times import wire_time

MAX_REASON_CHARS = 500
# How many live notes `similar` names per proposal, and how much of a text it asks with.
SIMILAR_LIMIT = 3
_QUERY_CHARS = 300


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
    finds for what the proposal says: what a reviewer checks for a duplicate."""
    own = set(proposal.keys)
    query = " ".join(_what_it_says(entry) for entry in proposal.entries)[:_QUERY_CHARS]
    if not query.strip():
        return []
    hits = index.search(query, limit + len(own))
    return [{"key": hit.key, "title": hit.name or hit.key} for hit in hits if hit.key not in own][
        :limit
    ]


def _what_it_says(entry: ProposalEntry) -> str:
    """The words a proposed text adds: its note's name and description, and the lines
    its base did not have (a whole note's words would make every search slow and
    match every note on the common ones)."""
    if entry.text is None:
        return ""
    fields = frontmatter(entry.text) or {}
    before = set((entry.base_text or "").splitlines())
    added = [line for line in entry.text.splitlines() if line.strip() and line not in before]
    said = " ".join([fields.get("name", ""), fields.get("description", ""), *added])
    return said[:_QUERY_CHARS]


class SearchIndexes:
    """The ranked search's index of each repo's live notes, kept between requests, and
    the `similar` notes of proposals found with it.

    Indexing 2,000 notes costs about a second; the inbox asks for `similar` notes on
    every load. An index is caught up in place from the changes since its version (a
    `since` read) rather than rebuilt, and rebuilt only when that is not possible
    (history pruned). Updates and searches hold one lock, so no search sees an index
    half updated. A few repos are kept, the least recently used dropped.
    """

    def __init__(self, keep: int = 8, refresh: int = 10) -> None:
        self._keep = keep
        self._indexes: OrderedDict[str, tuple[int, SearchIndex]] = OrderedDict()
        # Per repo, by proposal id: the similar notes found and the index version they
        # were found at. A proposal never changes; the team's notes do, so an answer
        # found at an older version is refreshed, but at most `refresh` of them per
        # call: after an accept, a list of 200 proposals must not search 200 times.
        self._found: dict[str, dict[int, tuple[int, list[dict[str, str]]]]] = {}
        self._refresh = refresh
        self._lock = threading.Lock()

    def similar(
        self, store: Store, repo: str, proposals: Sequence[Proposal]
    ) -> dict[int, list[dict[str, str]]]:
        """Per proposal (read with its texts), up to 3 live notes like it."""
        if not proposals:
            return {}
        with self._lock:
            index = self._current(store, repo)
            version = self._indexes[repo][0] if repo in self._indexes else -1
            known = self._found.setdefault(repo, {})
            if len(known) > 4 * MAX_PROPOSALS_LISTED:
                wanted = {proposal.id for proposal in proposals}
                for stale_id in [found for found in known if found not in wanted]:
                    del known[stale_id]
            refreshed = 0
            for proposal in proposals:
                found = known.get(proposal.id)
                if found is not None and (found[0] == version or refreshed >= self._refresh):
                    continue
                if found is not None:
                    refreshed += 1
                known[proposal.id] = (version, similar_notes(proposal, index))
            if len(self._found) > self._keep:
                self._found = {
                    name: found for name, found in self._found.items() if name in self._indexes
                }
            return {proposal.id: known[proposal.id][1] for proposal in proposals}

    def _current(self, store: Store, repo: str) -> SearchIndex:
        cached = self._indexes.get(repo)
        head = store.head(repo)
        if head is None:
            return SearchIndex()
        if cached is not None and cached[0] == head.version:
            self._indexes.move_to_end(repo)
            return cached[1]
        index: SearchIndex | None = None
        version = head.version
        if cached is not None and cached[0] < head.version:
            try:
                delta = store.changes_since(repo, cached[0])
            except HistoryGone:
                delta = None
            if delta is not None:
                index, version = cached[1], delta.head.version
                for key in delta.deleted:
                    index.remove(key)
                for note in notes_of(delta.texts).values():
                    index.add(note)
        if index is None:
            snapshot = store.snapshot(repo, with_texts=True)
            if snapshot is None:
                return SearchIndex()
            index, version = SearchIndex.of(notes_of(snapshot.texts)), snapshot.head.version
        self._indexes[repo] = (version, index)
        self._indexes.move_to_end(repo)
        while len(self._indexes) > self._keep:
            self._indexes.popitem(last=False)
        return index


def proposer(proposal: Proposal) -> str:
    """Who made a proposal, as a page says it: the person, and the token when its name
    is not the person's ("alice (alice-laptop)")."""
    person = owner_person(proposal.person)
    if person is None or proposal.author == person:
        return proposal.author
    return f"{person} ({proposal.author})"


def agent_of(proposal: Proposal) -> str | None:
    """The agent that wrote a proposal: the `X-Memsync-Agent` header's name (an MCP
    write), else its provenance's `agent` (a watcher's or a push's write)."""
    return proposal.agent or (proposal.provenance or {}).get("agent")


def agent_words(proposal: Proposal) -> str | None:
    """The agent as a page says it: "claude-code 2.1.197, session 5e55" (None: no agent
    and no session said)."""
    provenance = proposal.provenance or {}
    agent = agent_of(proposal)
    version = provenance.get("agentVersion") if agent == provenance.get("agent") else None
    words = " ".join(part for part in (agent, version) if part)
    session = provenance.get("session")
    if session:
        words = f"{words}, session {session}" if words else f"session {session}"
    return words or None


def proposal_view(proposal: Proposal, *, texts: bool) -> dict[str, Any]:
    """A proposal as the API answers it (`P` of docs/protocol.md section 3.12)."""
    view = {
        "id": proposal.id,
        "author": proposal.author,
        "person": owner_person(proposal.person),
        "agent": agent_of(proposal),
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
    if proposal.provenance:
        view["provenance"] = dict(proposal.provenance)
    return view


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
