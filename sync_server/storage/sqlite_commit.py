"""A commit's hot statements on SQLite, on the standard `sqlite3` module.

Building, cache-keying and compiling SQLAlchemy Core statements cost more than SQLite
itself for a one-key PUT (about 60% of `SqlStore.put` in a profile). On SQLite the
repo row's lock and a commit's writes (the entries, the history rows, the head) run
here as fixed SQL on the transaction's own driver connection: same table, same
transaction (begun IMMEDIATE by `SqlBase._write`, committed or rolled back by it), the
values in the form SQLAlchemy writes them (UTC times as naive text, `to_text`, which
the token commands' `sqlite_tokens` uses too). A driver error is worded by
`sql_base._translate_errors`, which is around every call made here. PostgreSQL
keeps the Core statements. The storage contract suite runs on both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the token commands import this module and must not load SQLAlchemy
    from sqlalchemy.engine import Connection


class RepoRow(NamedTuple):
    """A `repos` row, read by attribute like SQLAlchemy's rows."""

    id: int
    name: str
    version: int
    checksum: str
    entry_count: int
    history_floor: int
    last_modified: datetime
    deleted_at: datetime | None


_SELECT_REPO = (
    "SELECT id, name, version, checksum, entry_count, history_floor, last_modified,"
    " deleted_at FROM repos WHERE name = ?"
)
_CREATE_REPO = (
    "INSERT INTO repos (name, version, checksum, entry_count, history_floor, last_modified,"
    " deleted_at) VALUES (?, 0, ?, 0, 0, ?, NULL) ON CONFLICT (name) DO NOTHING"
)
_REVIEW_FLAGS = "SELECT pattern, review FROM repo_policies WHERE pattern IN (?, ?, ?)"
_ENTRY_TEXT = "SELECT text FROM entries WHERE repo_id = ? AND key = ?"
_INSERT_ENTRY = "INSERT INTO entries (repo_id, key, text, checksum, version) VALUES (?, ?, ?, ?, ?)"
_UPDATE_ENTRY = (
    "UPDATE entries SET text = ?, checksum = ?, version = ? WHERE repo_id = ? AND key = ?"
)
_DELETE_ENTRY = "DELETE FROM entries WHERE repo_id = ? AND key = ?"
_INSERT_HISTORY = (
    "INSERT INTO history (repo_id, key, version, op, checksum, text, author, at, accepted_by,"
    " provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_HEAD = (
    "UPDATE repos SET version = ?, checksum = ?, entry_count = ?, last_modified = ?,"
    " deleted_at = NULL WHERE id = ?"
)


def to_text(moment: datetime) -> str:
    """A UTC column's stored form, as SQLAlchemy's SQLite DATETIME writes it."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime given to a UTC column")
    value = moment.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


def from_text(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)


def driver(connection: Connection) -> sqlite3.Connection:
    """The `sqlite3` connection under a SQLAlchemy one (inside its transaction)."""
    raw: Any = connection.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def review_flags(connection: Connection, patterns: tuple[str, str, str]) -> dict[str, bool]:
    """The stored review switches of a repo's three patterns (pattern -> on): one
    statement, atomic on its own, so it needs no transaction."""
    rows = driver(connection).execute(_REVIEW_FLAGS, patterns).fetchall()
    return {pattern: bool(review) for pattern, review in rows}


def entry_texts(connection: Connection, repo_id: int, keys: Sequence[str]) -> dict[str, str]:
    """The current texts of those `keys` that are live (a PUT's index rule reads the
    index it replaces), in the write's transaction."""
    raw = driver(connection)
    found: dict[str, str] = {}
    for key in keys:
        row = raw.execute(_ENTRY_TEXT, (repo_id, key)).fetchone()
        if row is not None:
            found[key] = row[0]
    return found


def _repo_row(raw: sqlite3.Connection, repo: str) -> RepoRow | None:
    found = raw.execute(_SELECT_REPO, (repo,)).fetchone()
    if found is None:
        return None
    last_modified = from_text(found[6])
    assert last_modified is not None
    return RepoRow(
        id=found[0],
        name=found[1],
        version=found[2],
        checksum=found[3],
        entry_count=found[4],
        history_floor=found[5],
        last_modified=last_modified,
        deleted_at=from_text(found[7]),
    )


def lock_repo(
    connection: Connection, repo: str, *, create: bool, checksum: str, now: datetime
) -> RepoRow | None:
    """The repo row (created empty with `checksum` first when asked). The transaction
    began IMMEDIATE, so it already holds SQLite's write lock: the row cannot change
    under it."""
    raw = driver(connection)
    row = _repo_row(raw, repo)
    if row is not None or not create:
        return row
    raw.execute(_CREATE_REPO, (repo, checksum, to_text(now)))
    return _repo_row(raw, repo)


def write_commit(
    connection: Connection,
    repo_id: int,
    version: int,
    *,
    inserts: Sequence[tuple[str, str, str]],
    replaced: Sequence[tuple[str, str, str]],
    deletes: Sequence[str],
    records: Sequence[tuple[str, str, str | None, str | None]],
    author: str,
    accepted_by: str | None,
    provenance: str | None,
    checksum: str,
    entry_count: int,
    now: datetime,
) -> None:
    """One version's rows: new entries and replaced ones (key, text, checksum), deleted
    keys, history records (key, op, checksum, text) with the write's provenance (its
    stored JSON), and the head."""
    raw = driver(connection)
    at = to_text(now)
    if inserts:
        raw.executemany(_INSERT_ENTRY, [(repo_id, k, t, c, version) for k, t, c in inserts])
    if replaced:
        raw.executemany(_UPDATE_ENTRY, [(t, c, version, repo_id, k) for k, t, c in replaced])
    if deletes:
        raw.executemany(_DELETE_ENTRY, [(repo_id, key) for key in deletes])
    raw.executemany(
        _INSERT_HISTORY,
        [
            (repo_id, key, version, op, sha, text, author, at, accepted_by, provenance)
            for key, op, sha, text in records
        ],
    )
    raw.execute(_UPDATE_HEAD, (version, checksum, entry_count, at, repo_id))
