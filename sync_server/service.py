"""The one path from a route to the store: the API (`routes/team_memory.py`) and the
web page (`ui/routes.py`) both call `TeamMemory` for reads, writes, scope checks and
the step after a commit.

    TeamMemory(store, settings, metrics, events)   one per application (app.state.team_memory)
      may_see(principal, repo) / may_write(...)    a token's scope and access, as booleans
      require(principal, repo, write=...)          the same as the API's 403
      visible_repos(principal)                     the repos a token's scope covers
      head / snapshot / changes_since / key_history / key_version / log / deleted_keys
      put / delete / restore                       a commit, then `committed` (metrics + event);
                                                   in a reviewed repo, by a non-reviewer, a
                                                   proposal instead (`ProposalResult`)
      delete_with_index / restore_with_index       the web page's delete and restore: a note
                                                   with its index lines, as `memsync rm` and
                                                   `memsync restore` do (the same rules)
      review_policy / is_reviewer / pending_count  the review gate (docs/protocol.md 3.12)
      proposals / proposal / accept / reject       the review inbox
    check_keys(keys, settings) / check_text(...)   what a write refuses before the store

Routes parse the request, call one of these, and render JSON or HTML; they never
count a commit or publish an event themselves, so a new kind of route (a review gate,
another page) gets the same rules by calling the same methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import overload

from memsync_protocol.keys import key_problem, text_problem
from memsync_protocol.memory_index import (
    append_lines,
    drop_lines_linking,
    is_note_key,
    links,
    reachable_indexes,
    restore_lines,
)
from memsync_protocol.provenance import without_free_text
from sync_server.auth import Principal, scope_allows
from sync_server.config import Settings
from sync_server.errors import (
    ApiError,
    BadRequest,
    EntryTooLarge,
    Forbidden,
    InvalidKeys,
    NotFound,
    StaleBase,
)
from sync_server.events import EventHub
from sync_server.metrics import Metrics
from sync_server.personal import is_personal, parse_space, proposal_owner, spoken
from sync_server.review import SearchIndexes, checked_reason
from sync_server.storage.base import (
    Acceptance,
    CommitResult,
    DeletedKey,
    Delta,
    HistoryItem,
    KeySource,
    LogPage,
    Proposal,
    ProposalFilter,
    ProposalResult,
    RepoHead,
    RepoSummary,
    ReviewNeeded,
    Snapshot,
    Store,
)

# What a write answers: a commit, or in a reviewed repo the proposal it became.
WriteOutcome = CommitResult | ProposalResult

# A write that edits an index alongside is tried this often when a teammate changes that
# index between our read and our commit (each try reads it again).
INDEX_TRIES = 3


@dataclass(frozen=True, slots=True)
class DeletedWithIndex:
    """A delete and the index lines that went with it: index key -> the numbers (in the
    index as it was) of the lines that linked only the note."""

    result: WriteOutcome
    lines: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class Relisted:
    """What a restore did to the indexes: whether a line links the note now, and the
    commit that put lines back (None when none was needed or none was found), or the
    proposal it became."""

    listed: bool
    written: list[str]
    commit: CommitResult | None
    proposal: int | None = None


@dataclass(frozen=True, slots=True)
class Restored:
    """A restore and, for a note that was deleted, its index lines put back: `relisted`
    (None when there was nothing to relist), or `relist_problem`, the error that kept
    them out (the restore itself is committed)."""

    result: WriteOutcome
    was_deleted: bool
    relisted: Relisted | None = None
    relist_problem: str | None = None


def check_keys(keys: Sequence[str], settings: Settings) -> None:
    """Refuse (400 `invalid_key`, every bad key named) keys the protocol does not allow."""
    problems = {}
    for key in keys:
        problem = key_problem(
            key, max_bytes=settings.max_key_bytes, max_segments=settings.max_key_segments
        )
        if problem is not None:
            problems[key.encode("utf-8", "backslashreplace").decode("utf-8")] = problem
    if problems:
        raise InvalidKeys(problems)


def check_text(key: str, text: str, max_bytes: int) -> None:
    """Refuse a text that is not storable (400 `invalid_text`) or too large (413)."""
    problem = text_problem(text)
    if problem is not None:
        raise BadRequest(
            f"entry {key!r} {problem}", details={"error_code": "invalid_text", "key": key}
        )
    if len(text.encode("utf-8")) > max_bytes:
        raise EntryTooLarge(key, max_bytes)


@dataclass(frozen=True, slots=True)
class TeamMemory:
    """The store as the routes use it, with the settings its writes obey and the
    metrics and events hub every commit reaches."""

    store: Store
    settings: Settings
    metrics: Metrics
    events: EventHub
    search_indexes: SearchIndexes = field(default_factory=SearchIndexes)

    # -- scope ---------------------------------------------------------------------------

    @staticmethod
    def may_see(principal: Principal, repo: str) -> bool:
        """Whether the token's scope covers `repo` (both normalized); a personal space
        only for its own person's tokens (`sync_server.personal`)."""
        if is_personal(repo):
            return principal.person is not None and parse_space(repo)[0] == principal.person
        return scope_allows(principal.repo_pattern, repo)

    @staticmethod
    def may_write(principal: Principal, repo: str) -> bool:
        """Whether the token may change `repo`: it may see it and is not read-only."""
        return TeamMemory.may_see(principal, repo) and not principal.read_only

    @staticmethod
    def require(principal: Principal, repo: str, *, write: bool) -> None:
        """Raise `Forbidden` (the API's 403) unless the token may read (or write) `repo`;
        the web page answers "not found" instead, with `may_see`."""
        if is_personal(repo) and not TeamMemory.may_see(principal, repo):
            raise NotFound("no such space")
        if not TeamMemory.may_see(principal, repo):
            raise Forbidden(f"this token may not access {repo}")
        if write and principal.read_only:
            raise Forbidden("this token is read-only")

    def visible_repos(self, principal: Principal) -> list[RepoSummary]:
        """The team repos of the store that the token's scope covers: never a personal
        space, not even the token's own (the page lists those under "My memory", by
        name; a repo link to one would carry its internal id)."""
        return [
            r
            for r in self.store.list_repos()
            if not is_personal(r.repo) and self.may_see(principal, r.repo)
        ]

    # -- reads ---------------------------------------------------------------------------

    def head(self, repo: str) -> RepoHead | None:
        return self.store.head(repo)

    def snapshot(self, repo: str, *, with_texts: bool, key: str | None = None) -> Snapshot | None:
        return self.store.snapshot(repo, with_texts=with_texts, key=key)

    def changes_since(self, repo: str, since: int) -> Delta | None:
        return self.store.changes_since(repo, since)

    def key_history(self, repo: str, key: str) -> list[HistoryItem]:
        return self.store.key_history(repo, key)

    def sources(self, repo: str) -> dict[str, KeySource]:
        """Each live key's newest written or verified version (GET /provenance)."""
        return self.store.sources(repo)

    def key_version(self, repo: str, key: str, version: int) -> HistoryItem:
        return self.store.key_version(repo, key, version)

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
        return self.store.log(repo, before=before, limit=limit, author=author, since=since, key=key)

    def deleted_keys(self, repo: str) -> list[DeletedKey]:
        return self.store.deleted_keys(repo)

    # -- writes --------------------------------------------------------------------------

    def committed(self, operation: str, result: CommitResult) -> None:
        """After a commit: count it by operation and wake the repo's event streams."""
        self.metrics.commits.labels(operation).inc()
        self.events.publish(result.head)

    @overload
    def put(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        author: str,
        if_match: list[str] | None = None,
        base_checksums: Mapping[str, str | None] | None = None,
        deletes: Sequence[str] = (),
        operation: str = "put",
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult: ...

    @overload
    def put(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        author: Principal,
        if_match: list[str] | None = None,
        base_checksums: Mapping[str, str | None] | None = None,
        deletes: Sequence[str] = (),
        operation: str = "put",
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome: ...

    def put(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        author: str | Principal,
        if_match: list[str] | None = None,
        base_checksums: Mapping[str, str | None] | None = None,
        deletes: Sequence[str] = (),
        operation: str = "put",
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome:
        """Upsert `entries` (and delete `deletes`) in one commit, announced as
        `operation` when it changed anything; a proposal instead when `author` is a
        principal that must be reviewed in `repo`. A plain name always commits: only
        code acting for the server itself may pass one, never a request's writer."""
        try:
            # Whether the repo is reviewed is asked in the write's own transaction.
            result = self.store.put(
                repo,
                entries,
                if_match=if_match,
                base_checksums=base_checksums,
                max_entries=self.settings.max_entries,
                author=_name(author),
                deletes=deletes,
                provenance=provenance,
                unless_reviewed=self._may_propose(author, repo),
            )
        except ReviewNeeded:
            assert isinstance(author, Principal)
            return self._propose(
                repo,
                entries,
                deletes=deletes,
                if_match=if_match,
                base_checksums=base_checksums,
                author=author,
                agent=agent,
                provenance=provenance,
            )
        if result.changed_keys:
            self.committed(operation, result)
        return result

    @overload
    def delete(
        self,
        repo: str,
        key: str,
        *,
        author: str,
        if_match: list[str] | None = None,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult: ...

    @overload
    def delete(
        self,
        repo: str,
        key: str,
        *,
        author: Principal,
        if_match: list[str] | None = None,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome: ...

    def delete(
        self,
        repo: str,
        key: str,
        *,
        author: str | Principal,
        if_match: list[str] | None = None,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome:
        """Soft-delete `key` (its texts stay in history), announced; or propose it."""
        if self._proposes(author, repo):
            assert isinstance(author, Principal)
            return self._propose(
                repo,
                {},
                deletes=[key],
                if_match=if_match,
                base_checksums=None,
                author=author,
                agent=agent,
                provenance=provenance,
            )
        result = self.store.delete(
            repo, key, if_match=if_match, author=_name(author), provenance=provenance
        )
        self.committed("delete", result)
        return result

    @overload
    def restore(
        self,
        repo: str,
        key: str,
        version: int,
        *,
        author: str,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult: ...

    @overload
    def restore(
        self,
        repo: str,
        key: str,
        version: int,
        *,
        author: Principal,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome: ...

    def restore(
        self,
        repo: str,
        key: str,
        version: int,
        *,
        author: str | Principal,
        agent: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome:
        """Make `version` of `key` current again as a new version, announced when it
        changed anything; or propose that text."""
        if self._proposes(author, repo):
            assert isinstance(author, Principal)
            old = self.store.key_version(repo, key, version)
            if old.text is None:
                raise NotFound(f"version {version} of {key!r} is a delete; it has no text")
            return self._propose(
                repo,
                {key: old.text},
                deletes=(),
                if_match=None,
                base_checksums=None,
                author=author,
                agent=agent,
                provenance=provenance,
            )
        result = self.store.restore(
            repo,
            key,
            version,
            max_entries=self.settings.max_entries,
            author=_name(author),
            provenance=provenance,
        )
        if result.changed_keys:
            self.committed("restore", result)
        return result

    # -- a note with its index lines (the web page; `memsync rm` / `restore` alike) -------

    def _markdown(self, repo: str) -> tuple[dict[str, str], dict[str, str]]:
        """(Markdown key -> text, key -> checksum) of the repo's live entries."""
        snapshot = self.store.snapshot(repo, with_texts=True)
        if snapshot is None:
            return {}, {}
        texts = {key: text for key, text in snapshot.texts.items() if key.endswith(".md")}
        return texts, snapshot.checksums

    def delete_with_index(
        self,
        repo: str,
        key: str,
        *,
        author: Principal,
        provenance: Mapping[str, str] | None = None,
    ) -> DeletedWithIndex:
        """Delete `key` for the team with the index lines that link only to it, in one
        commit (or one proposal), as `memsync rm` does: no teammate is left with a line
        leading nowhere. Tried again (`INDEX_TRIES`) when a teammate changes an index
        between the read and the commit."""
        for attempt in range(INDEX_TRIES):
            texts, checksums = self._markdown(repo)
            changes: dict[str, tuple[str, list[int]]] = {}
            for index_key in reachable_indexes(texts):
                new_text, removed = drop_lines_linking(index_key, texts[index_key], {key})
                if removed and index_key != key:
                    changes[index_key] = (new_text, removed)
            if not changes:
                return DeletedWithIndex(
                    self.delete(repo, key, author=author, provenance=provenance), {}
                )
            try:
                result = self.put(
                    repo,
                    {index_key: text for index_key, (text, _) in changes.items()},
                    base_checksums={index_key: checksums[index_key] for index_key in changes},
                    author=author,
                    deletes=[key],
                    operation="delete",
                    provenance=provenance,
                )
            except StaleBase:
                if attempt + 1 < INDEX_TRIES:
                    continue  # a teammate changed an index meanwhile: read it again
                raise
            return DeletedWithIndex(result, {k: lines for k, (_, lines) in changes.items()})
        raise AssertionError("not reached: the last try returns or raises")

    def restore_with_index(
        self,
        repo: str,
        key: str,
        version: int,
        *,
        author: Principal,
        provenance: Mapping[str, str] | None = None,
    ) -> Restored:
        """`restore`, and for a note that was deleted, its index lines back (`relist`, a
        second commit: the store restores one key per commit)."""
        before = self.store.snapshot(repo, with_texts=False, key=key)
        was_deleted = before is None or key not in before.checksums
        result = self.restore(repo, key, version, author=author, provenance=provenance)
        if isinstance(result, ProposalResult) or not result.changed_keys:
            return Restored(result, was_deleted)
        if not (was_deleted and is_note_key(key)):
            return Restored(result, was_deleted)
        try:
            relisted = self.relist(repo, key, author=author, provenance=provenance)
        except ApiError as error:
            return Restored(result, was_deleted, relist_problem=error.message)
        return Restored(result, was_deleted, relisted)

    def _index_versions(self, repo: str, index_key: str) -> Iterator[tuple[int, str | None]]:
        """`index_key`'s versions newest first, each text read when asked for."""
        for item in reversed(self.store.key_history(repo, index_key)):
            if item.op == "delete":
                yield item.version, None
            else:
                yield item.version, self.store.key_version(repo, index_key, item.version).text

    def relist(
        self,
        repo: str,
        key: str,
        *,
        author: Principal,
        provenance: Mapping[str, str] | None = None,
    ) -> Relisted:
        """Put back, at the end of each index that does not link the restored note `key`,
        the lines of its newest version that did (`memory_index.restore_lines`, the rule
        `memsync restore` follows), in one commit; tried again like `delete_with_index`."""
        for attempt in range(INDEX_TRIES):
            texts, checksums = self._markdown(repo)
            listed = False
            edits: dict[str, str] = {}
            for index_key in reachable_indexes(texts):
                if any(link.target == key for link in links(index_key, texts[index_key])):
                    listed = True
                    continue
                found = restore_lines(index_key, key, self._index_versions(repo, index_key))
                if found is not None:
                    edits[index_key] = append_lines(texts[index_key], found[1])
            if not edits:
                return Relisted(listed, [], None)
            for index_key, text in edits.items():
                check_text(index_key, text, self.settings.max_entry_bytes)  # as a PUT
            try:
                result = self.put(
                    repo,
                    edits,
                    base_checksums={index_key: checksums[index_key] for index_key in edits},
                    author=author,
                    provenance=provenance,
                )
            except StaleBase:
                if attempt + 1 < INDEX_TRIES:
                    continue
                raise
            if isinstance(result, ProposalResult):  # review was switched on meanwhile
                return Relisted(listed, sorted(edits), None, result.proposal.id)
            return Relisted(True, sorted(edits), result)
        raise AssertionError("not reached: the last try returns or raises")

    def verify(
        self, repo: str, key: str, *, author: Principal, provenance: Mapping[str, str] | None
    ) -> tuple[CommitResult, list[str]]:
        """Record that `author` checked `key` against the code (no text changes, so no
        review: a verification is never a proposal), and announce the new version.

        In a reviewed repo a verification by someone who would propose carries no free
        text: every teammate's history shows it unreviewed, so its `agent`,
        `agentVersion` and `session` are left out (their names are returned)."""
        dropped: list[str] = []
        if provenance and self._proposes(author, repo):
            provenance, dropped = without_free_text(provenance)
        result = self.store.verify(repo, key, author=author.name, provenance=provenance)
        self.committed("verify", result)
        return result, dropped

    # -- review (docs/protocol.md section 3.12) ---------------------------------------------

    def review_policy(self, repo: str) -> bool:
        """Whether `repo` is reviewed (its most specific stored pattern says on)."""
        return self.store.is_reviewed(repo)

    @staticmethod
    def is_reviewer(principal: Principal) -> bool:
        """Whether the token may accept and reject (and commits directly): a read-write
        reviewer token."""
        return principal.reviewer and not principal.read_only

    def _may_propose(self, author: str | Principal, repo: str) -> bool:
        """Whether `author`'s write to `repo` is a proposal if the repo is reviewed."""
        return (
            isinstance(author, Principal) and not is_personal(repo) and not self.is_reviewer(author)
        )

    def _proposes(self, author: str | Principal, repo: str) -> bool:
        return self._may_propose(author, repo) and self.review_policy(repo)

    def _propose(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        deletes: Sequence[str],
        if_match: list[str] | None,
        base_checksums: Mapping[str, str | None] | None,
        author: Principal,
        agent: str | None,
        provenance: Mapping[str, str] | None = None,
    ) -> WriteOutcome:
        result = self.store.propose(
            repo,
            entries,
            deletes=deletes,
            if_match=if_match,
            base_checksums=base_checksums,
            max_entries=self.settings.max_entries,
            author=author.name,
            person=self.owner(author),
            agent=agent,
            max_pending=self.settings.max_pending_proposals,
            provenance=provenance,
        )
        if isinstance(result, ProposalResult):
            self.metrics.commits.labels("propose").inc()
            person = result.proposal.person
            for replaced in result.replaced:
                self.events.publish_proposal(repo, replaced, "replaced", person)
            self.events.publish_proposal(repo, result.proposal.id, "pending", person)
        return result

    @staticmethod
    def owner(principal: Principal) -> str:
        """Whose proposals a token's writes are (`personal.proposal_owner`)."""
        return proposal_owner(principal.name, principal.person)

    def _person_filter(self, principal: Principal) -> str | None:
        """Whose proposals the token sees: a reviewer everyone's, others their person's."""
        return None if self.is_reviewer(principal) else self.owner(principal)

    def pending_count(self, principal: Principal, repo: str) -> int:
        """Pending proposals the token may see in `repo`."""
        return self.store.pending_count(repo, person=self._person_filter(principal))

    def proposals(
        self,
        principal: Principal,
        repo: str,
        *,
        status: ProposalFilter = "pending",
        texts: bool = False,
    ) -> list[Proposal]:
        """The proposals the token may see, newest first; with `texts`, each with its
        texts, the team's, and `similar` notes (see `similar`)."""
        self.require(principal, repo, write=False)
        return self.store.proposals(
            repo, person=self._person_filter(principal), status=status, texts=texts
        )

    def similar(self, repo: str, proposals: Sequence[Proposal]) -> dict[int, list[dict[str, str]]]:
        """Per proposal (read with texts), up to 3 live notes the ranked search finds
        for what it says, from the repo's index kept between requests."""
        return self.search_indexes.similar(self.store, repo, proposals)

    def proposal(self, principal: Principal, repo: str, proposal_id: int) -> Proposal:
        """One proposal with its texts; `NotFound` for an unknown id or, to a token that
        is not a reviewer, another person's."""
        self.require(principal, repo, write=False)
        found = self.store.proposal(repo, proposal_id)
        person = self._person_filter(principal)
        if found is None or (person is not None and found.person != person):
            raise NotFound(f"no proposal {proposal_id} in {spoken(repo)}")
        return found

    def _require_reviewer(self, principal: Principal, repo: str) -> None:
        self.require(principal, repo, write=True)
        if not self.is_reviewer(principal):
            raise Forbidden("only a reviewer token may accept or reject proposals")

    def accept(self, principal: Principal, repo: str, proposal_id: int) -> Acceptance:
        """Commit a pending proposal as its author's, accepted by this reviewer, merged
        with what the team wrote since; announced as a commit and as a proposal event."""
        self._require_reviewer(principal, repo)
        accepted = self.store.accept_proposal(
            repo, proposal_id, reviewer=principal.name, max_entries=self.settings.max_entries
        )
        if accepted.changed_keys:
            self.committed("accept", accepted)
        self.events.publish_proposal(repo, proposal_id, "accepted", accepted.proposal.person)
        return accepted

    def reject(self, principal: Principal, repo: str, proposal_id: int, reason: str) -> Proposal:
        """Mark a pending proposal rejected for `reason` (checked: `checked_reason`)."""
        self._require_reviewer(principal, repo)
        rejected = self.store.reject_proposal(
            repo, proposal_id, reviewer=principal.name, reason=checked_reason(reason)
        )
        self.events.publish_proposal(repo, proposal_id, "rejected", rejected.person)
        return rejected


def _name(author: str | Principal) -> str:
    return author.name if isinstance(author, Principal) else author
