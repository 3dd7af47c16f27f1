"""The one path from a route to the store: the API (`routes/team_memory.py`) and the
web page (`ui/routes.py`) both call `TeamMemory` for reads, writes, scope checks and
the step after a commit.

    TeamMemory(store, settings, metrics, events)   one per application (app.state.team_memory)
      may_see(principal, repo) / may_write(...)    a token's scope and access, as booleans
      require(principal, repo, write=...)          the same as the API's 403
      visible_repos(principal)                     the repos a token's scope covers
      head / snapshot / changes_since / key_history / key_version / log / deleted_keys
      put / delete / restore                       a commit, then `committed` (metrics + event)
    check_keys(keys, settings) / check_text(...)   what a write refuses before the store

Routes parse the request, call one of these, and render JSON or HTML; they never
count a commit or publish an event themselves, so a new kind of route (a review gate,
another page) gets the same rules by calling the same methods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memsync_protocol.keys import key_problem, text_problem
from sync_server.auth import Principal, scope_allows
from sync_server.config import Settings
from sync_server.errors import BadRequest, EntryTooLarge, Forbidden, InvalidKeys
from sync_server.events import EventHub
from sync_server.metrics import Metrics
from sync_server.storage.base import (
    CommitResult,
    DeletedKey,
    Delta,
    HistoryItem,
    LogPage,
    RepoHead,
    RepoSummary,
    Snapshot,
    Store,
)


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

    # -- scope ---------------------------------------------------------------------------

    @staticmethod
    def may_see(principal: Principal, repo: str) -> bool:
        """Whether the token's scope covers `repo` (both normalized)."""
        return scope_allows(principal.repo_pattern, repo)

    @staticmethod
    def may_write(principal: Principal, repo: str) -> bool:
        """Whether the token may change `repo`: in its scope and not read-only."""
        return scope_allows(principal.repo_pattern, repo) and not principal.read_only

    @staticmethod
    def require(principal: Principal, repo: str, *, write: bool) -> None:
        """Raise `Forbidden` (the API's 403) unless the token may read (or write) `repo`;
        the web page answers "not found" instead, with `may_see`."""
        if not TeamMemory.may_see(principal, repo):
            raise Forbidden(f"this token may not access {repo}")
        if write and principal.read_only:
            raise Forbidden("this token is read-only")

    def visible_repos(self, principal: Principal) -> list[RepoSummary]:
        """The repos of the store that the token's scope covers."""
        return [r for r in self.store.list_repos() if self.may_see(principal, r.repo)]

    # -- reads ---------------------------------------------------------------------------

    def head(self, repo: str) -> RepoHead | None:
        return self.store.head(repo)

    def snapshot(self, repo: str, *, with_texts: bool, key: str | None = None) -> Snapshot | None:
        return self.store.snapshot(repo, with_texts=with_texts, key=key)

    def changes_since(self, repo: str, since: int) -> Delta | None:
        return self.store.changes_since(repo, since)

    def key_history(self, repo: str, key: str) -> list[HistoryItem]:
        return self.store.key_history(repo, key)

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
    ) -> CommitResult:
        """Upsert `entries` (and delete `deletes`) in one commit, announced as
        `operation` when it changed anything."""
        result = self.store.put(
            repo,
            entries,
            if_match=if_match,
            base_checksums=base_checksums,
            max_entries=self.settings.max_entries,
            author=author,
            deletes=deletes,
        )
        if result.changed_keys:
            self.committed(operation, result)
        return result

    def delete(
        self, repo: str, key: str, *, author: str, if_match: list[str] | None = None
    ) -> CommitResult:
        """Soft-delete `key` (its texts stay in history), announced."""
        result = self.store.delete(repo, key, if_match=if_match, author=author)
        self.committed("delete", result)
        return result

    def restore(self, repo: str, key: str, version: int, *, author: str) -> CommitResult:
        """Make `version` of `key` current again as a new version, announced when it
        changed anything."""
        result = self.store.restore(
            repo, key, version, max_entries=self.settings.max_entries, author=author
        )
        if result.changed_keys:
            self.committed("restore", result)
        return result
