"""`SqliteTokens`: the token commands' store on a SQLite file, on the standard library.

`memsync-server token create` (and `list`, `revoke`) on SQLite would spend most of its
time importing SQLAlchemy; this does the same few statements with `sqlite3`, on the same
table, in the form SQLAlchemy reads and writes it (`schema.tokens` through `SqlStore`:
`UtcDateTime` as naive-UTC text `YYYY-MM-DD HH:MM:SS.ffffff`, booleans as 0/1), with
the same connection settings (WAL, a 30 s busy timeout) and the same transactions (a
write begins IMMEDIATE, so two token creations at once, from any mix of processes and
either store, are serialized). The storage contract's token tests run against both
(`tests/storage/test_sqlite_tokens.py`).

It only opens a database that exists and leaves anything else to `SqlStore`: creating
the file, migrating, and wording what went wrong.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sync_server.errors import StorageUnavailable
from sync_server.storage.base import DuplicateTokenName, TokenRecord


def _to_text(moment: datetime) -> str:
    """A UTC column's stored form, as SQLAlchemy's SQLite DATETIME writes it."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime given to a UTC column")
    value = moment.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


def _from_text(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


# The columns of `schema.tokens`, in its order and `_record`'s. This module must not
# import SQLAlchemy, so it names them itself; tests/storage/test_sqlite_tokens.py checks
# both statements against the schema.
_SELECT = (
    "SELECT id, lookup_id, name, repo_pattern, read_only, secret_hash, created_at, "
    "revoked_at, expires_at, reviewer, person FROM tokens"
)
# Every column but the id, in the same order.
_INSERT = (
    "INSERT INTO tokens (lookup_id, name, repo_pattern, read_only, secret_hash, "
    "created_at, revoked_at, expires_at, reviewer, person) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_LIVE_NAMED = _SELECT + " WHERE name = ? AND revoked_at IS NULL ORDER BY id LIMIT 1"
_BY_LOOKUP_ID = _SELECT + " WHERE lookup_id = ?"
_ALL = _SELECT + " ORDER BY id"


def _record(row: tuple[Any, ...]) -> TokenRecord:
    created_at = _from_text(row[6])
    assert created_at is not None
    return TokenRecord(
        id=row[0],
        lookup_id=row[1],
        name=row[2],
        repo_pattern=row[3],
        read_only=bool(row[4]),
        secret_hash=row[5],
        created_at=created_at,
        revoked_at=_from_text(row[7]),
        expires_at=_from_text(row[8]),
        reviewer=bool(row[9]),
        person=row[10],
    )


@contextmanager
def _translated() -> Iterator[None]:
    """The driver's failures as `SqlStore` reports them (`StorageUnavailable`)."""
    try:
        yield
    except sqlite3.OperationalError as error:
        message = str(error).lower()
        if "locked" in message or "busy" in message:
            raise StorageUnavailable("storage is busy", retry_after=1) from None
        from sync_server.storage.sql import storage_cause  # only to word a failure

        raise StorageUnavailable(
            "storage is unavailable", retry_after=1, cause=storage_cause(error)
        ) from None
    except sqlite3.DatabaseError as error:
        from sync_server.storage.sql import storage_cause

        cause = storage_cause(error)
        if cause is None:
            raise
        raise StorageUnavailable(cause=cause) from None


class SqliteTokens:
    """The `TokenStore` of an existing SQLite database file (`sqlite3.Error` if it
    cannot be opened: the caller then leaves it to `SqlStore`)."""

    def __init__(self, path: Path) -> None:
        # mode=rw: never create a file (SqlStore creates it, readable by its owner only).
        uri = f"file:{quote(os.path.abspath(path))}?mode=rw"
        self._connection = sqlite3.connect(
            uri, uri=True, timeout=30, isolation_level=None, check_same_thread=False
        )
        # One statement or transaction at a time on the one connection.
        self._lock = threading.Lock()
        try:
            for pragma in (
                "journal_mode=WAL",
                "synchronous=NORMAL",
                "foreign_keys=ON",
                "busy_timeout=30000",
            ):
                self._connection.execute(f"PRAGMA {pragma}")
        except sqlite3.Error:
            self._connection.close()
            raise

    def schema_revision(self) -> tuple[str | None, bool]:
        """The schema's Alembic revision (None: none recorded) and whether any table
        exists; `sqlite3.Error` when the file cannot be read as a database."""
        with self._lock:
            tables = {
                name
                for (name,) in self._connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                )
            }
            revision = None
            if "alembic_version" in tables:
                row = self._connection.execute("SELECT version_num FROM alembic_version").fetchone()
                revision = None if row is None else str(row[0])
        return revision, bool(tables)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, _translated():
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, _translated():
            yield self._connection

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
        expires = None if expires_at is None else _to_text(expires_at)
        with self._write() as connection:
            same_name = connection.execute(_LIVE_NAMED, (name,)).fetchone()
            if same_name is not None:
                raise DuplicateTokenName(_record(same_name))
            connection.execute(
                _INSERT,
                (
                    lookup_id,
                    name,
                    repo_pattern,
                    int(read_only),
                    secret_hash,
                    _to_text(datetime.now(UTC)),
                    None,
                    expires,
                    int(reviewer),
                    person,
                ),
            )
            row = connection.execute(_BY_LOOKUP_ID, (lookup_id,)).fetchone()
        return _record(row)

    def find_token(self, lookup_id: str) -> TokenRecord | None:
        """The token with this lookup id, or None."""
        with self._read() as connection:
            row = connection.execute(_BY_LOOKUP_ID, (lookup_id,)).fetchone()
        return None if row is None else _record(row)

    def list_tokens(self) -> list[TokenRecord]:
        """All tokens, oldest first."""
        with self._read() as connection:
            rows = connection.execute(_ALL).fetchall()
        return [_record(row) for row in rows]

    def revoke_token(self, name_or_lookup_id: str) -> int:
        """Revoke live tokens whose name or lookup id matches; return how many."""
        with self._write() as connection:
            done = connection.execute(
                "UPDATE tokens SET revoked_at = ? "
                "WHERE (name = ? OR lookup_id = ?) AND revoked_at IS NULL",
                (_to_text(datetime.now(UTC)), name_or_lookup_id, name_or_lookup_id),
            )
            return done.rowcount

    def has_spaces(self, prefix: str) -> bool:
        """`SqlStore.has_spaces` on the same table."""
        with self._read() as connection:
            row = connection.execute(
                "SELECT id FROM repos WHERE substr(name, 1, ?) = ? AND version > 0 "
                "AND deleted_at IS NULL LIMIT 1",
                (len(prefix), prefix),
            ).fetchone()
        return row is not None

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._connection.close()
