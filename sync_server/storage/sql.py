"""`SqlStore`: the `Store` protocol on SQLAlchemy Core, for SQLite and PostgreSQL.

Every write is one transaction that first locks the repo row (SQLite: `BEGIN
IMMEDIATE`, which takes the database write lock; PostgreSQL: `SELECT ... FOR UPDATE`),
then checks preconditions and the file/directory clash, applies the change, appends
history, computes the new repo checksum and bumps the version. The live keys a commit
needs are kept in the process between commits (`live.LiveKeys`, trusted only when its
version and checksum are the locked row's), so a commit costs O(change), not O(repo).
Reads run in one snapshot (a deferred SQLite transaction in WAL mode; REPEATABLE READ
on PostgreSQL) so a head and its entries always belong to the same version.

Driver errors are translated to `StorageUnavailable` in exactly one place
(`sql_base._translate_errors`). This module holds the schema's lifecycle, the sync reads
and the writes; history reads are in `sql_history`, the operator's side in `sql_admin`,
proposals in `sql_review`, the engine and the commit in `sql_base`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlalchemy import exists, func, select, text

from sync_server.errors import (
    HistoryGone,
    NotFound,
    PreconditionFailed,
    TooManyEntries,
)
from sync_server.storage import schema
from sync_server.storage.base import (
    SCHEMA_HEAD,
    CommitResult,
    Delta,
    MigrationResult,
    RepoHead,
    ReviewNeeded,
    Snapshot,
)
from sync_server.storage.sql_admin import AdminRows
from sync_server.storage.sql_base import COMMIT_CHANNEL as COMMIT_CHANNEL
from sync_server.storage.sql_base import (
    _chunks,
    _holds_data,
    _if_match_ok,
    _translate_errors,
    checked_texts,
)
from sync_server.storage.sql_base import sqlite_file as sqlite_file
from sync_server.storage.sql_base import storage_cause as storage_cause
from sync_server.storage.sql_history import HistoryReads
from sync_server.storage.sql_provenance import VerifyRows
from sync_server.storage.sql_review import ReviewRows

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Any fixed number works; it only has to be the same in every memsync process.
_MIGRATION_LOCK_ID = 7_164_019_245


# How long `close` waits for a write in progress to finish.
CLOSE_WAIT_SECONDS = 5.0


class SqlStore(HistoryReads, AdminRows, ReviewRows, VerifyRows):
    """Repos, entries, history and tokens in one SQL database."""

    # -- lifecycle -----------------------------------------------------------------

    def migrate(self) -> MigrationResult:
        """Upgrade the schema to the newest Alembic revision (serialized across hosts)."""
        from alembic import command
        from alembic.config import Config
        from alembic.migration import MigrationContext
        from alembic.script import ScriptDirectory

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        newest = ScriptDirectory.from_config(config).get_current_head()
        if newest != SCHEMA_HEAD:
            raise RuntimeError(
                f"SCHEMA_HEAD is {SCHEMA_HEAD!r} but the newest migration is {newest!r}"
            )
        with _translate_errors(), self.engine.connect() as connection:
            if self.dialect == "postgresql":
                # Several server processes may start at once against one database.
                connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
                connection.commit()
            try:
                before = MigrationContext.configure(connection).get_current_revision()
                connection.commit()
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
            finally:
                if self.dialect == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_unlock(:id)"), {"id": _MIGRATION_LOCK_ID}
                    )
                    connection.commit()
        return MigrationResult(before=before, after=newest)

    def schema_revision(self) -> tuple[str | None, bool]:
        """The schema's Alembic revision (None: none recorded) and whether any table exists.

        Plain SQL, no Alembic: a cheap check for commands that need a migrated database.
        """
        with _translate_errors(), self.engine.connect() as connection:
            if self.dialect == "sqlite":
                names = connection.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                ).scalars()
            else:
                names = connection.exec_driver_sql(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                ).scalars()
            tables = set(names)
            revision = None
            if "alembic_version" in tables:
                revision = connection.exec_driver_sql(
                    "SELECT version_num FROM alembic_version"
                ).scalar_one_or_none()
            connection.rollback()
        return revision, bool(tables)

    def ping(self) -> None:
        """Raise `StorageUnavailable` unless the database answers a query."""
        with self._read() as connection:
            connection.execute(select(func.count()).select_from(schema.repos)).scalar_one()

    def close(self) -> None:
        """Close the writer's connection and dispose of pooled ones. A write still
        waiting for another process's lock keeps its connection: the close does not
        wait more than a few seconds for it (a server shutting down)."""
        if self._sqlite_writer.acquire(timeout=CLOSE_WAIT_SECONDS):
            try:
                self._drop_writer()
            finally:
                self._sqlite_writer.release()
        self.engine.dispose()

    # -- reads ---------------------------------------------------------------------

    def head(self, repo: str) -> RepoHead | None:
        """The repo's head, or None when it has never held data."""
        if self.dialect == "postgresql":
            with _translate_errors(), self._autocommit.connect() as connection:
                row = self._repo_row(connection, repo)
        else:
            with self._read() as connection:
                row = self._repo_row(connection, repo)
        if not _holds_data(row):
            return None
        return self._head_from_row(repo, row)

    def heads(self, repos: Sequence[str]) -> dict[str, RepoHead]:
        """The heads of those of `repos` that hold data (one query per 500 repos)."""
        table = schema.repos
        found: dict[str, RepoHead] = {}
        names = sorted(set(repos))
        if not names:
            return found
        with self._read() as connection:
            for chunk in _chunks(names):
                rows = connection.execute(
                    select(table).where(
                        table.c.name.in_(chunk), table.c.version > 0, table.c.deleted_at.is_(None)
                    )
                )
                found.update({row.name: self._head_from_row(row.name, row) for row in rows})
        return found

    def snapshot(self, repo: str, *, with_texts: bool, key: str | None = None) -> Snapshot | None:
        """All live entries of the repo at one version (with `key`, only that one)."""
        entries = schema.entries
        with self._read() as connection:
            row = self._repo_row(connection, repo)
            if not _holds_data(row):
                return None
            columns = [entries.c.key, entries.c.checksum]
            if with_texts:
                columns.append(entries.c.text)
            query = select(*columns).where(entries.c.repo_id == row.id)
            if key is not None:
                query = query.where(entries.c.key == key)
            result = connection.execute(query.order_by(entries.c.key)).all()
        checksums = {item.key: item.checksum for item in result}
        texts = {item.key: item.text for item in result} if with_texts else {}
        return Snapshot(head=self._head_from_row(repo, row), checksums=checksums, texts=texts)

    def changes_since(self, repo: str, since: int) -> Delta | None:
        """Entries changed and keys deleted after version `since`."""
        entries, history = schema.entries, schema.history
        with self._read() as connection:
            row = self._repo_row(connection, repo)
            if not _holds_data(row):
                return None
            if since > row.version:
                raise HistoryGone(
                    f"version {since} is newer than the current version {row.version}",
                    details={"version": row.version},
                )
            if since < row.history_floor:
                raise HistoryGone(
                    f"history before version {row.history_floor} is no longer kept",
                    details={"version": row.version, "oldest": row.history_floor},
                )
            changed = connection.execute(
                select(entries.c.key, entries.c.text, entries.c.checksum).where(
                    entries.c.repo_id == row.id, entries.c.version > since
                )
            ).all()
            still_live = exists().where(
                entries.c.repo_id == history.c.repo_id, entries.c.key == history.c.key
            )
            deleted = connection.execute(
                select(history.c.key)
                .distinct()
                .where(
                    history.c.repo_id == row.id,
                    history.c.version > since,
                    history.c.op == "delete",
                    ~still_live,
                )
            ).scalars()
            deleted_keys = sorted(deleted)
        return Delta(
            head=self._head_from_row(repo, row),
            texts={item.key: item.text for item in changed},
            checksums={item.key: item.checksum for item in changed},
            deleted=deleted_keys,
        )

    # -- writes --------------------------------------------------------------------

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
        """Upsert entries (and delete `deletes`) atomically under the If-Match and base
        preconditions, as one version; `ReviewNeeded` (nothing written) when asked
        `unless_reviewed` and the repo is reviewed.

        Texts with NUL or lone surrogates are refused (`checked_texts`).
        """
        new_checksums = checked_texts(entries)
        with self._write() as connection:
            if unless_reviewed and self._reviewed_on(connection, repo):
                raise ReviewNeeded()
            row = self._lock_repo(connection, repo, create=True)
            live, upserts, gone = self._planned_write(
                connection,
                row,
                entries,
                new_checksums,
                deletes=deletes,
                if_match=if_match,
                base_checksums=base_checksums,
                max_entries=max_entries,
            )
            if not upserts and not gone:
                return CommitResult(head=self._head_from_row(repo, row), changed_keys=[])
            head = self._commit(
                connection,
                row,
                live,
                upserts=upserts,
                deletes=gone,
                op="put",
                author=author,
                provenance=provenance,
            )
        return CommitResult(head=head, changed_keys=sorted([*upserts, *gone]))

    def delete(
        self,
        repo: str,
        key: str,
        *,
        if_match: list[str] | None,
        author: str,
        provenance: Mapping[str, str] | None = None,
    ) -> CommitResult:
        """Soft-delete one live key (a tombstone stays in history)."""
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            if not _holds_data(row):
                raise NotFound(f"no entry {key!r}")
            if not _if_match_ok(if_match, row):
                raise PreconditionFailed(row.checksum)
            live = self._live_keys(connection, row)
            if key not in live.checksums:
                raise NotFound(f"no entry {key!r}")
            head = self._commit(
                connection,
                row,
                live,
                upserts={},
                deletes=[key],
                op="delete",
                author=author,
                provenance=provenance,
            )
        return CommitResult(head=head, changed_keys=[key])

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
        """Make an old text of `key` current again as a new version."""
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            old = self._history_row(connection, repo, key, version)
            if old.text is None:
                raise NotFound(f"version {version} of {key!r} is a delete; it has no text")
            live = self._live_keys(connection, row)
            current = live.checksums
            if current.get(key) == old.checksum:
                return CommitResult(head=self._head_from_row(repo, row), changed_keys=[])
            if key not in current and row.entry_count + 1 > max_entries:
                raise TooManyEntries(max_entries, row.entry_count + 1)
            head = self._commit(
                connection,
                row,
                live,
                upserts={key: (old.text, old.checksum)},
                deletes=[],
                op="restore",
                author=author,
                provenance=provenance,
            )
        return CommitResult(head=head, changed_keys=[key])
