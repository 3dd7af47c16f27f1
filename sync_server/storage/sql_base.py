"""The SQL plumbing every part of `SqlStore` stands on: connections, errors, the commit.

`SqlBase` builds the engine (WAL and `BEGIN IMMEDIATE` on SQLite), opens read snapshots
and write transactions, locks a repo row, and applies one commit (`_commit`) with the
live keys kept between commits (`live.LiveKeys`). The store's reads, history, operator
and review parts (`sql.py`, `sql_history.py`, `sql_admin.py`, `sql_review.py`) are
mixins on it, so each stays a readable size and all share one engine.

Driver errors are translated to `StorageUnavailable` in exactly one place
(`_translate_errors`). The engine is built with `hide_parameters=True` so no SQL
parameter (entry text, token hash) ever reaches an exception message or a log.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum
from memsync_protocol.keys import text_problem
from memsync_protocol.memory_index import is_index_key, unlisted
from memsync_protocol.provenance import encode as provenance_json
from sync_server.database_url import parse_database_url
from sync_server.errors import (
    BadRequest,
    IndexLinesDropped,
    NoTeamMemory,
    NotFound,
    PathClash,
    PreconditionFailed,
    StaleBase,
    StorageUnavailable,
    TooManyEntries,
)
from sync_server.storage import schema, write_now
from sync_server.storage.base import (
    Operation,
    RepoHead,
)
from sync_server.storage.live import LiveKeys, LiveKeysCache
from sync_server.storage.statements import WriteStatements, driver

# Keeps IN (...) lists well under SQLite's and PostgreSQL's parameter limits.
_IN_CHUNK = 500
# PostgreSQL channel on which each commit announces `{"repo", "version", "checksum"}`.
COMMIT_CHANNEL = "memsync_commits"


class _LiveAfter:
    """The keys live once a write is made: the current ones less its deletes, and its
    upserts (a `Container` for `memory_index.unlisted`, built without copying)."""

    __slots__ = ("current", "gone", "upserts")

    def __init__(
        self, current: Mapping[str, str], upserts: Mapping[str, object], gone: frozenset[str]
    ) -> None:
        self.current = current
        self.upserts = upserts
        self.gone = gone

    def __contains__(self, key: object) -> bool:
        return key in self.upserts or (key in self.current and key not in self.gone)


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


def _busy(error: BaseException | None) -> bool:
    """Whether a driver error says another writer holds the lock."""
    text = str(error).lower()
    return "locked" in text or "busy" in text


# How long a SQLite writer waits for another process's write lock.
BUSY_TIMEOUT_MS = 30_000
# SQLite's own default: a commit that leaves the WAL over this many pages checkpoints it
# (copies it into the database file, milliseconds of work: never on the event loop).
WAL_AUTOCHECKPOINT_PAGES = 1000
# Writes made on the event loop in a row (without checkpoints) before the next one is
# left to the writer thread, whose commit checkpoints as SQLite does by default.
LOOP_WRITES_IN_A_ROW = 100
# `Settings.sqlite_synchronous` as the pragma says it (a KeyError for anything else).
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}


def _begin_immediate(driver: sqlite3.Connection, at_once: bool) -> None:
    """`BEGIN IMMEDIATE` on the writer connection (busy timeout zero). When another
    process holds SQLite's write lock: `WriterBusy` at once if asked, else wait for it
    up to the busy timeout (then the driver's "database is locked")."""
    try:
        driver.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as error:
        if not _busy(error):
            raise
        if at_once:
            raise write_now.WriterBusy() from None
    driver.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    try:
        driver.execute("BEGIN IMMEDIATE")
    finally:
        driver.execute("PRAGMA busy_timeout=0")


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Turn the driver's connection and lock failures into `StorageUnavailable` (also
    those of statements run on the `sqlite3` connection itself, `statements`)."""
    try:
        yield
    except sqlite3.OperationalError as error:
        busy = _busy(error)
        raise StorageUnavailable(
            "storage is busy" if busy else "storage is unavailable",
            retry_after=1,
            cause=None if busy else storage_cause(error),
        ) from None
    except sqlite3.DatabaseError as error:
        cause = storage_cause(error)
        if cause is not None:
            raise StorageUnavailable(cause=cause) from None
        raise
    except OperationalError as error:
        busy = _busy(error.orig)
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


def checked_texts(entries: Mapping[str, str]) -> dict[str, str]:
    """The checksums of texts a write may store; `BadRequest` (`invalid_text`) for a text
    with NUL or lone surrogates: PostgreSQL cannot store NUL, and SQLite must not accept
    what PostgreSQL refuses."""
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
    return {key: entry_checksum(body) for key, body in entries.items()}


class SqlBase:
    """The engine, its transactions and the one commit path, shared by the store's parts."""

    def __init__(self, url: str, *, sqlite_synchronous: str = "normal") -> None:
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
            self._install_sqlite_hooks(self.engine, sqlite_synchronous)
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
        self._writer: Connection | None = None  # kept open under that lock (`_write`)
        # Under that lock too: whether the writer's commits may checkpoint the WAL (not
        # on the event loop), and the loop's writes since the writer thread's last one.
        self._checkpoints_on = True
        self._loop_writes = 0
        # One statement is atomic on its own: on PostgreSQL, `head()` skips BEGIN/COMMIT.
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._live = LiveKeysCache()
        # The write path's statements, compiled once for this dialect.
        self._sql = WriteStatements(self.engine.dialect)

    @staticmethod
    def _install_sqlite_hooks(engine: Engine, synchronous: str) -> None:
        """WAL, `synchronous` (normal or full: `Settings.sqlite_synchronous`), a busy
        timeout, and `BEGIN IMMEDIATE` for writes.

        pysqlite's own transaction handling is switched off so that we choose how each
        transaction begins: a write takes the write lock up front, so two writers never
        both read the old checksum and then fail to upgrade their locks.
        """

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={_SYNCHRONOUS[synchronous]}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            # On the driver connection itself: SQLAlchemy's statement machinery cost
            # a third of a transaction's overhead here. Its errors are the driver's,
            # which `_translate_errors` words as it does SQLAlchemy's.
            driver: Any = connection.connection.driver_connection
            if driver.in_transaction:  # the writer's, begun by `_begin_immediate`
                return
            write = connection.get_execution_options().get("memsync_write", False)
            driver.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    # -- connections ---------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with _translate_errors(), self.engine.connect() as connection:
            if self.dialect == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                yield connection

    @property
    def writes_now(self) -> bool:
        """Whether a write may be asked for at once (`write_now`): SQLite only, whose
        writes are local and short; PostgreSQL's go over the network."""
        return self.dialect == "sqlite"

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction. On SQLite, one at a time in this process (the writer
        lock), begun IMMEDIATE; asked `write_now`, it takes neither the lock nor
        SQLite's unless free at once (else `WriterBusy`, nothing written), and its
        commit does not checkpoint the WAL; after `LOOP_WRITES_IN_A_ROW` such writes
        the next is refused (`WriterBusy`), so the writer thread makes it and its commit
        checkpoints the WAL when it has grown past SQLite's default."""
        if self.dialect != "sqlite":
            with self._pooled_write() as connection:
                yield connection
            return
        at_once = write_now.asked()
        if not self._sqlite_writer.acquire(blocking=not at_once):
            raise write_now.WriterBusy()
        try:
            if not isinstance(self.engine.pool, QueuePool):  # an in-memory database
                if at_once:
                    raise write_now.WriterBusy()
                with self._pooled_write() as connection:
                    yield connection
                return
            if at_once and self._loop_writes >= LOOP_WRITES_IN_A_ROW:
                raise write_now.WriterBusy()  # the thread's turn: it checkpoints the WAL
            with _translate_errors():
                connection = self._writer or self._open_writer()
                try:
                    raw = driver(connection)
                    self._checkpoint_on_commit(raw, not at_once)
                    _begin_immediate(raw, at_once)
                    with connection.begin():  # begun: `_on_begin` leaves it
                        yield connection
                    self._loop_writes = self._loop_writes + 1 if at_once else 0
                    if at_once:
                        write_now.wrote()
                except (DBAPIError, sqlite3.Error):
                    self._drop_writer()  # a connection that failed is not kept
                    raise
        finally:
            self._sqlite_writer.release()

    @contextmanager
    def _pooled_write(self) -> Iterator[Connection]:
        """A write transaction on a connection of the pool (PostgreSQL, in-memory SQLite)."""
        with _translate_errors(), self.engine.connect() as connection:
            connection = connection.execution_options(memsync_write=True)
            with connection.begin():
                yield connection

    def _open_writer(self) -> Connection:
        """The connection this process's SQLite writes use, kept open between them
        (a pool checkout, its return and its reset cost twice SQLite's own BEGIN and
        COMMIT). Its busy timeout is zero: `_begin_immediate` waits when it must."""
        connection = self.engine.connect().execution_options(memsync_write=True)
        raw = driver(connection)
        raw.execute("PRAGMA busy_timeout=0")
        raw.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self._checkpoints_on = True
        self._writer = connection
        return connection

    def _checkpoint_on_commit(self, raw: sqlite3.Connection, on: bool) -> None:
        """Let the writer's commits checkpoint the WAL (SQLite's default) or not (a
        write on the event loop): set only when it changes."""
        if on != self._checkpoints_on:
            pages = WAL_AUTOCHECKPOINT_PAGES if on else 0
            raw.execute(f"PRAGMA wal_autocheckpoint={pages}")
            self._checkpoints_on = on

    def _drop_writer(self) -> None:
        """Close the kept writer connection for good (a failure, or the store's close)."""
        connection, self._writer = self._writer, None
        if connection is not None:
            with suppress(Exception):
                connection.invalidate()
                connection.close()

    def _upsert(self, table: Table) -> Any:
        """This dialect's INSERT that knows ON CONFLICT (imported when first needed)."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

    # -- repo rows -----------------------------------------------------------------

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

    def _readable_repo(self, connection: Connection, repo: str) -> Any:
        row = self._repo_row(connection, repo)
        if not _holds_data(row):
            raise NoTeamMemory(repo)
        return row

    def _lock_repo(self, connection: Connection, repo: str, *, create: bool) -> Any:
        """Lock the repo row for this transaction, creating it first when asked."""
        sql, run = self._sql, self._sql.on(connection)
        row = run.first(sql.lock_repo, {"name": repo})
        if row is not None or not create:
            return row
        new = {
            "name": repo,
            "version": 0,
            "checksum": EMPTY_REPO_CHECKSUM,
            "entry_count": 0,
            "history_floor": 0,
            "at": _now(),
        }
        run.run(sql.create_repo, [new])
        return run.first(sql.lock_repo, {"name": repo})

    def _planned_write(
        self,
        connection: Connection,
        row: Any,
        entries: Mapping[str, str],
        new_checksums: Mapping[str, str],
        *,
        deletes: Sequence[str],
        if_match: list[str] | None,
        base_checksums: Mapping[str, str | None] | None,
        max_entries: int,
    ) -> tuple[LiveKeys, dict[str, tuple[str, str]], list[str]]:
        """A PUT's checks, in order, on the locked row: If-Match, `baseChecksums`, the
        deletes being live, the index rule (`_check_index_lines`), the entry limit.
        Returns the live keys, the upserts that change a text (key -> (text, checksum))
        and the sorted deletes; a commit and a proposal both start from this, so a
        proposal is refused exactly as a PUT is."""
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
        self._check_index_lines(connection, row, current, upserts, gone)
        if upserts or gone:
            self._check_growth(row, live, upserts, gone, max_entries)
        return live, upserts, gone

    def _check_index_lines(
        self,
        connection: Connection,
        row: Any,
        current: Mapping[str, str],
        upserts: Mapping[str, tuple[str, str]],
        gone: Sequence[str],
    ) -> None:
        """`IndexLinesDropped` when the write rewrites a live index (`MEMORY.md`, at the
        root or in a folder) so that it no longer links a note its current text links
        and that stays live: the client's rule (`memory_index.unlisted`), checked here on
        the locked row, so no concurrent write slips between the texts compared. Costs
        one read of the old text, only for a write that changes an index, and never on
        the event loop (`write_now.decline`)."""
        indexes = sorted(key for key in upserts if key in current and is_index_key(key))
        if not indexes:
            return
        write_now.decline()  # an index's text and rule grow with the repo: not on the loop
        sql, run = self._sql, self._sql.on(connection)
        old = {
            key: found.text
            for key in indexes
            if (found := run.first(sql.entry_text, {"repo_id": row.id, "key": key}))
        }
        live = _LiveAfter(current, upserts, frozenset(gone))
        dropped = {
            key: sorted(notes)
            for key in indexes
            if key in old and (notes := unlisted(key, old[key], upserts[key][0], live))
        }
        if dropped:
            raise IndexLinesDropped(dropped)

    @staticmethod
    def _check_growth(
        row: Any,
        live: LiveKeys,
        upserts: Mapping[str, object],
        gone: Sequence[str],
        max_entries: int,
    ) -> None:
        """`TooManyEntries` when the change grows the repo past `max_entries`. A lowered
        limit must not freeze a repo already over it: only growth is refused."""
        added = sum(1 for key in upserts if key not in live.checksums)
        after = row.entry_count + added - len(gone)
        if after > row.entry_count and after > max_entries:
            raise TooManyEntries(max_entries, after)

    def _live_keys(self, connection: Connection, row: Any) -> LiveKeys:
        """The repo's live keys at the locked row's version (call under the repo lock).

        The cached map is used as it is when its version and checksum are the row's
        (the checksum is a hash of exactly the key -> checksum map). Behind the row, it
        is caught up from the rows changed since its version, and kept only when the
        result has the row's checksum (a repo delete leaves no history to catch up
        from; a rolled-back commit leaves the cache ahead). Otherwise all rows are read.
        A write asked for at once (on the event loop, `write_now`) reads no rows here: it
        is declined unless the cached map is the row's.
        """
        cached = self._live.get(row.id)
        if cached is not None and cached.version == row.version and cached.checksum == row.checksum:
            return cached
        write_now.decline()  # reading rows: not on the event loop
        if (
            cached is not None
            and cached.version < row.version
            and self._catch_up(connection, row, cached)
        ):
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
        accepted_by: str | None = None,
        provenance: Mapping[str, str] | None = None,
    ) -> RepoHead:
        """Apply upserts (key -> (text, checksum)) and deletes as one new version.

        `live` is the repo's live keys at `repo_row`'s version (`_live_keys`): they
        refuse a key that would be both a file and a directory (`PathClash`, before
        anything is written), and they give the new repo checksum. The comparison is
        done in Python and not by a range query, whose order would depend on the
        database collation.
        """
        sql, run = self._sql, self._sql.on(connection)
        repo_id = repo_row.id
        clashes = live.clashes(upserts)
        if clashes:
            raise PathClash(clashes)
        version = repo_row.version + 1
        now = _now()
        ordered = sorted(upserts.items())
        run.run(
            sql.insert_entry,
            [
                {"repo_id": repo_id, "key": key, "text": text, "checksum": sha, "version": version}
                for key, (text, sha) in ordered
                if key not in live.checksums
            ],
        )
        run.run(
            sql.update_entry,
            [
                {
                    "b_repo_id": repo_id,
                    "b_key": key,
                    "text": text,
                    "checksum": sha,
                    "version": version,
                }
                for key, (text, sha) in ordered
                if key in live.checksums
            ],
        )
        run.run(sql.delete_entry, [{"repo_id": repo_id, "key": key} for key in deletes])
        record = {
            "repo_id": repo_id,
            "version": version,
            "author": author,
            "at": now,
            "accepted_by": accepted_by,
            "provenance": provenance_json(provenance),
        }
        run.run(
            sql.insert_history,
            [
                {**record, "key": key, "op": op, "checksum": sha, "text": text}
                for key, (text, sha) in ordered
            ]
            + [
                {**record, "key": key, "op": "delete", "checksum": None, "text": None}
                for key in deletes
            ],
        )
        # Changes the cached map before the transaction commits: should the commit fail,
        # the map is ahead of the row and `_live_keys` reads the repo again.
        checksum = live.apply({key: sha for key, (_, sha) in ordered}, deletes, version)
        head = {"b_id": repo_id, "version": version, "checksum": checksum, "at": now}
        run.run(sql.update_head, [{**head, "entry_count": len(live.checksums)}])
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
