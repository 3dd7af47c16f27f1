"""The store's verifications: a note checked against the code, recorded in history.

A verification is a new repo version whose only history row has op `verify`, the key's
current text and checksum, the checker as author and (usually) the commit checked in
its provenance. Entries keep their versions and the repo keeps its checksum, so a full
read, a `since` read and every checksum are unchanged; only the version number and
`lastModified` move, and the log and the key's history show who checked and when.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlalchemy import and_, func, insert, select, update

from memsync_protocol.provenance import decode as decode_provenance
from memsync_protocol.provenance import encode as provenance_json
from sync_server.errors import NotFound
from sync_server.storage import schema
from sync_server.storage.base import CommitResult, KeySource, RepoHead
from sync_server.storage.sql_base import COMMIT_CHANNEL, SqlBase, _holds_data, _now

# The ops whose row says where a key's current text came from (a delete never does).
_SOURCE_OPS = ("put", "restore", "verify")


class VerifyRows(SqlBase):
    """`verify`: one history row that changes no text; `sources`: each live key's
    newest such row or write, for freshness on the readers' machines."""

    def sources(self, repo: str) -> dict[str, KeySource]:
        """Each live key's newest put, restore or verify row, in one query: the newest
        version per key among the rows of those ops, joined to the live entries."""
        entries, history = schema.entries, schema.history
        with self._read() as connection:
            row = self._readable_repo(connection, repo)
            newest = (
                select(history.c.key, func.max(history.c.version).label("version"))
                .join(
                    entries,
                    and_(entries.c.repo_id == history.c.repo_id, entries.c.key == history.c.key),
                )
                .where(history.c.repo_id == row.id, history.c.op.in_(_SOURCE_OPS))
                .group_by(history.c.key)
                .subquery()
            )
            rows = connection.execute(
                select(
                    history.c.key,
                    history.c.version,
                    history.c.checksum,
                    history.c.at,
                    history.c.author,
                    history.c.provenance,
                ).join(
                    newest,
                    and_(
                        history.c.repo_id == row.id,
                        history.c.key == newest.c.key,
                        history.c.version == newest.c.version,
                    ),
                )
            ).all()
        found: dict[str, KeySource] = {}
        for item in rows:
            commit = (decode_provenance(item.provenance) or {}).get("commit")
            found[item.key] = KeySource(item.version, item.checksum, item.at, item.author, commit)
        return found

    def verify(
        self, repo: str, key: str, *, author: str, provenance: Mapping[str, str] | None = None
    ) -> CommitResult:
        """Record that `author` checked live `key`; `NotFound` when it is not live."""
        entries, history, repos = schema.entries, schema.history, schema.repos
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            if not _holds_data(row):
                raise NotFound(f"no entry {key!r}")
            current = connection.execute(
                select(entries.c.text, entries.c.checksum).where(
                    entries.c.repo_id == row.id, entries.c.key == key
                )
            ).one_or_none()
            if current is None:
                raise NotFound(f"no entry {key!r}")
            live = self._live_keys(connection, row)
            version = row.version + 1
            now = _now()
            connection.execute(
                insert(history).values(
                    repo_id=row.id,
                    key=key,
                    version=version,
                    op="verify",
                    checksum=current.checksum,
                    text=current.text,
                    author=author,
                    at=now,
                    accepted_by=None,
                    provenance=provenance_json(provenance),
                )
            )
            # The live keys move to the new version with the same checksums.
            checksum = live.apply({}, [], version)
            connection.execute(
                update(repos)
                .where(repos.c.id == row.id)
                .values(version=version, last_modified=now, deleted_at=None)
            )
            if self.dialect == "postgresql":
                notice = json.dumps({"repo": row.name, "version": version, "checksum": checksum})
                connection.execute(select(func.pg_notify(COMMIT_CHANNEL, notice)))
        head = RepoHead(
            repo=row.name,
            version=version,
            checksum=checksum,
            last_modified=now,
            entry_count=len(live.checksums),
        )
        return CommitResult(head=head, changed_keys=[key])
