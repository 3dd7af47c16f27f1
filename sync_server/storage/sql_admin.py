"""The store's operator side: pruning, repo summaries and removal, tokens, server secrets.

What `memsync-server` commands and the server's own upkeep call; none of it is on a
client's sync path.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    LargeBinary,
    cast,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy import delete as sql_delete

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM
from sync_server.storage import schema
from sync_server.storage.base import (
    DuplicateTokenName,
    RepoRemoval,
    RepoSummary,
    SpacesRemoval,
    TokenRecord,
)
from sync_server.storage.sql_base import _IN_CHUNK, SqlBase, _chunks, _holds_data, _now


class AdminRows(SqlBase):
    """Repos and tokens as the operator manages them."""

    def prune_history(self, older_than: datetime) -> int:
        """Drop old history rows that are not the newest of their key.

        The newest row of each key stays, so every live text and every tombstone keeps
        its record; `history_floor` rises so `since` answers 410 where history is gone.
        """
        history, repos = schema.history, schema.repos
        removed = 0
        with self._write() as connection:
            repo_ids = connection.execute(select(repos.c.id)).scalars().all()
            for repo_id in repo_ids:
                rows = connection.execute(
                    select(history.c.id, history.c.key, history.c.version, history.c.at).where(
                        history.c.repo_id == repo_id
                    )
                ).all()
                newest_by_key: dict[str, int] = {}
                for item in rows:
                    newest_by_key[item.key] = max(newest_by_key.get(item.key, 0), item.version)
                doomed = [
                    item
                    for item in rows
                    if item.at < older_than and item.version < newest_by_key[item.key]
                ]
                if not doomed:
                    continue
                ids = [item.id for item in doomed]
                for start in range(0, len(ids), _IN_CHUNK):
                    connection.execute(
                        sql_delete(history).where(history.c.id.in_(ids[start : start + _IN_CHUNK]))
                    )
                floor = max(item.version for item in doomed)
                connection.execute(
                    update(repos)
                    .where(repos.c.id == repo_id, repos.c.history_floor < floor)
                    .values(history_floor=floor)
                )
                removed += len(doomed)
        return removed

    # -- repos, for the operator ---------------------------------------------------

    def _summaries(self, connection: Connection, names: Sequence[str] | None) -> list[RepoSummary]:
        repos, entries = schema.repos, schema.entries
        # Bytes of the UTF-8 texts: PostgreSQL counts octets directly; SQLite counts the
        # bytes of a text cast to a blob.
        size = (
            func.octet_length(entries.c.text)
            if self.dialect == "postgresql"
            else func.length(cast(entries.c.text, LargeBinary))
        )
        sizes = (
            select(entries.c.repo_id, func.coalesce(func.sum(size), 0).label("bytes"))
            .group_by(entries.c.repo_id)
            .subquery()
        )
        query = (
            select(repos, func.coalesce(sizes.c.bytes, 0).label("bytes"))
            .outerjoin(sizes, sizes.c.repo_id == repos.c.id)
            .where(repos.c.version > 0, repos.c.deleted_at.is_(None))
            .order_by(repos.c.name)
        )
        if names is not None:
            query = query.where(repos.c.name.in_(names))
        return [
            RepoSummary(
                repo=row.name,
                entries=row.entry_count,
                bytes=int(row.bytes),
                version=row.version,
                last_modified=row.last_modified,
                checksum=row.checksum,
            )
            for row in connection.execute(query)
        ]

    def list_repos(self) -> list[RepoSummary]:
        """Every repo that holds data (or did, before its entries were deleted), by name."""
        with self._read() as connection:
            return self._summaries(connection, None)

    def has_spaces(self, prefix: str) -> bool:
        """Whether a repo that holds data (or did) has an internal id starting with
        `prefix` (see `TokenStore.has_spaces`)."""
        repos = schema.repos
        query = select(repos.c.id).where(
            func.substr(repos.c.name, 1, len(prefix)) == prefix,
            repos.c.version > 0,
            repos.c.deleted_at.is_(None),
        )
        with self._read() as connection:
            return connection.execute(query.limit(1)).first() is not None

    def repo_summary(self, repo: str) -> RepoSummary | None:
        """One repo as `list_repos` shows it, or None when it holds no data."""
        with self._read() as connection:
            found = self._summaries(connection, [repo])
        return found[0] if found else None

    @staticmethod
    def _delete_proposals(connection: Connection, repo_id: int) -> int:
        """Remove every proposal of a repo (pending or decided) and their keys; return
        how many proposals."""
        proposals, keys = schema.proposals, schema.proposal_entries
        ids = select(proposals.c.id).where(proposals.c.repo_id == repo_id).scalar_subquery()
        connection.execute(sql_delete(keys).where(keys.c.proposal_id.in_(ids)))
        removed = connection.execute(sql_delete(proposals).where(proposals.c.repo_id == repo_id))
        return int(removed.rowcount)

    def delete_spaces(self, prefix: str) -> SpacesRemoval:
        """Remove the repos whose name starts with `prefix`, rows and all (see
        `Store.delete_spaces`). Unlike `delete_repo` the repo row goes too: it names the
        person. Each row is locked first, so no commit into a space runs meanwhile."""
        entries, history, repos = schema.entries, schema.history, schema.repos
        spaces: list[str] = []
        removed = {"entries": 0, "history": 0, "proposals": 0}
        with self._write() as connection:
            names = connection.execute(
                select(repos.c.name)
                .where(repos.c.name.startswith(prefix, autoescape=True))
                .order_by(repos.c.name)
            ).scalars()
            for name in list(names):
                row = self._lock_repo(connection, name, create=False)
                if row is None:
                    continue
                removed["entries"] += connection.execute(
                    sql_delete(entries).where(entries.c.repo_id == row.id)
                ).rowcount
                removed["history"] += connection.execute(
                    sql_delete(history).where(history.c.repo_id == row.id)
                ).rowcount
                removed["proposals"] += self._delete_proposals(connection, row.id)
                connection.execute(sql_delete(repos).where(repos.c.id == row.id))
                spaces.append(name)
                self._live.drop(row.id)
        return SpacesRemoval(spaces=spaces, **removed)

    def delete_repo(self, repo: str) -> RepoRemoval | None:
        """Remove the repo's entries, history and proposals, keeping its row and version
        number.

        The row stays, marked deleted, so that a later write continues from the next
        version: response caches and clients' `since` bases never meet a reused version.
        `history_floor` rises to the last version, so `since` below it answers 410.
        """
        entries, history, repos = schema.entries, schema.history, schema.repos
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            if not _holds_data(row):
                return None
            removed_entries = connection.execute(
                sql_delete(entries).where(entries.c.repo_id == row.id)
            ).rowcount
            removed_history = connection.execute(
                sql_delete(history).where(history.c.repo_id == row.id)
            ).rowcount
            self._delete_proposals(connection, row.id)
            connection.execute(
                update(repos)
                .where(repos.c.id == row.id)
                .values(
                    checksum=EMPTY_REPO_CHECKSUM,
                    entry_count=0,
                    history_floor=row.version,
                    deleted_at=_now(),
                )
            )
        self._live.drop(row.id)
        return RepoRemoval(repo=repo, entries=int(removed_entries), history=int(removed_history))

    # -- tokens --------------------------------------------------------------------

    @staticmethod
    def _token_from_row(row: Any) -> TokenRecord:
        return TokenRecord(
            id=row.id,
            lookup_id=row.lookup_id,
            name=row.name,
            repo_pattern=row.repo_pattern,
            read_only=row.read_only,
            secret_hash=row.secret_hash,
            created_at=row.created_at,
            revoked_at=row.revoked_at,
            expires_at=row.expires_at,
            reviewer=bool(row.reviewer),
            person=row.person,
        )

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
        """Store a new token's hash and scope; a live token of the same name refuses it."""
        tokens = schema.tokens
        with self._write() as connection:
            if self.dialect == "postgresql":
                # Serializes token creation, so two `token create --name x` at once
                # cannot both pass the name check (writes of entries are not affected).
                connection.execute(text("LOCK TABLE tokens IN SHARE ROW EXCLUSIVE MODE"))
            same_name = connection.execute(
                select(tokens)
                .where(tokens.c.name == name, tokens.c.revoked_at.is_(None))
                .order_by(tokens.c.id)
                .limit(1)
            ).one_or_none()
            if same_name is not None:
                raise DuplicateTokenName(self._token_from_row(same_name))
            connection.execute(
                insert(tokens).values(
                    lookup_id=lookup_id,
                    name=name,
                    repo_pattern=repo_pattern,
                    read_only=read_only,
                    secret_hash=secret_hash,
                    created_at=_now(),
                    revoked_at=None,
                    expires_at=expires_at,
                    reviewer=reviewer,
                    person=person,
                )
            )
            row = connection.execute(select(tokens).where(tokens.c.lookup_id == lookup_id)).one()
        return self._token_from_row(row)

    def find_token(self, lookup_id: str) -> TokenRecord | None:
        """The token with this lookup id, or None."""
        tokens = schema.tokens
        with self._read() as connection:
            row = connection.execute(
                select(tokens).where(tokens.c.lookup_id == lookup_id)
            ).one_or_none()
        return None if row is None else self._token_from_row(row)

    def find_tokens(self, lookup_ids: Sequence[str]) -> dict[str, TokenRecord]:
        """The tokens of those lookup ids that exist, in one query per 500 ids."""
        tokens = schema.tokens
        found: dict[str, TokenRecord] = {}
        with self._read() as connection:
            for chunk in _chunks(sorted(set(lookup_ids))):
                rows = connection.execute(select(tokens).where(tokens.c.lookup_id.in_(chunk)))
                for row in rows:
                    found[row.lookup_id] = self._token_from_row(row)
        return found

    def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""
        tokens = schema.tokens
        with self._read() as connection:
            rows = connection.execute(select(tokens).order_by(tokens.c.id)).all()
        return [self._token_from_row(row) for row in rows]

    def revoke_token(self, name_or_lookup_id: str) -> int:
        """Revoke live tokens whose name or lookup id matches; return how many."""
        tokens = schema.tokens
        with self._write() as connection:
            result = connection.execute(
                update(tokens)
                .where(
                    (tokens.c.name == name_or_lookup_id)
                    | (tokens.c.lookup_id == name_or_lookup_id),
                    tokens.c.revoked_at.is_(None),
                )
                .values(revoked_at=_now())
            )
            return int(result.rowcount)

    # -- server secrets ------------------------------------------------------------

    def server_secret(self, name: str) -> str:
        """The random secret called `name`, made and stored on first use.

        Two processes asking at once both keep the first one stored: the insert does
        nothing when the name is already there, and the value is read back.
        """
        table = schema.server_secrets
        query = select(table.c.value).where(table.c.name == name)
        with self._read() as connection:
            value = connection.execute(query).scalar_one_or_none()
        if value is not None:
            return str(value)
        make = self._upsert(table)
        with self._write() as connection:
            fresh = make.values(name=name, value=secrets.token_urlsafe(48), created_at=_now())
            connection.execute(fresh.on_conflict_do_nothing(index_elements=["name"]))
            return str(connection.execute(query).scalar_one())
