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

from sqlalchemy import func, insert, select, update

from memsync_protocol.provenance import encode as provenance_json
from sync_server.errors import NotFound
from sync_server.storage import schema
from sync_server.storage.base import CommitResult, RepoHead
from sync_server.storage.sql_base import COMMIT_CHANNEL, SqlBase, _holds_data, _now


class VerifyRows(SqlBase):
    """`verify`: one history row that changes no text."""

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
