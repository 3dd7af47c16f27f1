"""The one place a store is built from a database URL.

The server (`app.create_app`) and every `memsync-server` command open their store here,
so a new backend is chosen in one function. Imports are deferred: the token commands'
fast path (`sqlite_tokens`) must not pull SQLAlchemy in, and neither module imports
anything heavy at the top.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from sync_server.database_url import plain_sqlite_database

if TYPE_CHECKING:
    from sync_server.storage.sql import SqlStore
    from sync_server.storage.sqlite_tokens import SqliteTokens


def open_store(url: str, *, sqlite_synchronous: str = "normal") -> SqlStore:
    """The store behind `url` (SQLite or PostgreSQL, on SQLAlchemy); not migrated.

    `sqlite_synchronous` (`normal` or `full`, `Settings.sqlite_synchronous`): SQLite's
    `PRAGMA synchronous` on every connection; PostgreSQL ignores it."""
    from sync_server.storage.sql import SqlStore

    return SqlStore(url, sqlite_synchronous=sqlite_synchronous)


def sqlite_tokens(url: str) -> SqliteTokens | None:
    """The tokens of an existing SQLite file on the standard library's `sqlite3` (no
    SQLAlchemy to import), or None to leave the database to `open_store`: PostgreSQL,
    a URL with a query, a file to create, or one `sqlite3` cannot open. The caller
    checks its schema revision."""
    from sync_server.storage.sqlite_tokens import SqliteTokens

    name = plain_sqlite_database(url)
    if name in (None, "", ":memory:") or not Path(name).is_file():
        return None
    try:
        return SqliteTokens(Path(name))
    except sqlite3.Error:
        return None
