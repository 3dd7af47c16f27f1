"""The storage seam: one small protocol every backend implements.

Routes talk only to `Store`. `storage.sql.SqlStore` implements it on SQLAlchemy Core for
SQLite and PostgreSQL; `tests/storage/` runs one contract suite against both. Its
tokens half, `TokenStore`, is all `memsync-server token ...` needs; on a SQLite file
`storage.sqlite_tokens.SqliteTokens` implements it on plain `sqlite3` and passes the
contract's token tests too.

Write methods raise the domain errors of `sync_server.errors`
(`PreconditionFailed`, `StaleBase`, `PathClash`, `TooManyEntries`, `NotFound`) and
write nothing when they do. Every write is one transaction that locks the repo row, and
every check (the file/directory clash included) runs inside it. On PostgreSQL every
commit also announces the repo's new head on the `memsync_commits` channel (`NOTIFY`,
delivered when the transaction commits), which `sync_server.events` listens to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

Operation = Literal["put", "delete", "restore", "verify"]
# The ops every `CommitSummary.ops` counts; a `verify` (a note checked against the code,
# its text unchanged) is counted only in a commit that has one, so older answers stay
# as they were.
OPERATIONS: tuple[Operation, ...] = ("put", "delete", "restore")
# How many keys a `CommitSummary` names; `key_count` says how many it touched in all.
LOG_KEYS = 20
# The largest page `log` answers.
MAX_LOG_LIMIT = 200


# The newest Alembic revision in `storage/migrations`. Commands that only need a migrated
# database compare it with `alembic_version` instead of importing Alembic (a third of a
# second), on SQLAlchemy (`SqlStore`) or on `sqlite3` (`SqliteTokens`); `SqlStore.migrate`
# checks that it is still the head.
SCHEMA_HEAD = "0010"


@dataclass(frozen=True, slots=True)
class RepoHead:
    """What a repo is now: enough to answer a conditional GET without reading entries."""

    repo: str
    version: int
    checksum: str
    last_modified: datetime
    entry_count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """All live entries of a repo at `head.version`; `texts` is empty for the hashes view."""

    head: RepoHead
    checksums: dict[str, str]
    texts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Delta:
    """What changed after a version: live changed entries and keys deleted since."""

    head: RepoHead
    texts: dict[str, str]
    checksums: dict[str, str]
    deleted: list[str]


@dataclass(frozen=True, slots=True)
class CommitResult:
    """The repo after a write; `changed_keys` is empty when the write changed nothing."""

    head: RepoHead
    changed_keys: list[str]


@dataclass(frozen=True, slots=True)
class HistoryItem:
    """One version of one key; `text` is None for deletes and in listings."""

    key: str
    version: int
    checksum: str | None
    op: Operation
    author: str
    at: datetime
    text: str | None = None
    # The reviewer who accepted the proposal this version came from (None: a plain write).
    accepted_by: str | None = None
    # How the version was made (memsync_protocol.provenance; None: not said).
    provenance: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where a live key's current text came from: its newest put, restore or verify row
    (who, when, and the commit of the writer's checkout when its provenance said)."""

    version: int
    checksum: str
    at: datetime
    author: str
    commit: str | None


@dataclass(frozen=True, slots=True)
class CommitSummary:
    """One version of a repo as `log` lists it: who, when, how many of each op, which keys.

    `ops` always has `put`, `delete` and `restore`; `keys` is the first `LOG_KEYS` keys
    in code-point order and `key_count` all of them (of the rows history still keeps).
    """

    version: int
    at: datetime
    author: str
    ops: dict[str, int]
    keys: list[str]
    key_count: int
    accepted_by: str | None = None
    provenance: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class LogPage:
    """Commits newest first; `next_before` is the `before` of the next page (None: last)."""

    commits: list[CommitSummary]
    next_before: int | None


@dataclass(frozen=True, slots=True)
class DeletedKey:
    """A key deleted for the team and not live now.

    `version`, `author` and `at` are of its newest delete; `last_version` is the newest
    version of the key with a text before that delete (what an undo restores), None
    when pruning left none.
    """

    key: str
    version: int
    author: str
    at: datetime
    last_version: int | None


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A stored token: never the token itself, only its lookup id and hash."""

    id: int
    lookup_id: str
    name: str
    repo_pattern: str
    read_only: bool
    secret_hash: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    # A reviewer's writes to a reviewed repo commit directly, and it may accept or
    # reject others' proposals (docs/protocol.md section 3.12).
    reviewer: bool = False
    # The person whose personal spaces the token reaches (None: its name).
    person: str | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the token's expiry has passed at `now` (never, without an expiry)."""
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class RepoSummary:
    """One repo as `memsync-server repo list` shows it: sizes of its live entries."""

    repo: str
    entries: int
    bytes: int
    version: int
    last_modified: datetime
    checksum: str = ""


@dataclass(frozen=True, slots=True)
class RepoRemoval:
    """What `delete_repo` removed."""

    repo: str
    entries: int
    history: int


@dataclass(frozen=True, slots=True)
class SpacesRemoval:
    """What `delete_spaces` removed: the spaces (internal ids) and their rows."""

    spaces: list[str]
    entries: int
    history: int
    proposals: int


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """The schema revision before a migration (None: no schema yet) and after it."""

    before: str | None
    after: str


ProposalStatus = Literal["pending", "accepted", "rejected", "replaced"]
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = ("pending", "accepted", "rejected", "replaced")
# Which proposals a listing shows: the pending ones, the decided ones, or all.
ProposalFilter = Literal["pending", "decided", "all"]
# The most proposals one listing answers (newest first).
MAX_PROPOSALS_LISTED = 200


@dataclass(frozen=True, slots=True)
class ProposalEntry:
    """One key of a proposal: its new text (None for a delete) and the base it was
    written against (`base_text` None: the key was new then).

    `team_text` and `team_checksum` are the team's current ones, filled only when a
    proposal is read with its texts.
    """

    key: str
    op: Literal["put", "delete"]
    checksum: str | None
    base_checksum: str | None
    text: str | None = None
    base_text: str | None = None
    team_text: str | None = None
    team_checksum: str | None = None


@dataclass(frozen=True, slots=True)
class Proposal:
    """A write kept back for review: who proposed which keys against which version, and
    what became of it. `entries` are sorted by key; texts are there only when asked."""

    id: int
    repo: str
    # The token name that wrote it (history's author once accepted) and the person it
    # belongs to: every token of that person lists and replaces it.
    author: str
    person: str
    agent: str | None
    created_at: datetime
    status: ProposalStatus
    base_version: int
    entries: list[ProposalEntry]
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    accepted_version: int | None = None
    replaced_by: int | None = None
    # How the write was made (docs/protocol.md 3.13); its accept's version keeps it.
    provenance: dict[str, str] | None = None

    @property
    def keys(self) -> list[str]:
        """The proposal's keys, sorted."""
        return [entry.key for entry in self.entries]


@dataclass(frozen=True, slots=True)
class ProposalResult:
    """A write that became a proposal: the team's head (unchanged) and the proposal;
    `replaced` lists the person's pending proposals it replaced."""

    head: RepoHead
    proposal: Proposal
    replaced: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Acceptance(CommitResult):
    """An accepted proposal: the commit it made (`changed_keys` empty when the team
    already had its texts) and the proposal as it is now (status accepted)."""

    proposal: Proposal


class ReviewNeeded(Exception):
    """`Store.put(..., unless_reviewed=True)` found the repo reviewed and wrote nothing:
    the caller makes a proposal instead."""


class DuplicateTokenName(ValueError):
    """A live token already has this name; `existing` is that token."""

    def __init__(self, existing: TokenRecord) -> None:
        super().__init__(
            f"a live token is already named {existing.name!r} (id {existing.lookup_id[:6]}); "
            "choose another name or revoke that one first"
        )
        self.existing = existing


class TokenStore(Protocol):
    """The tokens that may reach the repos: what `memsync-server token ...` needs.

    `SqlStore` is one (as part of `Store`); on a SQLite file the token commands use
    `storage.sqlite_tokens.SqliteTokens`, the same on the standard library's `sqlite3`.
    """

    def create_token(
        self,
        *,
        lookup_id: str,
        secret_hash: str,
        name: str,
        repo_pattern: str,
        read_only: bool,
        expires_at: datetime | None = None,
        reviewer: bool = False,
        person: str | None = None,
    ) -> TokenRecord:
        """Store a new token's hash.

        Raises `DuplicateTokenName` when a live (not revoked) token already has `name`.
        """

    def find_token(self, lookup_id: str) -> TokenRecord | None:
        """The token with this lookup id, revoked or not."""

    def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""

    def revoke_token(self, name_or_lookup_id: str) -> int:
        """Revoke matching live tokens by name or lookup id; return how many."""

    def has_spaces(self, prefix: str) -> bool:
        """Whether any repo holding data (or that did) has an internal id starting with
        `prefix`: one person's personal spaces (`personal.prefix`), which `token create
        --person` names when it hands them to a new token."""

    def close(self) -> None:
        """Release connections."""


class Store(TokenStore, Protocol):
    """Repos of entries with history, plus the tokens that may reach them."""

    def migrate(self) -> MigrationResult:
        """Bring the schema to the newest revision; say from which revision to which."""

    def ping(self) -> None:
        """Raise `StorageUnavailable` unless the database answers."""

    def head(self, repo: str) -> RepoHead | None:
        """The repo's head, or None when it has never held data."""

    def find_tokens(self, lookup_ids: Sequence[str]) -> dict[str, TokenRecord]:
        """The tokens of those lookup ids that exist (revoked or not), read together.

        The event streams' token check calls this every token cache window; its cost
        must not grow with the number of tokens streaming.
        """

    def heads(self, repos: Sequence[str]) -> dict[str, RepoHead]:
        """The heads of those of `repos` that hold data, read together in one query.

        The events watcher polls this; its cost must not grow with the number of streams.
        """

    def snapshot(self, repo: str, *, with_texts: bool, key: str | None = None) -> Snapshot | None:
        """All live entries (texts only when asked), or None when never written; with
        `key`, only that entry (none when it is not live)."""

    def changes_since(self, repo: str, since: int) -> Delta | None:
        """Changes after version `since`; None when never written.

        Raises `HistoryGone` when `since` is newer than the current version or older
        than the retained history.
        """

    def put(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        if_match: list[str] | None,
        base_checksums: Mapping[str, str | None] | None,
        max_entries: int,
        author: str,
        deletes: Sequence[str] = (),
        provenance: Mapping[str, str] | None = None,
        unless_reviewed: bool = False,
    ) -> CommitResult:
        """Upsert `entries` and delete `deletes` atomically, as one version (see
        docs/protocol.md section 3, PUT). A key of `deletes` that is not live refuses
        the whole write with `NotFound`. With `unless_reviewed`, a repo that
        `is_reviewed` says on gets nothing and raises `ReviewNeeded`: the check is in
        the write's own transaction, not a read before it.

        A key that is not live yet and would be the file of another live (or new) key's
        directory, or the directory of another's file, refuses the whole write with
        `PathClash`; deleted keys do not count.
        """

    def delete(
        self,
        repo: str,
        key: str,
        *,
        if_match: list[str] | None,
        author: str,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Soft-delete one live key, keeping a tombstone in history."""

    def restore(
        self,
        repo: str,
        key: str,
        version: int,
        *,
        max_entries: int,
        author: str,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Make the text of `key` at `version` current again, as a new version.

        Refused with `PathClash` like a PUT when `key` is not live and clashes with a
        live key.
        """

    def verify(
        self, repo: str, key: str, *, author: str, provenance: Mapping[str, str] | None = None
    ) -> CommitResult:
        """Record that `author` checked live `key` against the code: a new version whose
        only row is of op `verify` with the key's current text and checksum. Entries,
        their versions and the repo checksum stay as they were, so no read changes;
        `NotFound` when the key is not live."""

    def sources(self, repo: str) -> dict[str, KeySource]:
        """For each live key, its newest history row of op put, restore or verify, in one
        query; `NoTeamMemory` when the repo holds no data. A key whose rows history no
        longer keeps is absent."""

    def key_history(self, repo: str, key: str) -> list[HistoryItem]:
        """Every retained version of `key`, oldest first; `NotFound` if none."""

    def key_version(self, repo: str, key: str, version: int) -> HistoryItem:
        """One version of `key` with its text; `NotFound` if there is no such version."""

    def log(
        self,
        repo: str,
        *,
        before: int | None = None,
        limit: int = 50,
        author: str | None = None,
        since: datetime | None = None,
        key: str | None = None,
    ) -> LogPage:
        """The repo's commits newest first, `limit` (1..`MAX_LOG_LIMIT`) at most.

        Only versions below `before`, by `author` (a token name), at or after `since`,
        touching `key`, as asked. Read from the history index, never the texts.
        Raises `NotFound` (`NoTeamMemory`) for a repo that holds no data.
        """

    def deleted_keys(self, repo: str) -> list[DeletedKey]:
        """Keys deleted and not live now, newest delete first; `NotFound` (`NoTeamMemory`)
        for a repo that holds no data."""

    def prune_history(self, older_than: datetime) -> int:
        """Drop history older than `older_than` that no live entry needs; return rows."""

    def list_repos(self) -> list[RepoSummary]:
        """Every repo that holds data (or did: all its entries may be deleted), by name."""

    def repo_summary(self, repo: str) -> RepoSummary | None:
        """One repo as `list_repos` shows it, or None when it holds no data."""

    def delete_repo(self, repo: str) -> RepoRemoval | None:
        """Remove a repo's entries and history; None when it holds no data.

        Afterwards the repo reads as never written; a later write starts it again with
        the next version number, so versions are never reused.
        """

    def delete_spaces(self, prefix: str) -> SpacesRemoval:
        """Remove every repo whose internal id starts with `prefix` (one person's spaces,
        `personal.prefix`), row and all: entries, history, proposals and the repo row
        itself, in one transaction, so no row names them afterwards."""

    def server_secret(self, name: str) -> str:
        """The random secret called `name` (the web page's cookie key), made and stored
        on first use; every process sharing the database reads the same one."""

    # -- review (docs/protocol.md section 3.12) ----------------------------------------

    def set_review(self, pattern: str, review: bool) -> None:
        """Store whether repos matching `pattern` (`owner/name`, `owner/*`, `*`) are
        reviewed; the most specific stored pattern decides for a repo."""

    def review_policies(self) -> dict[str, bool]:
        """Every stored pattern and whether it turns review on."""

    def is_reviewed(self, repo: str) -> bool:
        """Whether `repo` is reviewed: its most specific stored pattern says on."""

    def propose(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        deletes: Sequence[str] = (),
        if_match: list[str] | None,
        base_checksums: Mapping[str, str | None] | None,
        max_entries: int,
        author: str,
        person: str | None = None,
        agent: str | None = None,
        max_pending: int,
        provenance: Mapping[str, str] | None = None,
    ) -> ProposalResult | CommitResult:
        """Run every check `put` runs, then keep the write as a proposal of `person`
        (None: `author`, the token's name) instead of committing it (a write that
        changes nothing: a `CommitResult` with no keys).

        The person's pending proposals that share a key with it are replaced, whichever
        of their tokens wrote them: their other keys are carried into the new one. Past
        `max_pending` pending proposals of the person in the repo: `TooManyProposals`,
        nothing stored.
        """

    def proposals(
        self,
        repo: str,
        *,
        person: str | None = None,
        status: ProposalFilter = "pending",
        texts: bool = False,
        limit: int = MAX_PROPOSALS_LISTED,
    ) -> list[Proposal]:
        """The repo's proposals newest first (only `person`'s when given)."""

    def proposal(self, repo: str, proposal_id: int) -> Proposal | None:
        """One proposal with its texts and the team's current texts of its keys."""

    def pending_count(self, repo: str, *, person: str | None = None) -> int:
        """How many proposals of the repo (of `person`, when given) are pending."""

    def accept_proposal(
        self, repo: str, proposal_id: int, *, reviewer: str | None, max_entries: int
    ) -> Acceptance:
        """Commit a pending proposal as its author's, accepted by `reviewer` (None: by
        no one, published when review was switched off); a key the team changed since
        the base is merged as a pull merges it.

        Raises `NotFound`, `ProposalDecided` (not pending), `ProposalConflict` (a merge
        that overlaps, or a delete of a text that moved: nothing changes), and what a
        PUT raises (`TooManyEntries`, `PathClash`).
        """

    def reject_proposal(
        self, repo: str, proposal_id: int, *, reviewer: str | None, reason: str
    ) -> Proposal:
        """Mark a pending proposal rejected by `reviewer` for `reason` (None: returned
        to its author when review was switched off)."""

    def settle_unreviewed(self, *, max_entries: int) -> list[Proposal]:
        """Decide the pending proposals of every repo that is not reviewed now (review
        switched off for it), oldest first: each is published as its author's commit
        when it applies as an accept would (merged with the team's newer edits, never
        over them), else returned to its author, rejected with no reviewer and a reason
        saying why. Returns each proposal as decided."""
