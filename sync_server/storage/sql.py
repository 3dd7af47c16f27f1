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
(`_translate_errors`). The engine is built with `hide_parameters=True` so no SQL
parameter (entry text, token hash) ever reaches an exception message or a log.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    LargeBinary,
    Table,
    and_,
    bindparam,
    case,
    cast,
    create_engine,
    event,
    exists,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy import delete as sql_delete
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum
from memsync_protocol.keys import text_problem
from sync_server.database_url import parse_database_url
from sync_server.errors import (
    BadRequest,
    HistoryGone,
    NoTeamMemory,
    NotFound,
    PathClash,
    PreconditionFailed,
    StaleBase,
    StorageUnavailable,
    TooManyEntries,
)
from sync_server.storage import schema
from sync_server.storage.base import (
    LOG_KEYS,
    MAX_LOG_LIMIT,
    OPERATIONS,
    SCHEMA_HEAD,
    CommitResult,
    CommitSummary,
    DeletedKey,
    Delta,
    DuplicateTokenName,
    HistoryItem,
    LogPage,
    MigrationResult,
    Operation,
    RepoHead,
    RepoRemoval,
    RepoSummary,
    Snapshot,
    TokenRecord,
)
from sync_server.storage.live import LiveKeys, LiveKeysCache

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Keeps IN (...) lists well under SQLite's and PostgreSQL's parameter limits.
_IN_CHUNK = 500
# Any fixed number works; it only has to be the same in every memsync process.
_MIGRATION_LOCK_ID = 7_164_019_245
# PostgreSQL channel on which each commit announces `{"repo", "version", "checksum"}`.
COMMIT_CHANNEL = "memsync_commits"


def _chunks(items: Sequence[str], size: int = _IN_CHUNK) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _now() -> datetime:
    return datetime.now(UTC)


def _if_match_ok(if_match: list[str] | None, row: Any) -> bool:
    """RFC 9110: `*` matches only an existing representation, i.e. a repo with data."""
    if if_match is None:
        return True
    return row.checksum in if_match or ("*" in if_match and _holds_data(row))


# SQLSTATEs of a refused PostgreSQL connection, and what each means to an operator.
_SQLSTATE_CAUSES = {
    "28P01": "authentication failed",
    "28000": "authentication failed",
    "3D000": "no such database",
    "57P03": "the database is starting up or shutting down",
    "53300": "too many connections",
}
# Message patterns of libpq (it sends no SQLSTATE for a refused connection) and SQLite.
_MESSAGE_CAUSES = tuple(
    (re.compile(pattern), cause)
    for pattern, cause in (
        (r"connection refused", "connection refused"),
        (r"password authentication failed|no password supplied", "authentication failed"),
        (r'role ".*" does not exist', "authentication failed (no such user)"),
        (r'database ".*" does not exist', "no such database"),
        (
            r"could not translate host name|failed to resolve host|name or service not known",
            "unknown host",
        ),
        (r"timeout expired|timed out", "connection timed out"),
        (r"no route to host|network is unreachable", "no route to host"),
        (r"unable to open database file", "cannot open the database file"),
        (r"readonly database", "the database file is read-only"),
        (r"disk i/o error", "disk I/O error"),
        (r"file is not a database", "the file is not a SQLite database"),
    )
)


def storage_cause(error: BaseException) -> str | None:
    """Why the driver could not reach the database, in a few words; None when unknown.

    Read from the SQLSTATE when the server sent one, else from libpq's or SQLite's
    message. Only fixed phrases come out, never the message itself (it can quote the
    user name, host or query).
    """
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate in _SQLSTATE_CAUSES:
        return _SQLSTATE_CAUSES[sqlstate]
    message = str(error).lower()
    for pattern, cause in _MESSAGE_CAUSES:
        if pattern.search(message):
            return cause
    return None


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Turn the driver's connection and lock failures into `StorageUnavailable`."""
    try:
        yield
    except OperationalError as error:
        busy = "locked" in str(error.orig).lower() or "busy" in str(error.orig).lower()
        raise StorageUnavailable(
            "storage is busy" if busy else "storage is unavailable",
            retry_after=1,
            cause=None if busy else storage_cause(error.orig or error),
        ) from None
    except DBAPIError as error:
        if error.connection_invalidated:
            raise StorageUnavailable() from None
        # SQLite reports a file that is not a database as a DatabaseError.
        cause = storage_cause(error.orig or error)
        if cause is not None:
            raise StorageUnavailable(cause=cause) from None
        raise


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL, or None for another database or an in-memory one."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _create_private_file(path: Path) -> None:
    """Create a missing SQLite file (and its folder) readable by this user only.

    It holds every note and the token hashes. SQLite gives its -wal and -shm files the
    database file's mode, so they are private too.
    """
    if path.exists():
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise StorageUnavailable(cause=f"cannot create its folder: {_reason(error)}") from None
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass  # another process created it first
    except OSError as error:
        raise StorageUnavailable(cause=f"cannot create the file: {_reason(error)}") from None


def _reason(error: OSError) -> str:
    return (error.strerror or type(error).__name__).lower()


def _holds_data(row: Any) -> bool:
    """Whether a repo row is one a reader sees: written at least once and not deleted."""
    return row is not None and row.version > 0 and row.deleted_at is None


class SqlStore:
    """Repos, entries, history and tokens in one SQL database."""

    def __init__(self, url: str) -> None:
        # A ValueError naming the problem, never the password, for a malformed URL.
        parsed = parse_database_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                _create_private_file(Path(parsed.database))
            self.engine: Engine = create_engine(
                parsed,
                hide_parameters=True,
                connect_args={"check_same_thread": False, "timeout": 30},
                pool_size=8,
                max_overflow=32,
            )
            self._install_sqlite_hooks(self.engine)
        elif self.dialect == "postgresql":
            self.engine = create_engine(
                parsed,
                hide_parameters=True,
                pool_size=8,
                max_overflow=32,
                pool_pre_ping=True,
            )
        else:
            raise ValueError(f"unsupported database {self.dialect!r}")
        # SQLite has one writer at a time anyway; queueing this process's writers on a
        # lock keeps them out of SQLite's sleep-and-retry busy handler (which gave
        # second-long p99s). The busy timeout still covers other processes.
        self._sqlite_writer = threading.Lock()
        # One statement is atomic on its own: on PostgreSQL, `head()` skips BEGIN/COMMIT.
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._live = LiveKeysCache()

    @staticmethod
    def _install_sqlite_hooks(engine: Engine) -> None:
        """WAL, a busy timeout, and `BEGIN IMMEDIATE` for writes.

        pysqlite's own transaction handling is switched off so that we choose how each
        transaction begins: a write takes the write lock up front, so two writers never
        both read the old checksum and then fail to upgrade their locks.
        """

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            write = connection.get_execution_options().get("memsync_write", False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    # -- connections ---------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with _translate_errors(), self.engine.connect() as connection:
            if self.dialect == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                yield connection

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._writer_turn(), _translate_errors(), self.engine.connect() as connection:
            connection = connection.execution_options(memsync_write=True)
            with connection.begin():
                yield connection

    @contextmanager
    def _writer_turn(self) -> Iterator[None]:
        if self.dialect == "sqlite":
            with self._sqlite_writer:
                yield
        else:
            yield

    def _upsert(self, table: Table) -> Any:
        """This dialect's INSERT that knows ON CONFLICT (imported when first needed)."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

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
        """Dispose of pooled connections."""
        self.engine.dispose()

    # -- reads ---------------------------------------------------------------------

    @staticmethod
    def _head_from_row(name: str, row: Any) -> RepoHead:
        return RepoHead(
            repo=name,
            version=row.version,
            checksum=row.checksum,
            last_modified=row.last_modified,
            entry_count=row.entry_count,
        )

    def _repo_row(self, connection: Connection, repo: str) -> Any:
        return connection.execute(
            select(schema.repos).where(schema.repos.c.name == repo)
        ).one_or_none()

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

    def _readable_repo(self, connection: Connection, repo: str) -> Any:
        row = self._repo_row(connection, repo)
        if not _holds_data(row):
            raise NoTeamMemory(repo)
        return row

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
                for op in OPERATIONS
            ]
            ranked = (
                select(
                    history.c.version,
                    history.c.key,
                    history.c.author,
                    history.c.at,
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
            commits.append(
                CommitSummary(
                    version=item.version,
                    at=item.at,
                    author=item.author,
                    ops={op: int(getattr(item, f"n_{op}")) for op in OPERATIONS},
                    keys=[item.key],
                    key_count=int(item.key_count),
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
        )

    # -- writes --------------------------------------------------------------------

    def _lock_repo(self, connection: Connection, repo: str, *, create: bool) -> Any:
        """Lock the repo row for this transaction, creating it first when asked."""
        repos = schema.repos
        query = select(repos).where(repos.c.name == repo)
        if self.dialect == "postgresql":
            query = query.with_for_update()
        row = connection.execute(query).one_or_none()
        if row is not None or not create:
            return row
        values = {
            "name": repo,
            "version": 0,
            "checksum": EMPTY_REPO_CHECKSUM,
            "entry_count": 0,
            "history_floor": 0,
            "last_modified": _now(),
            "deleted_at": None,
        }
        # Two first writers may race to create the row: the loser's insert does nothing
        # (after waiting for the winner's commit) and it then locks the winner's row.
        insert_new = self._upsert(repos)
        connection.execute(insert_new.values(**values).on_conflict_do_nothing())
        return connection.execute(query).one()

    def _live_keys(self, connection: Connection, row: Any) -> LiveKeys:
        """The repo's live keys at the locked row's version (call under the repo lock).

        The cached map is used as it is when its version and checksum are the row's
        (the checksum is a hash of exactly the key -> checksum map). Behind the row, it
        is caught up from the rows changed since its version, and kept only when the
        result has the row's checksum (a repo delete leaves no history to catch up
        from; a rolled-back commit leaves the cache ahead). Otherwise all rows are read.
        """
        cached = self._live.get(row.id)
        if cached is not None:
            if cached.version == row.version and cached.checksum == row.checksum:
                return cached
            if cached.version < row.version and self._catch_up(connection, row, cached):
                return cached
        entries = schema.entries
        rows = connection.execute(
            select(entries.c.key, entries.c.checksum).where(entries.c.repo_id == row.id)
        )
        fresh = LiveKeys(row.version, {item.key: item.checksum for item in rows})
        self._live.put(row.id, fresh)
        return fresh

    def _catch_up(self, connection: Connection, row: Any, cached: LiveKeys) -> bool:
        """Apply the commits after `cached.version`; True when that gives the row's checksum."""
        entries, history = schema.entries, schema.history
        since = cached.version
        changed = {
            item.key: item.checksum
            for item in connection.execute(
                select(entries.c.key, entries.c.checksum).where(
                    entries.c.repo_id == row.id, entries.c.version > since
                )
            )
        }
        # A key deleted and written again since is in `changed`; pruning keeps the
        # newest record of every key, so no delete after `since` is lost.
        deleted = connection.execute(
            select(history.c.key)
            .distinct()
            .where(
                history.c.repo_id == row.id,
                history.c.version > since,
                history.c.op == "delete",
            )
        ).scalars()
        gone = [key for key in deleted if key not in changed]
        expected: str = row.checksum
        return cached.apply(changed, gone, row.version) == expected

    def _commit(
        self,
        connection: Connection,
        repo_row: Any,
        live: LiveKeys,
        *,
        upserts: Mapping[str, tuple[str, str]],
        deletes: Sequence[str],
        op: Operation,
        author: str,
    ) -> RepoHead:
        """Apply upserts (key -> (text, checksum)) and deletes as one new version.

        `live` is the repo's live keys at `repo_row`'s version (`_live_keys`): they
        refuse a key that would be both a file and a directory (`PathClash`, before
        anything is written), and they give the new repo checksum. The comparison is
        done in Python and not by a range query, whose order would depend on the
        database collation.
        """
        entries, history, repos = schema.entries, schema.history, schema.repos
        repo_id = repo_row.id
        clashes = live.clashes(upserts)
        if clashes:
            raise PathClash(clashes)
        existing = {key for key in upserts if key in live.checksums}
        version = repo_row.version + 1
        now = _now()
        inserts = [
            {"repo_id": repo_id, "key": key, "text": body, "checksum": checksum, "version": version}
            for key, (body, checksum) in sorted(upserts.items())
            if key not in existing
        ]
        if inserts:
            connection.execute(insert(entries), inserts)
        replaced = [
            {"b_key": key, "b_text": body, "b_checksum": checksum}
            for key, (body, checksum) in sorted(upserts.items())
            if key in existing
        ]
        if replaced:
            # One statement, executed for many rows (not one statement built per key).
            connection.execute(
                update(entries)
                .where(entries.c.repo_id == repo_id, entries.c.key == bindparam("b_key"))
                .values(
                    text=bindparam("b_text"), checksum=bindparam("b_checksum"), version=version
                ),
                replaced,
            )
        for key in deletes:
            connection.execute(
                sql_delete(entries).where(entries.c.repo_id == repo_id, entries.c.key == key)
            )
        records = [
            {
                "repo_id": repo_id,
                "key": key,
                "version": version,
                "op": op,
                "checksum": checksum,
                "text": body,
                "author": author,
                "at": now,
            }
            for key, (body, checksum) in sorted(upserts.items())
        ] + [
            {
                "repo_id": repo_id,
                "key": key,
                "version": version,
                "op": "delete",
                "checksum": None,
                "text": None,
                "author": author,
                "at": now,
            }
            for key in deletes
        ]
        connection.execute(insert(history), records)
        # Changes the cached map before the transaction commits: should the commit fail,
        # the map is ahead of the row and `_live_keys` reads the repo again.
        checksum = live.apply(
            {key: checksum for key, (_, checksum) in upserts.items()}, deletes, version
        )
        connection.execute(
            update(repos)
            .where(repos.c.id == repo_id)
            .values(
                version=version,
                checksum=checksum,
                entry_count=len(live.checksums),
                last_modified=now,
                deleted_at=None,
            )
        )
        if self.dialect == "postgresql":
            # Queued in this transaction, so listeners in every server process hear it
            # exactly when (and only if) the commit is visible.
            notice = json.dumps({"repo": repo_row.name, "version": version, "checksum": checksum})
            connection.execute(select(func.pg_notify(COMMIT_CHANNEL, notice)))
        return RepoHead(
            repo=repo_row.name,
            version=version,
            checksum=checksum,
            last_modified=now,
            entry_count=len(live.checksums),
        )

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
    ) -> CommitResult:
        """Upsert entries (and delete `deletes`) atomically under the If-Match and base
        preconditions, as one version.

        Texts with NUL or lone surrogates are refused (`BadRequest`): PostgreSQL cannot
        store NUL, and SQLite must not accept what PostgreSQL refuses.
        """
        problems = {key: text_problem(body) for key, body in entries.items()}
        bad = sorted((key, problem) for key, problem in problems.items() if problem)
        if bad:
            raise BadRequest(
                "entry text must be UTF-8 without NUL characters",
                details={
                    "error_code": "invalid_text",
                    "keys": [{"key": key, "reason": problem} for key, problem in bad],
                },
            )
        new_checksums = {key: entry_checksum(body) for key, body in entries.items()}
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=True)
            if not _if_match_ok(if_match, row):
                raise PreconditionFailed(row.checksum)
            live = self._live_keys(connection, row)
            current = live.checksums
            if base_checksums:
                conflicts = [
                    (key, current.get(key))
                    for key, expected in sorted(base_checksums.items())
                    if current.get(key) != expected
                ]
                if conflicts:
                    raise StaleBase(conflicts)
            gone = sorted(set(deletes))
            missing = [key for key in gone if key not in current]
            if missing:
                raise NotFound(f"no entry {missing[0]!r}")
            upserts = {
                key: (body, new_checksums[key])
                for key, body in entries.items()
                if current.get(key) != new_checksums[key]
            }
            if not upserts and not gone:
                return CommitResult(head=self._head_from_row(repo, row), changed_keys=[])
            added = sum(1 for key in upserts if key not in current)
            after = row.entry_count + added - len(gone)
            # A lowered limit must not freeze a repo already over it: only growth is refused.
            if after > row.entry_count and after > max_entries:
                raise TooManyEntries(max_entries, after)
            head = self._commit(
                connection,
                row,
                live,
                upserts=upserts,
                deletes=gone,
                op="put",
                author=author,
            )
        return CommitResult(head=head, changed_keys=sorted([*upserts, *gone]))

    def delete(
        self, repo: str, key: str, *, if_match: list[str] | None, author: str
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
            )
        return CommitResult(head=head, changed_keys=[key])

    def restore(
        self, repo: str, key: str, version: int, *, max_entries: int, author: str
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
            )
        return CommitResult(head=head, changed_keys=[key])

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

    def repo_summary(self, repo: str) -> RepoSummary | None:
        """One repo as `list_repos` shows it, or None when it holds no data."""
        with self._read() as connection:
            found = self._summaries(connection, [repo])
        return found[0] if found else None

    def delete_repo(self, repo: str) -> RepoRemoval | None:
        """Remove the repo's entries and history, keeping its row and version number.

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
