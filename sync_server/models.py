"""Wire schemas (docs/protocol.md section 3): request bodies, and response shapes for the docs.

Request models are strict: a number where text belongs is a 400, never coerced.
Responses are serialized by the routes from storage results (the response shapes here
document them in the OpenAPI schema and are checked by the API tests).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The routes import it from here; it lives apart, without pydantic, for `memsync-server`.
from sync_server.times import wire_time as wire_time

MAX_VERSION = 2**63 - 1  # the largest BIGINT / SQLite INTEGER

SUPPORTS = [
    "since",
    "base-precondition",
    "history",
    "events",
    "key",
    "put-deletes",
    "log",
    "deleted",
    "history-compare",
    "review",
    "personal",
    "provenance",
    "sources",
]
# Listed after SUPPORTS when the server accepts gzip request bodies (MEMSYNC_COMPRESSION).
GZIP_REQUESTS = "gzip"


def supports(*, compression: bool) -> list[str]:
    """The extensions a server lists in `supports` (docs/protocol.md 3.2)."""
    return [*SUPPORTS, GZIP_REQUESTS] if compression else SUPPORTS


class PutBody(BaseModel):
    """PUT body: entries to create or replace, optional per-key base preconditions."""

    model_config = ConfigDict(strict=True, extra="ignore")

    entries: dict[str, str] = Field(description="key -> full UTF-8 text of the entry")
    baseChecksums: dict[str, str | None] | None = Field(
        default=None,
        description="key -> checksum the key must have now (null: must not exist)",
    )
    deletes: list[str] | None = Field(
        default=None,
        description="keys to delete in the same commit (each must be live, and not in entries)",
    )
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="how this change was made (docs/protocol.md 3.13): via, agent, "
        "agentVersion, session, commit",
    )


class RestoreBody(BaseModel):
    """POST /restore body."""

    model_config = ConfigDict(strict=True, extra="ignore")

    key: str
    version: int = Field(ge=1, le=MAX_VERSION)
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="how this change was made (docs/protocol.md 3.13): via, agent, "
        "agentVersion, session, commit",
    )


class VerifyBody(BaseModel):
    """POST /verify body: the key checked, and how (usually `commit`, the code's HEAD)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    key: str
    provenance: dict[str, Any] | None = Field(
        default=None,
        description="how this change was made (docs/protocol.md 3.13): via, agent, "
        "agentVersion, session, commit",
    )


class KeySourceEntry(BaseModel):
    """One live key's newest written or verified version (GET /provenance)."""

    version: int
    checksum: str
    at: str
    author: str
    commit: str | None


class Sources(BaseModel):
    """GET /provenance: where each live key's current text came from."""

    repo: str
    keys: dict[str, KeySourceEntry]


class Content(BaseModel):
    """Full GET content."""

    entries: dict[str, str]
    entryChecksums: dict[str, str]


class Head(BaseModel):
    """Fields every GET answer carries."""

    organizationId: str
    repo: str
    version: int
    lastModified: str
    checksum: str
    checksumVersion: int = Field(
        description="the definition of `checksum` (docs/protocol.md section 2); 2 today"
    )


class ReviewState(BaseModel):
    """`review` of a reviewed repo's GET answers (absent when the repo is not reviewed)."""

    on: bool
    reviewer: bool = Field(description="whether the caller may accept and reject")
    pending: int = Field(description="pending proposals the caller may see")


class FullView(Head):
    """GET without view or since."""

    content: Content
    review: ReviewState | None = None


class HashesView(Head):
    """GET ?view=hashes."""

    entryChecksums: dict[str, str]
    supports: list[str]
    review: ReviewState | None = None


class DeltaView(Head):
    """GET ?since=N."""

    entries: dict[str, str]
    entryChecksums: dict[str, str]
    deleted: list[str]
    review: ReviewState | None = None


class EntryView(BaseModel):
    """GET ?key=K: one live entry, and the repo's version it was read at."""

    repo: str
    key: str
    version: int
    checksum: str
    content: str


class WriteResult(BaseModel):
    """PUT, DELETE and restore answers."""

    checksum: str
    checksumVersion: int
    version: int
    lastModified: str
    entryCount: int
    updatedKeys: list[str]


class VerifyResult(WriteResult):
    """POST /verify's answer: a write's fields, and the provenance fields not kept."""

    provenanceDropped: list[str] | None = Field(
        default=None,
        description="in a reviewed repo, by a token that is not a reviewer: the free-text "
        "provenance fields sent and not kept (agent, agentVersion, session)",
    )


class ProposalKey(BaseModel):
    """One key of a proposal; the text fields only with `texts=1` (or one proposal)."""

    key: str
    op: Literal["put", "delete"]
    checksum: str | None
    baseChecksum: str | None
    text: str | None = None
    baseText: str | None = None
    teamText: str | None = None
    teamChecksum: str | None = None


class SimilarNote(BaseModel):
    """A live note the ranked search finds for a proposal's text."""

    key: str
    title: str


class ProposalView(BaseModel):
    """A proposal (docs/protocol.md section 3.12)."""

    id: int
    author: str
    agent: str | None
    at: str
    status: Literal["pending", "accepted", "rejected", "replaced"]
    baseVersion: int
    decidedBy: str | None
    decidedAt: str | None
    reason: str | None
    acceptedVersion: int | None
    replacedBy: int | None
    keys: list[ProposalKey]
    similar: list[SimilarNote] | None = None
    provenance: dict[str, str] | None = Field(
        default=None, description="how the write was made (3.13), only when it said"
    )


class ProposalHead(BaseModel):
    """The `proposal` of a 202 answer: the write kept for review."""

    id: int
    status: Literal["pending"]
    keys: list[str]
    baseVersion: int


class ProposedResult(WriteResult):
    """A 202 answer of PUT, DELETE or restore in a reviewed repo: the team's head as it
    is (unchanged) and the proposal the write became."""

    supports: list[str]
    proposal: ProposalHead


class AcceptResult(WriteResult):
    """POST /proposals/{id}/accept: the commit, and the proposal now accepted."""

    supports: list[str]
    proposal: ProposalView


class ReviewOf(BaseModel):
    """Whether the repo is reviewed and the caller a reviewer."""

    on: bool
    reviewer: bool


class ProposalList(BaseModel):
    """GET /proposals: newest first, at most 200."""

    repo: str
    review: ReviewOf
    proposals: list[ProposalView]


class RejectedView(BaseModel):
    """POST /proposals/{id}/reject."""

    proposal: ProposalView


class RejectBody(BaseModel):
    """POST /proposals/{id}/reject body."""

    model_config = ConfigDict(strict=True, extra="ignore")

    reason: str = Field(
        description="why, shown to the author: 1 to 500 characters after stripping, "
        "no control characters but newline"
    )


class HistoryEntry(BaseModel):
    """One version of one key."""

    version: int
    checksum: str | None
    op: Literal["put", "delete", "restore", "verify"]
    author: str
    at: str
    acceptedBy: str | None = Field(
        default=None, description="the reviewer who accepted it (only present when set)"
    )
    provenance: dict[str, str] | None = Field(
        default=None, description="how it was made (only present when set; 3.13)"
    )


class HistoryVersion(HistoryEntry):
    """GET /history?key=K&version=N."""

    repo: str
    key: str
    content: str | None


class ComparedVersion(BaseModel):
    """GET /history?key=K&version=N&compare=M: version M of the same key."""

    version: int
    checksum: str | None
    op: Literal["put", "delete", "restore", "verify"]
    author: str
    at: str
    content: str | None


class HistoryComparison(HistoryVersion):
    """GET /history?key=K&version=N&compare=M."""

    compare: ComparedVersion


class CommitOps(BaseModel):
    """How many keys a commit put, deleted and restored."""

    put: int
    delete: int
    restore: int
    verify: int | None = Field(default=None, description="only present when non-zero")


class Commit(BaseModel):
    """One version of a repo in GET /log."""

    version: int
    at: str
    author: str
    ops: CommitOps
    keys: list[str] = Field(description="the first 20 keys, in code-point order")
    key_count: int
    acceptedBy: str | None = Field(
        default=None, description="the reviewer who accepted it (only present when set)"
    )
    provenance: dict[str, str] | None = Field(
        default=None, description="how it was made (only present when set; 3.13)"
    )


class LogView(BaseModel):
    """GET /log: commits newest first; pass `next_before` as `before` for the next page."""

    repo: str
    commits: list[Commit]
    next_before: int | None


class DeletedEntry(BaseModel):
    """A key deleted for the team and not live now."""

    key: str
    version: int
    author: str
    at: str
    last_version: int | None = Field(
        description="the newest version with a text before the delete (what undo restores)"
    )


class DeletedView(BaseModel):
    """GET /deleted: newest delete first."""

    repo: str
    deleted: list[DeletedEntry]


class ErrorDetail(BaseModel):
    """The inside of every error body."""

    type: str
    message: str
    details: dict[str, object]


class TokenInfo(BaseModel):
    """`GET /v1/token`: what the calling token may do; never its secret."""

    name: str = Field(description="shown as the author of writes")
    id: str = Field(description="the public id prefix `memsync-server token list` shows")
    repos: str = Field(description="repo pattern: owner/name, owner/* or *")
    access: Literal["read-only", "read-write"]
    expiresAt: str | None = Field(description="UTC expiry, or null for a token that never expires")
    reviewer: bool = Field(
        description="may accept and reject proposals; its writes to a reviewed repo commit"
    )
    person: str | None = Field(
        default=None, description="whose personal spaces it reaches (null: none)"
    )


class ErrorBody(BaseModel):
    """`{"error": {...}}`; a 412 also carries the current `checksum`."""

    error: ErrorDetail
    checksum: str | None = None
