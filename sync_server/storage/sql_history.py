"""The store's history reads: one key's versions, the repo's log, the deleted keys.

Each read runs in one snapshot and, except `key_version`, never reads a text column:
the history indexes answer them (see `log`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    case,
    exists,
    func,
    select,
)

from memsync_protocol.provenance import decode as decode_provenance
from sync_server.errors import (
    BadRequest,
    NotFound,
)
from sync_server.storage import schema
from sync_server.storage.base import (
    LOG_KEYS,
    MAX_LOG_LIMIT,
    OPERATIONS,
    CommitSummary,
    DeletedKey,
    HistoryItem,
    LogPage,
)
from sync_server.storage.sql_base import SqlBase


class HistoryReads(SqlBase):
    """What history keeps, read for the API, the CLI and the web page."""

    def key_history(self, repo: str, key: str) -> list[HistoryItem]:
        """Every retained version of one key, oldest first."""
        history = schema.history
        with self._read() as connection:
            row = self._repo_row(connection, repo)
            rows = (
                []
                if row is None
                else connection.execute(
                    # Not the texts: a listing never shows them.
                    select(
                        history.c.key,
                        history.c.version,
                        history.c.checksum,
                        history.c.op,
                        history.c.author,
                        history.c.at,
                        history.c.accepted_by,
                        history.c.provenance,
                    )
                    .where(history.c.repo_id == row.id, history.c.key == key)
                    .order_by(history.c.version)
                ).all()
            )
        if not rows:
            raise NotFound(f"no history for key {key!r}")
        return [self._history_item(item, with_text=False) for item in rows]

    def key_version(self, repo: str, key: str, version: int) -> HistoryItem:
        """One version of one key, with its text (None for a delete)."""
        with self._read() as connection:
            found = self._history_row(connection, repo, key, version)
        return self._history_item(found, with_text=True)

    def _sorted_key(self) -> Any:
        """`history.key` ordered by code point, as Python sorts: SQLite's default BINARY
        collation compares UTF-8 bytes; PostgreSQL's database collation may not."""
        key = schema.history.c.key
        return key.collate("C") if self.dialect == "postgresql" else key

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
        """The repo's commits newest first, in two reads of the history indexes.

        First the page's versions (`ix_history_repo_version`, or
        `ix_history_repo_key_version` with `key`), one more than asked to learn whether
        another page follows; then the rows of exactly those versions, counted per
        version by window functions, of which only the first `LOG_KEYS` keys of each
        version come back. Neither read touches the `text` column.
        """
        if not 1 <= limit <= MAX_LOG_LIMIT:
            raise BadRequest(f"limit must be 1 to {MAX_LOG_LIMIT}")
        history = schema.history
        with self._read() as connection:
            row = self._readable_repo(connection, repo)
            query = select(history.c.version).where(history.c.repo_id == row.id)
            if before is not None:
                query = query.where(history.c.version < before)
            if author is not None:
                query = query.where(history.c.author == author)
            if since is not None:
                query = query.where(history.c.at >= since)
            if key is not None:
                query = query.where(history.c.key == key)
            found = (
                connection.execute(
                    query.group_by(history.c.version)
                    .order_by(history.c.version.desc())
                    .limit(limit + 1)
                )
                .scalars()
                .all()
            )
            page = list(found[:limit])
            if not page:
                return LogPage(commits=[], next_before=None)
            per_version = history.c.version
            counts = [
                func.sum(case((history.c.op == op, 1), else_=0))
                .over(partition_by=per_version)
                .label(f"n_{op}")
                for op in (*OPERATIONS, "verify")
            ]
            ranked = (
                select(
                    history.c.version,
                    history.c.key,
                    history.c.author,
                    history.c.at,
                    history.c.accepted_by,
                    history.c.provenance,
                    func.row_number()
                    .over(partition_by=per_version, order_by=self._sorted_key())
                    .label("rank"),
                    func.count().over(partition_by=per_version).label("key_count"),
                    *counts,
                )
                .where(history.c.repo_id == row.id, history.c.version.in_(page))
                .subquery()
            )
            rows = connection.execute(
                select(ranked)
                .where(ranked.c.rank <= LOG_KEYS)
                .order_by(ranked.c.version.desc(), ranked.c.rank)
            ).all()
        commits: list[CommitSummary] = []
        for item in rows:
            if commits and commits[-1].version == item.version:
                commits[-1].keys.append(item.key)
                continue
            ops: dict[str, int] = {op: int(getattr(item, f"n_{op}")) for op in OPERATIONS}
            if item.n_verify:
                ops["verify"] = int(item.n_verify)
            commits.append(
                CommitSummary(
                    version=item.version,
                    at=item.at,
                    author=item.author,
                    ops=ops,
                    keys=[item.key],
                    key_count=int(item.key_count),
                    accepted_by=item.accepted_by,
                    # Every row of one version has the same provenance.
                    provenance=decode_provenance(item.provenance),
                )
            )
        return LogPage(commits=commits, next_before=page[-1] if len(found) > limit else None)

    def deleted_keys(self, repo: str) -> list[DeletedKey]:
        """Keys whose newest history row is a delete and that are not live.

        The newest version of every key comes from `ix_history_repo_key_version` alone;
        live keys drop out against `ix_entries_repo_key_checksum`; only the rows of the
        remaining deletes, and the one version before each, are read (never the texts).
        """
        history, entries = schema.history, schema.entries
        with self._read() as connection:
            row = self._readable_repo(connection, repo)
            newest = (
                select(history.c.key, func.max(history.c.version).label("version"))
                .where(history.c.repo_id == row.id)
                .group_by(history.c.key)
                .subquery("newest")
            )
            live = exists().where(entries.c.repo_id == row.id, entries.c.key == newest.c.key)
            earlier = history.alias("earlier")
            last_text = (
                select(func.max(earlier.c.version))
                .where(
                    earlier.c.repo_id == row.id,
                    earlier.c.key == newest.c.key,
                    earlier.c.version < newest.c.version,
                    earlier.c.op != "delete",
                )
                .scalar_subquery()
            )
            rows = connection.execute(
                select(
                    history.c.key,
                    history.c.version,
                    history.c.author,
                    history.c.at,
                    last_text.label("last_version"),
                )
                .select_from(
                    newest.join(
                        history,
                        and_(
                            history.c.repo_id == row.id,
                            history.c.key == newest.c.key,
                            history.c.version == newest.c.version,
                        ),
                    )
                )
                .where(~live, history.c.op == "delete")
            ).all()
        found = [
            DeletedKey(
                key=item.key,
                version=item.version,
                author=item.author,
                at=item.at,
                last_version=item.last_version,
            )
            for item in rows
        ]
        # Newest delete first; keys of one delete in code-point order, as Python sorts.
        return sorted(found, key=lambda deleted: (-deleted.version, deleted.key))

    def _history_row(self, connection: Connection, repo: str, key: str, version: int) -> Any:
        history = schema.history
        row = self._repo_row(connection, repo)
        found = (
            None
            if row is None
            else connection.execute(
                select(history).where(
                    history.c.repo_id == row.id,
                    history.c.key == key,
                    history.c.version == version,
                )
            ).one_or_none()
        )
        if found is None:
            raise NotFound(f"key {key!r} has no version {version}")
        return found

    @staticmethod
    def _history_item(row: Any, *, with_text: bool) -> HistoryItem:
        return HistoryItem(
            key=row.key,
            version=row.version,
            checksum=row.checksum,
            op=row.op,
            author=row.author,
            at=row.at,
            text=row.text if with_text else None,
            accepted_by=row.accepted_by,
            provenance=decode_provenance(row.provenance),
        )
